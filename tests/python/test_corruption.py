"""Damaged stores fail with a typed error naming the problem: never a panic, never wrong values."""

import json
import os
import pathlib

import corrupt
import numpy as np
import pytest

import strata
from conftest import make_nc
from strata.cli import main


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.strata"
    strata.import_file(make_nc(tmp_path / "s.nc", times=range(20)), path, slab_records=8)
    return path


def files(store, sub):
    return sorted((pathlib.Path(store) / sub).iterdir())


def read_all(path):
    ds = strata.open(path)
    return {n: ds[n][...] for n in ds.variables}


def test_truncated_manifest(store):
    m = files(store, "manifests")[-1]
    data = m.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        m.write_bytes(data[:cut])
        with pytest.raises(strata.CorruptionError, match="manifest"):
            strata.open(store)


def test_future_format_version_is_a_compatibility_error(store):
    m = files(store, "manifests")[-1]
    meta = json.loads(m.read_text())
    meta["format_version"] = 99
    m.write_text(json.dumps(meta))
    with pytest.raises(strata.CompatibilityError, match="format version 99"):
        strata.open(store)


def test_inconsistent_manifest_is_corruption(store):
    m = files(store, "manifests")[-1]
    meta = json.loads(m.read_text())
    meta["dims"][0]["size"] += 1
    m.write_text(json.dumps(meta))
    # Valid JSON with different content: the manifest's checksum no longer matches.
    with pytest.raises(strata.CorruptionError, match="does not match its checksum"):
        strata.open(store)
    # Without a checksum (manifests written before it had one), the rules still catch it.
    del meta["checksum"]
    m.write_text(json.dumps(meta))
    with pytest.raises(strata.CorruptionError, match="slabs hold 20 records"):
        strata.open(store)


def test_garbled_head(store):
    (pathlib.Path(store) / "HEAD").write_text("{not json")
    with pytest.raises(strata.CorruptionError, match="HEAD"):
        strata.open(store)


@pytest.mark.parametrize("cut", [0, 1, 31, -9, -1])
def test_truncated_index_file(store, cut):
    for f in files(store, "index"):
        data = f.read_bytes()
        f.write_bytes(data[: cut % len(data)])
    with pytest.raises(strata.CorruptionError, match="index file"):
        read_all(store)


def test_every_flipped_byte_of_a_data_file_is_caught(store):
    f = max(files(store, "data"), key=os.path.getsize)
    data = bytearray(f.read_bytes())
    for pos in range(24, len(data), max(1, len(data) // 40)):
        bad = bytearray(data)
        bad[pos] ^= 0x5A
        f.write_bytes(bytes(bad))
        with pytest.raises(strata.CorruptionError, match="checksum"):
            read_all(store)
    f.write_bytes(bytes(data))
    read_all(store)


def test_truncated_and_missing_data_files(store):
    f = max(files(store, "data"), key=os.path.getsize)
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(strata.CorruptionError, match="shorter than expected"):
        read_all(store)
    f.unlink()
    with pytest.raises(strata.CorruptionError, match="missing"):
        read_all(store)


def test_cli_reports_corruption_with_exit_code_2(store, capsys):
    for f in files(store, "index"):
        f.write_bytes(b"garbage")
    assert main(["info", str(store)]) == 2
    assert "corrupt store" in capsys.readouterr().err


def test_values_never_silently_change(store):
    before = read_all(store)
    after = read_all(store)
    for k in before:
        a, b = np.asarray(before[k]), np.asarray(after[k])
        assert a.tobytes() == b.tobytes()


def _outcome(path, want):
    """Reads everything; returns "error" for a typed strata error, "same" for values
    bit-equal to ``want``; anything else (wrong values, another exception) fails."""
    try:
        got = read_all(path)
        meta = strata.open(path).attrs
    except (strata.CorruptionError, strata.CompatibilityError, strata.NotFoundError):
        return "error"
    assert got.keys() == want[0].keys()
    for name, values in want[0].items():
        assert np.asarray(got[name]).tobytes() == np.asarray(values).tobytes(), f"wrong values in '{name}'"
    assert meta == want[1], "wrong attributes"
    return "same"


@pytest.mark.parametrize("kind", ["data", "index", "manifests", "HEAD"])
def test_no_flipped_bit_in_any_file_gives_wrong_values(store, kind):
    """Flip one bit at positions spread over every file of a kind, in turn: each read either
    fails with a typed error or returns exactly the original values and attributes."""
    want = (read_all(store), strata.open(store).attrs)
    targets = [pathlib.Path(store) / "HEAD"] if kind == "HEAD" else files(store, kind)
    outcomes = []
    for f in targets:
        data = f.read_bytes()
        step = max(1, len(data) // 60)
        for pos in range(0, len(data), step):
            bad = bytearray(data)
            bad[pos] ^= 1 << (pos % 8)
            f.write_bytes(bytes(bad))
            outcomes.append(_outcome(store, want))
        f.write_bytes(data)
    assert "error" in outcomes, "no flip was noticed at all"
    assert _outcome(store, want) == "same"


def test_damage_in_one_slab_leaves_the_others_readable(store):
    ds = strata.open(store)
    want = ds["temp"][...]
    slabs = json.loads(files(store, "manifests")[-1].read_text())["slabs"]
    last = pathlib.Path(store) / slabs[-1]["data"]
    data = bytearray(last.read_bytes())
    data[len(data) // 2] ^= 0xFF
    last.write_bytes(bytes(data))
    ds = strata.open(store)
    with pytest.raises(strata.CorruptionError, match=slabs[-1]["data"].split("/")[-1]):
        ds["temp"][...]
    # The records of the other slabs still read, exactly.
    first = slabs[-1]["records"][0]
    assert ds["temp"][:first].tobytes() == want[:first].tobytes()


def test_a_damaged_index_fails_only_the_reads_of_its_slab(store):
    """Reads spanning several slabs load their indexes side by side; the damaged one is
    named, and a read that does not touch its slab neither loads nor misses it."""
    want = strata.open(store)["temp"][...]
    slabs = json.loads(files(store, "manifests")[-1].read_text())["slabs"]
    middle = [s for s in slabs if s.get("records")][1]
    index = pathlib.Path(store) / middle["index"]
    index.write_bytes(index.read_bytes()[:-7])
    ds = strata.open(store)
    with pytest.raises(strata.CorruptionError, match=middle["index"].split("/")[-1]):
        ds["temp"][...]
    with pytest.raises(strata.CorruptionError, match=middle["index"].split("/")[-1]):
        ds.query("temp > 0", output="count")
    first = middle["records"][0]
    assert ds["temp"][:first].tobytes() == want[:first].tobytes()
    last = [s for s in slabs if s.get("records")][-1]["records"][0]
    assert ds["temp"][last:].tobytes() == want[last:].tobytes()


def test_every_kind_of_damage_sampled_fails_typed_or_reads_the_same():
    """A sample of `make corrupt` (every bit of every 20th byte of every file, and cuts there):
    no wrong value, no panic or untyped error; an unchanged read is caught by verify unless
    it is HEAD's version lowered (a hint by design)."""
    counts = corrupt.run(step=20, quiet=True)
    assert counts["WRONG"] == counts["OTHER"] == 0, counts["failures"]
    assert counts["error"] > 0.99 * counts["tried"]
    assert set(counts["harmless_where"]) <= {"HEAD"}, counts["harmless_where"]

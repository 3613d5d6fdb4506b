"""`strata verify`: clean stores pass, and each kind of damage is listed by file, slab,
variable and segment with exit status 1."""

import os
import shutil
import time

import numpy as np
import pytest

import strata
from strata.cli import main


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.strata"
    rng = np.random.default_rng(0)
    field = np.cumsum(rng.normal(size=(40, 30, 20)), axis=0).astype("f4")
    strata.write_arrays(
        path, {"temp": (("time", "y", "x"), field), "y": (("y",), np.arange(30.0))}, record_dim="time", slab_records=20
    )
    return path


def run(args, capsys):
    code = main(["verify", *map(str, args)])
    return code, capsys.readouterr().out


def data_files(store):
    return sorted((store / "data").glob("*.sdat"), key=lambda p: p.stat().st_size)


def test_a_clean_store_verifies(store, capsys):
    code, out = run([store], capsys)
    assert code == 0 and out.strip().endswith("clean")
    code, out = run([store, "--deep"], capsys)
    assert code == 0 and "decoded: clean" in out


def test_a_flipped_byte_is_placed_in_its_segment(store, capsys):
    big = data_files(store)[-1]
    data = bytearray(big.read_bytes())
    data[len(data) // 2] ^= 0x10
    big.write_bytes(bytes(data))
    code, out = run([store], capsys)
    assert code == 1
    lines = [line for line in out.splitlines() if line.startswith("DAMAGED")]
    assert any("checksum in the manifest" in line for line in lines)
    assert any(
        "variable 'temp'" in line and "sub-chunk" in line and "does not match its checksum" in line for line in lines
    )
    with pytest.raises(strata.CorruptionError):
        strata.open(store)["temp"][...]


def test_missing_and_truncated_files_are_listed(store, capsys):
    index = sorted((store / "index").glob("*"))[-1]
    index.write_bytes(index.read_bytes()[:-5])
    data_files(store)[0].unlink()
    code, out = run([store], capsys)
    assert code == 1
    assert "cannot be read" in out and index.name in out and "2 problem" not in out.splitlines()[-1]


def test_every_version_can_be_checked(store, tmp_path, capsys):
    copy = tmp_path / "copy.strata"
    shutil.copytree(store, copy)
    code, out = run([copy, "--at", "1"], capsys)
    assert code == 0 and out.startswith("version 1")
    assert main(["verify", str(tmp_path / "missing.strata")]) == 2


def test_gc_removes_leftovers_of_a_failed_append_and_nothing_else(store, tmp_path, capsys):
    other = tmp_path / "b.nc"
    import netCDF4

    with netCDF4.Dataset(other, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("y", 30)
        nc.createDimension("x", 20)
        nc.createVariable("temp", "f4", ("time", "y", "x"))[:] = np.zeros((5, 30, 20), "f4")
    # An append that fails after writing its slab (the variable's type does not match).
    files_before = sorted(p.name for p in (store / "data").iterdir())
    from strata import _core

    w = _core.Writer.open_append(str(store), "{}")
    w.begin_slab(5)
    w.put_records("temp", np.zeros(5 * 30 * 20, "f4").view(np.uint8))
    w.finish_slab()
    del w  # dies without committing
    leftovers = sorted(set(p.name for p in (store / "data").iterdir()) - set(files_before))
    assert leftovers, "the failed append left a data file"
    # Within the grace period the writer might still commit: its files stay.
    assert main(["gc", str(store)]) == 0
    assert "removed 0 files" in capsys.readouterr().out
    assert set(leftovers) <= set(p.name for p in (store / "data").iterdir())
    assert main(["gc", "--grace", "0", "--dry-run", str(store)]) == 0
    assert "would remove data/" + leftovers[0] in capsys.readouterr().out
    assert main(["gc", "--grace", "0", str(store)]) == 0
    assert sorted(p.name for p in (store / "data").iterdir()) == files_before
    code, out = run([store, "--deep"], capsys)
    assert code == 0 and "clean" in out
    assert main(["gc", "--grace", "-1", str(store)]) == 2


def test_leftovers_of_a_killed_import_are_named_and_cleared_by_gc(store, tmp_path):
    target = tmp_path / "t.strata"
    (target / "data").mkdir(parents=True)
    (target / "data" / "s000001-0123456789abcdef.sdat").write_bytes(b"STRATADT partial")
    src = tmp_path / "src.strata"
    with pytest.raises(strata.InvalidArgumentError, match="leftovers of an interrupted write"):
        strata.write_arrays(target, {"v": (("t",), np.arange(3.0))}, record_dim="t")
    assert main(["gc", "--grace", "0", str(target)]) == 0
    strata.write_arrays(target, {"v": (("t",), np.arange(3.0))}, record_dim="t")
    assert strata.open(target)["v"][...].tolist() == [0.0, 1.0, 2.0]
    # A directory holding anything else is refused as before, and gc leaves it alone.
    (src / "data").mkdir(parents=True)
    (src / "notes.txt").write_text("mine")
    with pytest.raises(strata.InvalidArgumentError, match="not empty and holds no strata store"):
        strata.write_arrays(src, {"v": (("t",), np.arange(3.0))}, record_dim="t")


def test_gc_pointed_at_a_directory_that_is_not_a_store_removes_nothing(tmp_path, capsys):
    """`strata gc ~/project` by mistake: a `data/` folder there is someone's data. It used
    to lose every file under data/, index/ and manifests/ older than the grace period."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "run1.nc").write_bytes(b"results")
    (project / "data" / "s000001-old.sdat").write_bytes(b"looks like ours")
    (project / "notes.txt").write_text("mine")
    old = time.time() - 3 * 86400
    for f in project.rglob("*"):
        os.utime(f, (old, old))
    assert main(["gc", "--grace", "0", str(project)]) == 2
    err = capsys.readouterr().err
    assert "not a strata store" in err and "notes.txt" in err, err
    assert sorted(p.name for p in project.rglob("*") if p.is_file()) == ["notes.txt", "run1.nc", "s000001-old.sdat"]

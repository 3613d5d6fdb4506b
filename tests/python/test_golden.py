"""Golden format-v1 stores, committed once, must read back exactly forever."""

import json
import pathlib
import sys

import numpy as np
import pytest

import strata
from conftest import assert_bit_equal

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"
sys.path.insert(0, str(GOLDEN))
from make_golden import FEATURES, IN_PLACE, LOSSY, feature_values, golden_values, in_place_values  # noqa: E402

STORES = [GOLDEN / "v1" / n for n in ("default.strata", "small-chunks.strata", "raw-codec.strata")]


def test_golden_stores_exist():
    found = {p.name for p in (GOLDEN / "v1").glob("*.strata")}
    assert found == {p.name for p in STORES} | set(FEATURES)


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_golden_v1_feature_stores_read_back(name):
    """A store per layout level, binning rule and codec: exact for lossless codecs, the
    committed decoded values (and the error bound) for lossy ones, value queries equal to
    NumPy on binned layouts."""
    ds = strata.open(GOLDEN / "v1" / name, version=1)
    want = feature_values()
    for var, values in want.items():
        got = ds[var][...]
        if name in LOSSY:
            expected = GOLDEN / "v1" / "expected" / f"{name[:-7]}.{var}.le"
            assert_bit_equal(got, np.fromfile(expected, dtype=values.dtype.newbyteorder("<")).reshape(values.shape))
            ok = ~np.isnan(values)
            assert np.array_equal(np.isnan(got), ~ok)
            error = np.abs(got[ok].astype("f8") - values[ok])
            # bitround keeps 12 mantissa bits: relative error at most 2**-12 per element.
            bound = 2.0**-12 * np.abs(values[ok]) if "bitround" in name else 0.01
            assert (error <= bound).all()
        else:
            assert_bit_equal(got, values, f"{name}:{var}")
    layout = ds.manifest["layout"]["order"]
    assert layout == FEATURES[name].get("layout", "S").split("-")
    if "V" in layout:
        t = want["temp"]
        for where, ref in {"temp > 5": t > 5, "temp <= 0 or temp > 12": (t <= 0) | (t > 12)}.items():
            for method in ("index", "scan"):
                assert ds.query(where, output="count", method=method) == ref.sum(), (where, method)


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.name)
def test_golden_v1_reads_back_exactly(store):
    want = golden_values()
    ds = strata.open(store, version=1)
    assert ds.manifest["format_version"] == 1
    assert ds.attrs["title"] == "strata golden store, format v1"
    for name, values in want.items():
        assert_bit_equal(ds[name][...], values, f"{store.name}:{name}")
    assert ds["depth"].attrs["scale_factor"] == np.float32(0.5)
    assert np.isnan(ds["temp"].attrs["_FillValue"])
    assert ds["time"].attrs["calendar"] == "noleap"
    assert_bit_equal(ds["temp"].sel(time=slice("2000-01-31", "2000-03-02")), want["temp"][1:3])


def test_golden_v1_appended_version():
    store = GOLDEN / "v1" / "small-chunks.strata"
    want = golden_values()
    ds = strata.open(store)
    assert ds.version == 2 and ds.dims["time"] == 18
    assert_bit_equal(ds["temp"][...], np.concatenate([want["temp"], want["temp"]]))
    assert [m["version"] for m in map(json.loads, [p.read_text() for p in sorted(store.glob("manifests/*"))])] == [1, 2]


@pytest.mark.parametrize("index", ["source.nc.strata", "binned.strata"])
def test_golden_v1_in_place_indexes_read_back_exactly(index, tmp_path):
    """Stores indexing a NetCDF-4 file in place (format.md §11): chunks through fletcher32,
    shuffle and deflate, a big-endian variable, chunks never written, value bins. The
    checkout gives the file a new time: its whole checksum is what lets it read."""
    ds = strata.open(IN_PLACE / index, version=1)
    assert ds.manifest["files"][0]["external"] if ds.manifest["files"][0]["path"] == "source.nc" else True
    want = in_place_values()
    for var, values in want.items():
        assert_bit_equal(ds[var][...], values, f"{index}:{var}")
    t = want["temp"]
    valid = t[~np.isnan(t) & (t != -99)]
    for where, ref in {"temp >= 5": valid >= 5, "temp < 0 or temp > 12": (valid < 0) | (valid > 12)}.items():
        assert ds.query(where, output="count") == ref.sum(), where
    # The same file elsewhere, changed by one value: refused, never read wrong.
    (tmp_path / "source.nc").write_bytes((IN_PLACE / "source.nc").read_bytes())
    import shutil

    shutil.copytree(IN_PLACE / index, tmp_path / index)
    with open(tmp_path / "source.nc", "r+b") as f:
        f.seek(-100, 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(strata.CorruptionError, match="changed since it was indexed"):
        strata.open(tmp_path / index)["temp"][...]

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
from make_golden import golden_values  # noqa: E402

STORES = sorted((GOLDEN / "v1").glob("*.strata"))


def test_golden_stores_exist():
    assert {p.name for p in STORES} == {"default.strata", "small-chunks.strata", "raw-codec.strata"}


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

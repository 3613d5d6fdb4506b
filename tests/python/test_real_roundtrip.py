"""Every variable of every real file in ../shared/data comes back bit-exactly."""

import warnings

import numpy as np
import pytest
import xarray as xr

import strata
from conftest import DATA, REAL_FILES, assert_attr_equal, assert_bit_equal, needs_data, raw_source


@needs_data
@pytest.mark.parametrize("name", REAL_FILES)
def test_every_variable_dims_and_attribute_round_trips(name, imported):
    ds = strata.open(imported(name))
    src = raw_source(DATA / name)
    try:
        assert ds.dims == {k: len(d) for k, d in src.dimensions.items()}
        assert set(ds.unlimited_dims) == {k for k, d in src.dimensions.items() if d.isunlimited()}
        assert list(ds.attrs) == list(src.ncattrs())
        for k in src.ncattrs():
            assert_attr_equal(ds.attrs[k], src.getncattr(k), f"global {k}")
        assert list(ds.variables) == list(src.variables)
        for vname, sv in src.variables.items():
            var = ds[vname]
            assert var.dims == sv.dimensions
            assert list(var.attrs) == list(sv.ncattrs())
            for k in sv.ncattrs():
                assert_attr_equal(var.attrs[k], sv.getncattr(k), f"{vname}:{k}")
            want = sv[...]
            if sv.dtype is str:
                assert var.values.tolist() == np.asarray(want, dtype=object).tolist()
            else:
                got = var.values
                assert_bit_equal(got, want, f"{name}:{vname}")
                if got.dtype.kind == "f":
                    assert np.array_equal(np.isnan(got), np.isnan(np.asarray(want))), "NaN pattern"
    finally:
        src.close()


@needs_data
@pytest.mark.parametrize("name", REAL_FILES)
def test_xarray_backend_matches_netcdf4_engine(name, imported):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = xr.open_dataset(DATA / name).load()
        got = xr.open_dataset(imported(name), engine="strata").load()
    xr.testing.assert_identical(got, want)


@needs_data
def test_xarray_backend_is_lazy_and_reads_only_touched_subchunks(imported):
    store = imported("ersst_v3b_1960-2016_concat.nc")
    ds = strata.open(store)
    var = ds["sst"]
    before = ds.read_stats()
    one = var[100, 40, 90]
    after = ds.read_stats()
    assert after["segments_decoded"] - before["segments_decoded"] == 1
    assert after["requests"] - before["requests"] == 1
    # A box inside one sub-chunk along each axis still decodes exactly one segment.
    t, y, x = var.subchunks
    var[0:t, 0:y, 0:x]
    assert ds.read_stats()["segments_decoded"] - after["segments_decoded"] == 1
    # Reading it again is served by the decoded-segment cache: no I/O, no decoding.
    again = ds.read_stats()
    var[0:t, 0:y, 0:x]
    final = ds.read_stats()
    assert final["cache_hits"] - again["cache_hits"] == 1
    assert (final["requests"], final["segments_decoded"]) == (again["requests"], again["segments_decoded"])
    cold = strata.open(store, cache_bytes=0)
    cold["sst"][0:t, 0:y, 0:x]
    cold["sst"][0:t, 0:y, 0:x]
    assert cold.read_stats()["segments_decoded"] == 2 and cold.read_stats()["cache_hits"] == 0
    raw = raw_source(DATA / "ersst_v3b_1960-2016_concat.nc")
    assert_bit_equal(np.asarray(one), raw["sst"][100, 40, 90])
    raw.close()

    xds = xr.open_dataset(store, engine="strata")
    assert xds["sst"].variable._in_memory is False
    sub = xds["sst"].isel(time=slice(0, 2), lat=slice(10, 12)).values
    assert sub.shape == (2, 2, 180)

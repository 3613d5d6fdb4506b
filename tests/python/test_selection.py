"""Hyperslab and coordinate selections equal NumPy and xarray references."""

import warnings

import numpy as np
import pytest
import xarray as xr

import strata
from conftest import DATA, assert_bit_equal, make_nc, needs_data, raw_source


def random_key(rng, shape):
    key = []
    for n in shape:
        kind = rng.integers(0, 5)
        if kind == 0:
            key.append(int(rng.integers(-n, n)))
        elif kind == 1:
            key.append(slice(None))
        elif kind == 2:
            a, b = sorted(rng.integers(0, n + 1, 2))
            key.append(slice(int(a), int(b), int(rng.integers(1, 6))))
        elif kind == 3:
            a, b = sorted(rng.integers(-n, n + 1, 2))
            key.append(slice(int(b), int(a), -int(rng.integers(1, 4))))
        else:
            key.append(np.sort(rng.choice(n, size=int(rng.integers(1, min(n, 6) + 1)), replace=False)))
    return tuple(key)


def outer(arr, key):
    out = arr
    axis = 0
    for k in key:
        if isinstance(k, np.ndarray):
            out = np.take(out, k, axis=axis)
            axis += 1
        elif isinstance(k, slice):
            out = out[(slice(None),) * axis + (k,)]
            axis += 1
        else:
            out = out[(slice(None),) * axis + (k,)]
    return out


CASES = [
    ("ersst_v3b_1960-2016_concat.nc", "sst"),
    ("NorKyst-800m_ZDEPTHS_his_00_3Dsubset.nc", "temperature"),
    ("cth_shock_physics.nc", None),
    ("trefht_B06_8member_ensemble_1890-1999.nc", "TREFHT"),
    ("MPAS.nc", "surface_pressure"),
]


@needs_data
@pytest.mark.parametrize(("name", "var"), CASES)
def test_random_hyperslabs_equal_numpy(name, var, imported):
    ds = strata.open(imported(name))
    var = var or max(ds.data_vars, key=lambda n: ds[n].size)
    src = raw_source(DATA / name)
    full = np.asarray(src[var][...])
    src.close()
    rng = np.random.default_rng(sum(map(ord, name)))
    for _ in range(60):
        key = random_key(rng, full.shape)
        assert_bit_equal(ds[var][key], outer(full, key), f"{name}:{var}{key}")


def test_small_chunks_and_many_slabs_equal_numpy(tmp_path):
    nc = make_nc(tmp_path / "s.nc", times=range(37), nlat=29, nlon=31)
    strata.import_file(nc, tmp_path / "s.strata", chunks="time=5,lat=8,lon=9", subchunks="lat=3,lon=4", slab_records=10)
    ds = strata.open(tmp_path / "s.strata")
    assert ds["temp"].chunks == (5, 8, 9)
    assert ds["temp"].subchunks == (5, 3, 4)
    assert len(ds.manifest["slabs"]) == 1 + 4
    src = raw_source(nc)
    full = src["temp"][...]
    src.close()
    rng = np.random.default_rng(7)
    for _ in range(200):
        key = random_key(rng, full.shape)
        assert_bit_equal(ds["temp"][key], outer(full, key), str(key))
    assert_bit_equal(ds["temp"][...], full)
    assert ds["temp"][3:3].shape == (0, 29, 31)
    scalar = ds["temp"][5, 6, 7]
    assert isinstance(scalar, np.float32) and scalar.tobytes() == full[5, 6, 7].tobytes()
    assert ds["temp"][..., 5].shape == (37, 29)
    assert_bit_equal(ds["temp"].isel(time=slice(30, None), lon=3), full[30:, :, 3])


def store_and_xarray(imported, name: str):
    """The file `name` imported as a store, and as xarray reads it (raw values)."""
    ds = strata.open(imported(name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ds, xr.open_dataset(DATA / name, mask_and_scale=False)


@needs_data
def test_sel_by_coordinates_and_cf_time_equals_xarray(imported):
    name = "ersst_v3b_1960-2016_concat.nc"
    ds, ref = store_and_xarray(imported, name)
    for indexers in [
        {"lat": slice(-10, 10), "time": slice("2000-01", "2000-06")},
        {"lon": slice(100.5, 200), "time": slice("1960", "1960")},
        {"time": "1999-03-15"},
        {"time": "1999-03"},
        {"lat": slice(None, -60)},
    ]:
        got = ds["sst"].sel(**indexers)
        want = ref["sst"].sel(**indexers).values
        assert_bit_equal(got, want, str(indexers))
    assert_bit_equal(ds["sst"].sel(lat=11.3, method="nearest"), ref["sst"].sel(lat=11.3, method="nearest").values)
    with pytest.raises(strata.InvalidArgumentError, match="not a value of coordinate 'time'"):
        ds["sst"].sel(time="1999-03-01")


@needs_data
def test_sel_on_a_noleap_calendar_equals_xarray(imported):
    name = "orig.TS.10days.nc"
    ds, ref = store_and_xarray(imported, name)
    times = ref.indexes["time"]
    lo, hi = str(times[2])[:10], str(times[6])[:10]
    got = ds["TS"].sel(time=slice(lo, hi), lat=slice(-30, 30))
    want = ref["TS"].sel(time=slice(lo, hi), lat=slice(-30, 30)).values
    assert got.shape[0] == 5
    assert_bit_equal(got, want)


@needs_data
def test_a_range_written_against_the_coordinates_order_is_an_error_that_says_how(imported):
    # ERA5's latitude decreases (58 to 50), as most GRIB-derived grids' do: xarray answers
    # sel(latitude=slice(50, 55)) with nothing, which reads as "no data there".
    name = "era5_t2m_uk_2019-03_from_grib.nc"
    ds, ref = store_and_xarray(imported, name)
    assert_bit_equal(ds["t2m"].sel(latitude=slice(55, 50)), ref["t2m"].sel(latitude=slice(55, 50)).values)
    assert ref["t2m"].sel(latitude=slice(50, 55)).size == 0
    with pytest.raises(strata.InvalidArgumentError, match=r"runs from 58 to 50: .* 50:55 selects nothing; write 55:50"):
        ds["t2m"].sel(latitude=slice(50, 55))
    # Beside the values, a range is empty either way round, as in xarray.
    assert ds["t2m"].sel(latitude=slice(70, 60)).shape == (744, 0, 49)
    # On a longitude the other order may mean the arc across the seam: the error says both.
    sst = strata.open(imported("ersst_v3b_1960-2016_concat.nc"))["sst"]
    with pytest.raises(strata.InvalidArgumentError, match=r"two selections, 350: and :10 \(or 10:350, the other arc"):
        sst.sel(lon=slice(350, 10))


def test_label_errors_are_clear(tmp_path):
    nc = make_nc(tmp_path / "s.nc")
    strata.import_file(nc, tmp_path / "s.strata")
    v = strata.open(tmp_path / "s.strata")["temp"]
    with pytest.raises(strata.InvalidArgumentError, match="not a value of coordinate 'lat'"):
        v.sel(lat=12.345)
    with pytest.raises(strata.InvalidArgumentError, match="no dimension 'depth'"):
        v.sel(depth=slice(0, 1))
    with pytest.raises(IndexError, match="out of range"):
        v[10]
    with pytest.raises(IndexError, match="too many indices"):
        v[0, 0, 0, 0]

"""Plain HDF5 files, every numeric type, chars, strings, scalars and float edge cases."""

import h5py
import netCDF4
import numpy as np
import pytest

import strata
from conftest import assert_attr_equal, assert_bit_equal, raw_source


def test_plain_hdf5_file_imports(tmp_path):
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f["field"] = np.arange(3 * 40 * 50, dtype="<f8").reshape(3, 40, 50) / 7
        f["field"].attrs["units"] = "K"
        f["counts"] = np.arange(11, dtype=">i4")
    strata.import_file(path, tmp_path / "p.strata")
    ds = strata.open(tmp_path / "p.strata")
    with h5py.File(path) as f:
        assert_bit_equal(ds["field"][...], f["field"][...])
        assert_bit_equal(ds["counts"][...], f["counts"][...])
    assert ds["field"].attrs["units"] == "K"


def test_all_types_and_edge_values_round_trip(tmp_path):
    path = tmp_path / "types.nc"
    edge = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 5e-324, 1.5, np.float64(np.nan) * -1], dtype="f8")
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("n", len(edge))
        nc.createDimension("s", 4)
        nc.createDimension("empty", 0)
        for code in ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]:
            v = nc.createVariable(f"v_{code}", code, ("n",))
            info = np.iinfo(code) if code[0] in "iu" else np.finfo(code)
            vals = np.linspace(float(info.min) / 2, float(info.max) / 2, len(edge)) if code[0] in "iu" else edge
            v[:] = np.asarray(vals).astype(code)
            v.setncattr("a_" + code, np.array([1, 2], dtype=code))
        nc.createVariable("scalar", "f8", ())[...] = 3.25
        c = nc.createVariable("chars", "S1", ("s",))
        c[:] = np.array(list(b"ab\x00d"), dtype="u1").view("S1")
        st = nc.createVariable("names", str, ("s",))
        st[:] = np.array(["α", "", "long name", "x"], dtype=object)
        nc.createVariable("nothing", "f4", ("empty",))
        nc.nan_attr = np.float32(np.nan)
        nc.inf_attr = np.array([np.inf, -np.inf, 1.0])
        nc.str_list = ["one", "two"]
    strata.import_file(path, tmp_path / "t.strata")
    ds = strata.open(tmp_path / "t.strata")
    src = raw_source(path)
    for name, sv in src.variables.items():
        want = sv[...]
        if sv.dtype is str:
            assert ds[name].values.tolist() == list(want)
        else:
            assert_bit_equal(ds[name].values, want, name)
        for k in sv.ncattrs():
            assert_attr_equal(ds[name].attrs[k], sv.getncattr(k), k)
    for k in src.ncattrs():
        assert_attr_equal(ds.attrs[k], src.getncattr(k), k)
    src.close()
    assert ds["scalar"][()] == 3.25
    assert ds["nothing"][...].shape == (0,)


def test_write_arrays_round_trips(tmp_path):
    rng = np.random.default_rng(3)
    field = rng.normal(size=(23, 11, 7)).astype("f4")
    lat = np.linspace(-50, 50, 11)
    names = np.array(["a", "bb", "ccc"], dtype=object)
    version = strata.write_arrays(
        tmp_path / "w.strata",
        {
            "field": (("time", "lat", "lon"), field, {"units": "K"}),
            "lat": (("lat",), lat),
            "names": (("n",), names),
        },
        record_dim="time",
        attrs={"title": "arrays"},
        slab_records=6,
    )
    assert version == 1
    ds = strata.open(tmp_path / "w.strata")
    assert_bit_equal(ds["field"][...], field)
    assert_bit_equal(ds["lat"][...], lat)
    assert ds["names"].values.tolist() == ["a", "bb", "ccc"]
    assert ds["field"].attrs == {"units": "K"} and ds.attrs == {"title": "arrays"}
    assert len(ds.manifest["slabs"]) == 1 + 4
    with pytest.raises(strata.InvalidArgumentError, match="dimension 'lat' has length 11 and 3"):
        strata.write_arrays(tmp_path / "x.strata", {"a": (("lat",), lat), "b": (("lat",), lat[:3])})
    # Fixed-width bytes, as xarray reads WRF's char Times: characters along one more
    # dimension, read back as the same bytes, along the record dimension too.
    times = np.array([b"2005-08-28_12:00:00", b"2005-08-28_15", b""], dtype="S19")
    strata.write_arrays(
        tmp_path / "t.strata", {"Times": (("Time",), times), "v": (("Time",), np.arange(3.0))}, record_dim="Time"
    )
    got = strata.open(tmp_path / "t.strata").to_xarray()["Times"]
    assert got.dims == ("Time",) and got.dtype == times.dtype and (got.values == times).all()


@pytest.mark.parametrize(
    ("kind", "message"),
    [("compound", "compound type 'pair' (fields a, b)"), ("enum", "enum type 'cloud'"), ("vlen", "variable-length")],
)
def test_user_defined_types_are_refused_by_name(tmp_path, kind, message):
    path = tmp_path / f"{kind}.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("n", 2)
        if kind == "compound":
            t = nc.createCompoundType(np.dtype([("a", "f4"), ("b", "i4")]), "pair")
            nc.createVariable("v", t, ("n",))[:] = np.zeros(2, dtype=[("a", "f4"), ("b", "i4")])
        elif kind == "enum":
            t = nc.createEnumType("u1", "cloud", {"clear": 0, "cloudy": 1})
            nc.createVariable("v", t, ("n",))[:] = np.array([0, 1], "u1")
        else:
            t = nc.createVLType("i4", "ragged")
            v = nc.createVariable("v", t, ("n",))
            v[0], v[1] = np.arange(3, dtype="i4"), np.arange(1, dtype="i4")
    with pytest.raises(strata.CompatibilityError, match=message.replace("(", r"\(").replace(")", r"\)")):
        strata.import_file(path, tmp_path / "s.strata")
    assert not (tmp_path / "s.strata").exists() or not any((tmp_path / "s.strata").iterdir())


def test_several_unlimited_dimensions_and_non_cf_times_import_exactly(tmp_path):
    path = tmp_path / "odd.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("obs", None)
        nc.createDimension("x", 2)
        t = nc.createVariable("time", "f8", ("time",))
        t.units, t.calendar = "months since 2000-01", "mars"
        t[:] = [0, 1, 2, 3]
        nc.createVariable("a", "f4", ("time", "x"))[:] = np.arange(8, dtype="f4").reshape(4, 2)
        nc.createVariable("b", "i2", ("obs",))[0:7] = np.arange(7, dtype="i2")
        nc.createVariable("secs", "f8", ("obs",))[0:7] = np.arange(7.0)
        nc["secs"].units = "seconds"
    strata.import_file(path, tmp_path / "s.strata")
    ds = strata.open(tmp_path / "s.strata")
    assert set(ds.unlimited_dims) == {"time", "obs"}
    with raw_source(path) as src:
        for name, v in src.variables.items():
            assert_bit_equal(ds[name][...], v[...], name)
            for k in v.ncattrs():
                assert_attr_equal(ds[name].attrs[k], v.getncattr(k), k)
    strata.export_file(tmp_path / "s.strata", tmp_path / "back.nc")
    with raw_source(tmp_path / "back.nc") as back:
        assert {n for n, d in back.dimensions.items() if d.isunlimited()} == {"time", "obs"}
        assert_bit_equal(np.asarray(back["b"][...]), np.arange(7, dtype="i2"))


def test_a_variable_of_more_than_2_31_elements(tmp_path):
    """2^31 + 10 bytes (mostly chunks never written, read as the fill value): shape, values
    and value-query positions past 2^31 are exact."""
    n = 2**31 + 10
    path = tmp_path / "big.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("n", n)
        v = nc.createVariable("b", "u1", ("n",), zlib=True, chunksizes=(1 << 22,), fill_value=np.uint8(7))
        v[:3] = [1, 2, 3]
        v[n - 5 :] = np.arange(5, dtype="u1")
    strata.import_file(path, tmp_path / "big.strata")
    ds = strata.open(tmp_path / "big.strata")
    assert ds["b"].shape == (n,)
    assert ds["b"][:4].tolist() == [1, 2, 3, 7] and ds["b"][-6:].tolist() == [7, 0, 1, 2, 3, 4]
    assert ds.query("b < 7", output="count") == 8
    assert np.asarray(ds.query("b < 7", output="positions")[0])[-3:].tolist() == [n - 3, n - 2, n - 1]

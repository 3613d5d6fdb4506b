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

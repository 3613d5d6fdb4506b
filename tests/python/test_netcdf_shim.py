"""strata.netcdf: a netCDF4-python program writes a strata store by changing one import."""

import pathlib
import subprocess
import sys

import netCDF4
import numpy as np
import pytest
import xarray as xr

import strata
from strata import netcdf as snc

PROGRAM = pathlib.Path(__file__).parent / "programs" / "heat_netcdf4.py"


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The unmodified program run on netCDF4 and on strata.netcdf."""
    d = tmp_path_factory.mktemp("shim")
    for cmd, out in [
        ([sys.executable, str(PROGRAM)], d / "heat.nc"),
        ([sys.executable, "-m", "strata.netcdf", str(PROGRAM)], d / "heat.strata"),
    ]:
        result = subprocess.run([*cmd, str(out), "30"], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert f"wrote 30 steps to {out}" in result.stdout
    return d / "heat.nc", d / "heat.strata"


def test_the_unmodified_program_writes_the_same_values(both):
    nc_path, store_path = both
    a, b = netCDF4.Dataset(nc_path), snc.Dataset(store_path)
    assert {k: len(v) for k, v in a.dimensions.items()} == {k: len(v) for k, v in b.dimensions.items()}
    assert b.dimensions["time"].isunlimited() and not b.dimensions["lat"].isunlimited()
    assert a.ncattrs() == b.ncattrs() and b.history == "30 steps"
    for name, v in a.variables.items():
        w = b.variables[name]
        assert w.dimensions == v.dimensions and w.dtype == v.dtype, name
        assert {k: v.getncattr(k) for k in v.ncattrs()} == {k: w.getncattr(k) for k in w.ncattrs()}, name
        x, y = v[:], w[:]
        # As netCDF4 gives them: masked where the fill value is, packed values scaled.
        assert np.array_equal(np.ma.getmaskarray(x), np.ma.getmaskarray(y)), name
        assert np.ma.allequal(x, y) and x.dtype == y.dtype, name
    a.set_auto_maskandscale(False)
    b.set_auto_maskandscale(False)
    for name, v in a.variables.items():
        assert v[:].tobytes() == b.variables[name][:].tobytes(), name
    # Masked temperatures over land, unwritten station steps: the fill values are there.
    assert np.ma.getmaskarray(snc.Dataset(store_path).variables["temp"][3])[45, 110]
    assert np.ma.getmaskarray(snc.Dataset(store_path).variables["station_temp"][:])[1::2].all()


def test_the_store_opens_in_xarray_as_the_file_does(both):
    nc_path, store_path = both
    with xr.open_dataset(nc_path) as expected, xr.open_dataset(store_path, engine="strata") as got:
        xr.testing.assert_identical(got.load(), expected.load())


def test_strata_options_and_append_mode(tmp_path):
    path = tmp_path / "s"
    ds = snc.Dataset(path, "w", strata={"codec": "auto", "layout": "V-S", "slab_records": 4})
    ds.createDimension("t", None)
    ds.createDimension("x", 300)
    v = ds.createVariable("v", "f8", ("t", "x"))
    rng = np.random.default_rng(1)
    data = rng.normal(size=(10, 300))
    v[0:6] = data[:6]
    for t in range(6, 9):
        v[t, :] = data[t]
    ds.close()
    store = strata.open(path)
    assert store.manifest["layout"]["order"] == ["V", "S"] and store.manifest["slab_records"] == 4
    assert store["v"][:].tobytes() == data[:9].tobytes()
    with snc.Dataset(path, "a") as ds:
        assert len(ds.dimensions["t"]) == 9
        ds.variables["v"][9] = data[9]
        ds.variables["v"].note = "appended"
    store = strata.open(path)
    assert store.version == 2 and store["v"][:].tobytes() == data.tobytes()
    assert store["v"].attrs["note"] == "appended"
    assert snc.Dataset(path).variables["v"][9:].shape == (1, 300)


def test_what_a_store_cannot_do_is_said(tmp_path):
    ds = snc.Dataset(tmp_path / "s", "w")
    ds.createDimension("t", None)
    with pytest.raises(strata.InvalidArgumentError, match="second unlimited"):
        ds.createDimension("u", None)
    ds.createDimension("x", 3)
    with pytest.raises(strata.InvalidArgumentError, match="variable-length strings"):
        ds.createVariable("s", str, ("x",))
    v = ds.createVariable("v", "i4", ("t", "x"))
    v[0] = [1, 2, 3]
    v[1] = [4, 5, 6]
    with pytest.raises(strata.InvalidArgumentError, match="define mode"):
        ds.createVariable("w", "f4", ("x",))
    with pytest.raises(strata.InvalidArgumentError, match="already written"):
        v[0] = [7, 8, 9]
    v[1, 0] = 40  # the newest record can still change
    ds.close()
    np.testing.assert_array_equal(strata.open(tmp_path / "s")["v"][:], [[1, 2, 3], [40, 5, 6]])
    with pytest.raises(strata.InvalidArgumentError, match="reading"):
        snc.Dataset(tmp_path / "s").variables["v"][2] = [0, 0, 0]
    with pytest.raises(strata.InvalidArgumentError, match="exists"):
        snc.Dataset(tmp_path / "s", "w", clobber=False)
    with pytest.raises(strata.InvalidArgumentError, match="ParallelWriter"):
        snc.Dataset(tmp_path / "p", "w", parallel=True)
    # A program that fails inside `with` commits nothing.
    with pytest.raises(ZeroDivisionError), snc.Dataset(tmp_path / "f", "w") as ds:
        ds.createDimension("t", None)
        ds.createVariable("v", "f4", ("t",))[0] = 1.0
        1 / 0  # noqa: B018
    with pytest.raises(strata.NotFoundError):
        strata.open(tmp_path / "f")


def test_dataset_indexing_scalars_and_chars_as_netcdf4_has_them(tmp_path):
    # The same program against netCDF4 and the shim: ds["v"], assignValue/getValue on
    # a scalar, a char array along the record dimension (WRF's Times).
    times = netCDF4.stringtochar(np.array([f"2005-08-28_0{i}:00:00" for i in range(3)], "S19"))
    got = {}
    for mod, path in ((netCDF4, tmp_path / "a.nc"), (snc, tmp_path / "a.strata")):
        with mod.Dataset(path, "w") as ds:
            ds.createDimension("Time", None)
            ds.createDimension("DateStrLen", 19)
            ds.createVariable("Times", "S1", ("Time", "DateStrLen"))
            ds.createVariable("scalar", "f8").assignValue(3.5)
            for i in range(3):
                ds["Times"][i] = times[i]
        with mod.Dataset(path) as ds:
            with pytest.raises(IndexError, match="nope not found"):
                ds["nope"]
            got[mod.__name__] = (netCDF4.chartostring(ds["Times"][:]).tolist(), float(ds["scalar"].getValue()))
    assert got["netCDF4"] == got["strata.netcdf"] == (netCDF4.chartostring(times).tolist(), 3.5)


def test_a_netcdf_file_opened_for_reading_is_netcdf4s(tmp_path):
    path = tmp_path / "f.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 2)
        nc.createVariable("v", "f4", ("x",))[:] = [1.5, 2.5]
    ds = snc.Dataset(path)
    assert isinstance(ds, netCDF4.Dataset)
    np.testing.assert_array_equal(ds.variables["v"][:], [1.5, 2.5])


def test_help():
    result = subprocess.run([sys.executable, "-m", "strata.netcdf", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "python -m strata.netcdf PROGRAM.py" in result.stdout

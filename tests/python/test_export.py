"""`strata export STORE out.nc`: a store back to NetCDF-4, equal to its source.

Every real file of ../shared/data that imports is exported and compared with the file it
came from through netCDF4-python: dimensions (sizes, unlimited), variables (type,
dimensions, values bit for bit), attributes (values and NetCDF types), global attributes."""

from __future__ import annotations

import os
import subprocess
import sys

import netCDF4
import numpy as np
import pytest

import strata
from conftest import REAL_FILES, assert_attr_equal, assert_bit_equal, make_nc, needs_data, raw_source
from strata.errors import CompatibilityError, InvalidArgumentError


def assert_same_netcdf(got_path, want_path, what: str, skipped: tuple[str, ...] = ()) -> None:
    with raw_source(got_path) as got, raw_source(want_path) as want:
        assert list(got.dimensions) == list(want.dimensions), what
        for name, d in want.dimensions.items():
            assert len(got.dimensions[name]) == len(d), f"{what}: dimension {name}"
            assert got.dimensions[name].isunlimited() == d.isunlimited(), f"{what}: {name} unlimited"
        assert set(got.ncattrs()) == set(want.ncattrs()), what
        for a in want.ncattrs():
            assert_attr_equal(got.getncattr(a), want.getncattr(a), f"{what}: global {a}")
        assert list(got.variables) == list(want.variables), what
        for name, w in want.variables.items():
            g = got.variables[name]
            assert g.dimensions == w.dimensions, f"{what}: {name} dims"
            want_attrs = [a for a in w.ncattrs() if f"{name}:{a}" not in skipped]
            assert set(g.ncattrs()) == set(want_attrs), f"{what}: {name} attrs {g.ncattrs()} {w.ncattrs()}"
            for a in want_attrs:
                assert_attr_equal(g.getncattr(a), w.getncattr(a), f"{what}: {name}:{a}")
            if w.dtype is str:
                assert g.dtype is str and list(np.ravel(g[...])) == list(np.ravel(w[...])), f"{what}: {name}"
                continue
            assert g.dtype == w.dtype, f"{what}: {name} type {g.dtype} != {w.dtype}"
            assert_bit_equal(np.asarray(g[...]), np.asarray(w[...]), f"{what}: {name}")


@needs_data
@pytest.mark.parametrize("name", REAL_FILES)
def test_every_real_file_comes_back_equal(imported, tmp_path, name):
    from conftest import DATA

    try:
        store = imported(name)
    except CompatibilityError as e:
        pytest.skip(f"not importable: {e}")
    out = tmp_path / "out.nc"
    report = strata.export_file(store, out)
    assert report.out == str(out) and report.version == 1
    # Only what the NetCDF library refuses is left out, and reported.
    skipped = tuple(w.split(" ")[0] for w in report.warnings)
    assert all(s.endswith(":_FillValue") for s in skipped), report.warnings
    assert_same_netcdf(out, DATA / name, name, skipped)


def test_versions_masked_packing_and_cli(tmp_path):
    src = tmp_path / "src.nc"
    make_nc(src, times=range(6))
    more = tmp_path / "more.nc"
    make_nc(more, times=range(6, 10), seed=1)
    store = tmp_path / "s.strata"
    strata.import_file(src, store)
    strata.append_file(more, store)
    # Version 1 is the first file exactly; version 2 has both files' records.
    strata.export_file(store, tmp_path / "v1.nc", version=1)
    assert_same_netcdf(tmp_path / "v1.nc", src, "version 1")
    out = subprocess.run(
        [sys.executable, "-m", "strata.cli", "export", "-q", str(store), str(tmp_path / "v2.nc")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "version 2" in out
    with raw_source(tmp_path / "v2.nc") as nc, raw_source(src) as a, raw_source(more) as b:
        assert nc.dimensions["time"].isunlimited() and len(nc.dimensions["time"]) == 10
        for v in ("temp", "time"):
            assert_bit_equal(np.asarray(nc[v][...]), np.concatenate([a[v][...], b[v][...]]), v)


def test_refusals_leave_nothing_behind(tmp_path):
    src = tmp_path / "src.nc"
    make_nc(src)
    store = tmp_path / "s.strata"
    strata.import_file(src, store)
    (tmp_path / "taken.nc").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="exists"):
        strata.export_file(store, tmp_path / "taken.nc")
    assert (tmp_path / "taken.nc").read_text() == "mine"
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        strata.export_file(store, tmp_path / "missing" / "out.nc")
    with pytest.raises(strata.NotFoundError):
        strata.export_file(store, tmp_path / "v9.nc", version=9)
    assert sorted(os.listdir(tmp_path)) == ["s.strata", "src.nc", "taken.nc"]
    r = subprocess.run(
        [sys.executable, "-m", "strata.cli", "export", str(store), str(tmp_path / "taken.nc")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "exists" in r.stderr and "Traceback" not in r.stderr
    strata.export_file(store, tmp_path / "taken.nc", overwrite=True, zlib=False)
    with netCDF4.Dataset(tmp_path / "taken.nc") as nc:
        assert nc["temp"].filters()["zlib"] is False


def write_grouped(path):
    """Nested groups: variables using their own and their parents' dimensions, attributes
    on every group, an unlimited dimension in a group."""
    rng = np.random.default_rng(5)
    with netCDF4.Dataset(path, "w") as nc:
        nc.title = "grouped"
        nc.createDimension("time", None)
        nc.createDimension("lat", 4)
        nc.createVariable("lat", "f4", ("lat",))[:] = [-30, -10, 10, 30]
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(6)
        ocean = nc.createGroup("ocean")
        ocean.source = "model"
        ocean.levels = np.int32(3)
        ocean.createDimension("depth", 3)
        temp = ocean.createVariable("temp", "f4", ("time", "depth", "lat"), fill_value=np.float32(-1))
        temp.units = "K"
        temp[:] = rng.normal(280, 5, (6, 3, 4)).astype("f4")
        bio = ocean.createGroup("bio")
        bio.createDimension("obs", None)
        chl = bio.createVariable("chl", "f8", ("depth",))
        chl[:] = [0.1, 0.2, 0.3]
        bio.createVariable("count", "i2", ("obs",))[:] = np.arange(5, dtype="i2")


def walk(group, prefix=""):
    yield prefix, group
    for name, sub in group.groups.items():
        yield from walk(sub, f"{prefix}/{name}")


def test_groups_become_path_names_and_come_back_on_export(tmp_path):
    src = tmp_path / "grouped.nc"
    write_grouped(src)
    store = tmp_path / "g.strata"
    strata.import_file(src, store)
    ds = strata.open(store)
    assert {"ocean/temp", "ocean/bio/chl", "ocean/bio/count"} <= set(ds.variables)
    assert ds["ocean/temp"].dims == ("time", "ocean/depth", "lat")
    assert ds.attrs["ocean/source"] == "model" and ds.attrs["title"] == "grouped"
    with raw_source(src) as nc:
        assert_bit_equal(ds["ocean/temp"][...], nc["ocean/temp"][...])
        assert_bit_equal(ds["ocean/bio/count"][...], nc["ocean/bio/count"][...])
    out = tmp_path / "back.nc"
    strata.export_file(store, out)
    with raw_source(out) as got, raw_source(src) as want:
        got_groups, want_groups = dict(walk(got)), dict(walk(want))
        assert list(got_groups) == list(want_groups)
        for path, w in want_groups.items():
            g = got_groups[path]
            assert {n: (len(d), d.isunlimited()) for n, d in g.dimensions.items()} == {
                n: (len(d), d.isunlimited()) for n, d in w.dimensions.items()
            }, path
            assert set(g.ncattrs()) == set(w.ncattrs()), path
            for a in w.ncattrs():
                assert_attr_equal(g.getncattr(a), w.getncattr(a), f"{path}:{a}")
            assert list(g.variables) == list(w.variables), path
            for name, wv in w.variables.items():
                gv = g.variables[name]
                assert gv.dimensions == wv.dimensions and gv.dtype == wv.dtype, f"{path}/{name}"
                assert_bit_equal(np.asarray(gv[...]), np.asarray(wv[...]), f"{path}/{name}")
                for a in wv.ncattrs():
                    assert_attr_equal(gv.getncattr(a), wv.getncattr(a), f"{path}/{name}:{a}")

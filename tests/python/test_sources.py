"""Opening sources: a small file is read through a map of it, a large one by its path
(strata._sources.MAP_AT_MOST); both give the same store, and nothing stays mapped."""

import h5py
import numpy as np
import pytest
from test_truncated_classic import classic

import strata
import strata._sources as sources
from conftest import DATA, needs_data
from strata import _superblock
from strata._sources import open_source


def mapped(path) -> bool:
    """Whether this process maps the file at ``path``."""
    with open("/proc/self/maps") as maps:
        return any(line.rstrip().endswith(str(path)) for line in maps)


def stores_equal(a, b) -> None:
    x, y = strata.open(a), strata.open(b)
    assert list(x.variables) == list(y.variables)
    for name in x.variables:
        assert x[name].dims == y[name].dims, name
        assert x[name].attrs == y[name].attrs, name
        if x[name].dtype_name != "string":
            u, v = np.asarray(x[name][...]), np.asarray(y[name][...])
            assert u.dtype == v.dtype and u.tobytes() == v.tobytes(), name
    assert x.attrs == y.attrs


@needs_data
@pytest.mark.parametrize("name", ["MPAS.nc", "pop.nc", "wrf_katrina_ci_test_file.nc"])
def test_a_mapped_source_imports_as_one_opened_by_its_path(tmp_path, monkeypatch, name):
    src = DATA / name
    assert 0 < src.stat().st_size <= sources.MAP_AT_MOST
    strata.import_file(src, tmp_path / "mapped.strata")
    assert not mapped(src), "the import left its source mapped"
    monkeypatch.setattr(sources, "MAP_AT_MOST", 0)
    strata.import_file(src, tmp_path / "path.strata")
    stores_equal(tmp_path / "mapped.strata", tmp_path / "path.strata")


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_a_source_is_mapped_while_open_and_only_then(tmp_path, monkeypatch, fmt):
    src = classic(tmp_path / "a.nc", fmt)
    nc = open_source(str(src))
    try:
        assert mapped(src)
        assert nc.variables["v"][...].sum() == np.arange(140).sum()
    finally:
        nc.close()
    assert not mapped(src)
    # Too large to map: opened by its path.
    monkeypatch.setattr(sources, "MAP_AT_MOST", src.stat().st_size - 1)
    nc = open_source(str(src))
    try:
        assert not mapped(src)
        assert nc.variables["v"][...].sum() == np.arange(140).sum()
    finally:
        nc.close()


def test_an_empty_or_foreign_file_is_refused_either_way(tmp_path, monkeypatch):
    empty, text = tmp_path / "empty.nc", tmp_path / "text.nc"
    empty.write_bytes(b"")
    text.write_bytes(b"not a netcdf file\n" * 100)
    for limit in (sources.MAP_AT_MOST, 0):
        monkeypatch.setattr(sources, "MAP_AT_MOST", limit)
        for bad in (empty, text):
            with pytest.raises(strata.CompatibilityError, match="not a NetCDF or HDF5 file"):
                strata.import_file(bad, tmp_path / f"{bad.stem}{limit}.strata")
            assert not mapped(bad)


@needs_data
def test_the_real_hdf5_files_end_where_their_superblock_says():
    seen = 0
    for path in sorted(DATA.glob("*.nc")):
        head = path.read_bytes()[: _superblock.HEAD_BYTES]
        if head[:8] == _superblock.SIGNATURE:
            assert _superblock.end_of_file(head) == path.stat().st_size, path.name
            seen += 1
    assert seen >= 5


@pytest.mark.parametrize(("superblock", "libver"), [(0, "earliest"), (2, "v108"), (3, "latest")])
def test_every_cut_of_an_hdf5_file_is_refused_as_truncated(tmp_path, monkeypatch, superblock, libver):
    src = tmp_path / "a.h5"
    with h5py.File(src, "w", libver=libver) as f:
        f["v"] = np.arange(1000, dtype="f4")
    whole = src.read_bytes()
    assert whole[8] == superblock
    assert _superblock.end_of_file(whole[: _superblock.HEAD_BYTES]) == len(whole)
    strata.import_file(src, tmp_path / "whole.strata")
    assert strata.open(tmp_path / "whole.strata")["v"][...].tolist() == list(range(1000))
    for cut in sorted({1, 8, 9, 13, 14, 30, 47, 63, 64, 500, len(whole) // 2, len(whole) - 1}):
        bad = tmp_path / f"cut{cut}.h5"
        bad.write_bytes(whole[:cut])
        for limit in (sources.MAP_AT_MOST, 0):
            monkeypatch.setattr(sources, "MAP_AT_MOST", limit)
            # The first 8 bytes cut short are no HDF5 signature: a file netCDF4 cannot read.
            error = strata.CorruptionError if cut >= 8 else strata.CompatibilityError
            with pytest.raises(error, match="truncated" if cut >= 8 else "not a NetCDF"):
                strata.import_file(bad, tmp_path / f"cut{cut}-{limit}.strata")
            assert not mapped(bad)

"""A truncated NetCDF classic file is refused as corrupt (the NetCDF library reads it and
returns garbage for the missing bytes); whole files of every classic flavour import."""

import netCDF4
import numpy as np
import pytest

import strata
import strata._sources
from conftest import DATA, needs_data
from strata._classic import required_length


def classic(path, fmt):
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("time", None)
        nc.createDimension("y", 7)
        nc.createDimension("x", 5)
        nc.title = "classic"
        nc.createVariable("y", "f8", ("y",))[:] = np.arange(7)
        nc.createVariable("mask", "i1", ("y", "x"))[:] = 1
        nc.createVariable("v", "f4", ("time", "y", "x"))[:] = np.arange(4 * 35, dtype="f4").reshape(4, 7, 5)
        nc.createVariable("w", "i2", ("time", "x"))[:] = np.arange(20, dtype="i2").reshape(4, 5)
    return path


@pytest.mark.parametrize("opened", ["mapped", "by path"])
@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"])
def test_truncated_classic_files_are_corrupt(tmp_path, monkeypatch, fmt, opened):
    if opened == "by path":
        monkeypatch.setattr(strata._sources, "MAP_AT_MOST", 0)
    src = classic(tmp_path / "a.nc", fmt)
    whole = src.read_bytes()
    # The last record may end in padding, which the data does not need.
    assert len(whole) - 3 <= required_length(whole) <= len(whole)
    strata.import_file(src, tmp_path / "ok.strata")
    assert strata.open(tmp_path / "ok.strata")["v"][...].sum() == np.arange(140).sum()
    for cut in (len(whole) - required_length(whole) + 1, 7, len(whole) // 3):
        bad = tmp_path / f"cut{cut}.nc"
        bad.write_bytes(whole[:-cut])
        with pytest.raises(strata.CorruptionError, match="truncated"):
            strata.import_file(bad, tmp_path / f"cut{cut}.strata")
        assert not (tmp_path / f"cut{cut}.strata").exists()


def test_a_damaged_classic_header_is_corrupt(tmp_path):
    src = classic(tmp_path / "a.nc", "NETCDF3_CLASSIC")
    bad = tmp_path / "b.nc"
    bad.write_bytes(src.read_bytes()[:40])
    with pytest.raises(strata.CorruptionError):
        strata.import_file(bad, tmp_path / "b.strata")


@needs_data
def test_the_real_classic_files_are_whole():
    for path in sorted(DATA.glob("*.nc")):
        data = path.read_bytes()[: 1 << 20]
        need = required_length(data)
        assert need is None or need == path.stat().st_size, path.name

"""Appending checks the record coordinate: other CF time units are converted (or refused
when they cannot be held exactly), and records at or before the store's last are refused
unless asked for."""

import netCDF4
import numpy as np
import pytest

import strata
from strata.cli import main


def series(path, times, units="days since 2000-01-01", dtype="f8", calendar=None):
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        t = nc.createVariable("time", dtype, ("time",))
        t.units = units
        if calendar:
            t.calendar = calendar
        t[:] = np.asarray(times)
        nc.createVariable("v", "f4", ("time", "x"))[:] = np.arange(len(times) * 3, dtype="f4").reshape(-1, 3)
    return path


def test_other_time_units_are_converted_to_the_stores(tmp_path):
    store = tmp_path / "s.strata"
    strata.import_file(series(tmp_path / "a.nc", [0, 1, 2]), store)
    # The next three days, in hours since another epoch.
    strata.append_file(series(tmp_path / "b.nc", [72, 96, 120], units="hours since 2000-01-01"), store)
    ds = strata.open(store)
    assert ds["time"][...].tolist() == [0, 1, 2, 3, 4, 5]
    decoded = ds.to_xarray()["time"].values
    assert decoded[-1] == np.datetime64("2000-01-06")


def test_times_of_another_type_are_converted_when_exact(tmp_path):
    # xarray writes times as int64 or float64 as they need: an ERSST store holds int64
    # days, a file xarray wrote holds float64 hours.
    store = tmp_path / "s.strata"
    strata.import_file(series(tmp_path / "a.nc", [0, 1, 2], dtype="i8"), store)
    strata.append_file(series(tmp_path / "b.nc", [72.0, 96.0], units="hours since 2000-01-01"), store)
    strata.append_file(series(tmp_path / "c.nc", [5.0, 6.0]), store)
    t = strata.open(store)["time"][...]
    assert t.dtype == np.int64 and t.tolist() == [0, 1, 2, 3, 4, 5, 6]
    with pytest.raises(strata.CompatibilityError, match="float64, in the store int64: its values do not all fit"):
        strata.append_file(series(tmp_path / "d.nc", [7.0, 7.5]), store)
    with pytest.raises(strata.CompatibilityError, match="whole values"):
        strata.append_file(series(tmp_path / "e.nc", [204.0, 210.0], units="hours since 2000-01-01"), store)
    # Other variables keep their type: a float64 field is not made float32.
    with netCDF4.Dataset(tmp_path / "f.nc", "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        nc.createVariable("time", "i8", ("time",)).units = "days since 2000-01-01"
        nc["time"][:] = [9]
        nc.createVariable("v", "f8", ("time", "x"))[:] = np.zeros((1, 3))
    with pytest.raises(strata.CompatibilityError, match="'v' is f64 in"):
        strata.append_file(tmp_path / "f.nc", store)
    assert strata.open(store).version == 3


def test_times_that_cannot_be_held_exactly_or_converted_are_refused(tmp_path):
    store = tmp_path / "s.strata"
    strata.import_file(series(tmp_path / "a.nc", [0, 1, 2], dtype="i4"), store)
    half_days = series(tmp_path / "b.nc", [84, 90], units="hours since 2000-01-01", dtype="i4")
    with pytest.raises(strata.CompatibilityError, match="whole values"):
        strata.append_file(half_days, store)
    noleap = series(tmp_path / "c.nc", [3, 4], calendar="noleap", dtype="i4")
    with pytest.raises(strata.CompatibilityError, match="cannot be converted"):
        strata.append_file(noleap, store)
    assert strata.open(store).version == 1, "nothing was appended"


def test_duplicate_or_earlier_records_are_refused_unless_asked(tmp_path, capsys):
    store = tmp_path / "s.strata"
    strata.import_file(series(tmp_path / "a.nc", [0, 1, 2]), store)
    again = series(tmp_path / "b.nc", [2, 3])
    with pytest.raises(strata.CompatibilityError, match="at or before"):
        strata.append_file(again, store)
    unsorted = series(tmp_path / "c.nc", [5, 4])
    with pytest.raises(strata.CompatibilityError, match="at or before"):
        strata.append_file(unsorted, store)
    assert main(["append", "-q", str(store), str(again)]) == 2
    assert "out-of-order" in capsys.readouterr().err
    assert main(["append", "-q", "--allow-unordered", str(store), str(again)]) == 0
    assert strata.open(store)["time"][...].tolist() == [0, 1, 2, 2, 3]

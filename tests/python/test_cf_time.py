"""CF times are decoded by the engine (``strata_core::cftime``) into the same dates as cftime,
in every CF calendar, for the time coordinates of the real files and for generated ones."""

from __future__ import annotations

import cftime
import netCDF4
import numpy as np
import pandas as pd
import pytest

from conftest import DATA, needs_data
from strata import _coords, _core
from strata.errors import InvalidArgumentError

CALENDARS = (
    "standard",
    "gregorian",
    "proleptic_gregorian",
    "julian",
    "noleap",
    "365_day",
    "all_leap",
    "366_day",
    "360_day",
)


def fields(index) -> list[tuple]:
    return [(t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond) for t in index]


def real_time_coordinates():
    for path in sorted(DATA.glob("*.nc")):
        with netCDF4.Dataset(path) as nc:
            for name, v in nc.variables.items():
                units = getattr(v, "units", None)
                if v.ndim == 1 and isinstance(units, str) and " since " in units:
                    v.set_auto_maskandscale(False)
                    yield path.name, name, np.asarray(v[:], dtype="f8"), units, getattr(v, "calendar", "standard")


@needs_data
def test_real_time_coordinates_decode_as_cftime_does():
    seen = 0
    for file, name, values, units, calendar in real_time_coordinates():
        got = _coords.decode_time(values, {"units": units, "calendar": calendar})
        want = cftime.num2date(values, units, calendar=calendar, only_use_cftime_datetimes=True)
        assert fields(got) == fields(want), (file, name)
        # Dates a timestamp holds come as datetime64[ns], as xarray gives them.
        gregorian = calendar.lower() in ("standard", "gregorian", "proleptic_gregorian")
        assert isinstance(got, pd.DatetimeIndex) == gregorian, (file, name, type(got))
        seen += 1
    assert seen >= 10


@pytest.mark.parametrize("calendar", CALENDARS)
@pytest.mark.parametrize(
    "units, scale",
    [
        ("days since 1850-01-01", 1.0),
        ("hours since 1582-10-15 12:00:00", 24.0),  # across the standard calendar's reform
        ("seconds since 2000-02-28 23:59:59", 86400.0),  # across a leap day, at a second's end
        ("minutes since 0001-01-01", 1440.0),  # far from 1970: beyond datetime64[ns]
    ],
)
def test_every_calendar_decodes_as_cftime_does(calendar, units, scale):
    days = np.concatenate([np.arange(-800, 800, 0.25), [36_524.5, 1e5]])
    if units.startswith("minutes since 0001"):
        days = np.abs(days) + 700_000
    values = days * scale
    got = _coords.decode_time(values, {"units": units, "calendar": calendar})
    want = cftime.num2date(values, units, calendar=calendar, only_use_cftime_datetimes=True)
    assert fields(got) == fields(want)


def test_units_the_engine_does_not_decode_go_to_cftime_and_bad_ones_fail():
    # Months of the 360-day calendar are 30 days (the engine decodes them, as cftime does);
    # elsewhere they are not a fixed length and cftime refuses them.
    got = _coords.decode_time(np.arange(3.0), {"units": "months since 2000-01-01", "calendar": "360_day"})
    assert [(t.year, t.month) for t in got] == [(2000, 1), (2000, 2), (2000, 3)]
    assert _core.cf_date_fields(np.arange(3.0), "months since 2000-01-01", "360_day") is not None
    with pytest.raises((ValueError, InvalidArgumentError)):
        _coords.decode_time(np.arange(3.0), {"units": "months since 2000-01-01", "calendar": "standard"})
    with pytest.raises((ValueError, InvalidArgumentError)):
        _coords.decode_time(np.arange(3.0), {"units": "days since yesterday"})


@pytest.mark.parametrize("calendar", CALENDARS)
def test_dates_are_the_calendars_own_type(calendar):
    # xarray parses a label into the index's date type: a generic cftime.datetime would be
    # the standard calendar's and could not be compared with the dates.
    values = np.array([0.0, 1e6])  # the second beyond datetime64[ns]
    got = _coords.decode_time(values, {"units": "days since 2000-01-01", "calendar": calendar})
    want = cftime.num2date(values, "days since 2000-01-01", calendar=calendar, only_use_cftime_datetimes=True)
    assert [type(t) for t in got] == [type(t) for t in want]
    assert list(got) == list(want)

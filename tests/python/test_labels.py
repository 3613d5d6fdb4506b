"""The engine's label selection (strata_core::labels) against pandas and xarray, whose
rules it follows: random monotonic coordinates, random labels, the same positions."""

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import strata
from strata import _coords, _core

CALENDARS = ["standard", "proleptic_gregorian", "noleap", "all_leap", "360_day", "julian"]


def positions(pick):
    return _coords.as_positions(pick)


def reference(fn, *args, **kwargs):
    """pandas' answer as positions, or None when pandas refuses."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = fn(*args, **kwargs)
    except (KeyError, TypeError, ValueError, NotImplementedError):
        return None
    if isinstance(got, slice):
        return slice(int(got.start or 0), int(got.stop))
    if isinstance(got, np.ndarray):
        return int(got[0]) if got.ndim == 1 and got.dtype.kind == "i" else None
    return int(got)


def engine(fn, *args):
    try:
        got = fn(*args)
    except strata.InvalidArgumentError:
        return None
    return positions(got) if not isinstance(got, tuple) or len(got) != 2 else slice(*got)


def reversed_range(slice_indexer, a, b, got, want, n) -> bool:
    """Whether the engine refused a range that selects nothing only because its ends are
    the other way round (pandas answers it with nothing; swapped, it selects something)."""
    if got is not None or not isinstance(want, slice) or len(range(n)[want]):
        return False
    swapped = reference(slice_indexer, b, a)
    assert isinstance(swapped, slice) and len(range(n)[swapped]), (a, b, "refused, yet empty either way")
    return True


def same(a, b, n):
    """Equal selections (an empty slice anywhere is the same empty selection)."""
    if isinstance(a, slice) and isinstance(b, slice):
        ra, rb = range(n)[a], range(n)[b]
        return list(ra) == list(rb)
    return a == b


@pytest.mark.parametrize("seed", range(6))
def test_numeric_ranges_and_methods_equal_pandas(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(1, 30))
        values = np.cumsum(rng.choice([0.0, 0.5, 1.0, 2.5], size=n)) + rng.normal() * 10
        if seed % 2 == 0:
            values = np.unique(values)  # strictly monotonic: every method applies
        if rng.random() < 0.5:
            values = values[::-1].copy()
        index = pd.Index(values)
        ours = _core.LabelIndex("x", values)
        lo, hi = (float(x) for x in rng.uniform(values.min() - 2, values.max() + 2, 2))
        picks = [lo, hi, float(values[rng.integers(len(values))])]
        for a in [*picks, None]:
            for b in [*picks, None]:
                want = reference(index.slice_indexer, a, b)
                got = engine(ours.range, a, b)
                if reversed_range(index.slice_indexer, a, b, got, want, len(values)):
                    continue
                assert same(got, want, len(values)), (values, a, b, got, want)
        if not index.is_unique:
            continue
        for label in picks:
            for method in [None, "nearest", "pad", "backfill"]:
                if method is None:
                    want = reference(index.get_loc, label)
                else:
                    want = reference(index.get_indexer, [label], method=method)
                    want = None if want == -1 else want
                got = engine(ours.locate, label, method)
                assert same(got, want, len(values)), (values, label, method, got, want)


def random_times(rng, calendar):
    step = rng.choice([1.0, 0.25, 30.0, 7.0, 1 / 24])
    n = int(rng.integers(2, 120))
    start = float(rng.integers(-400, 400))
    values = start + step * np.arange(n)
    units = "days since 2000-01-01"
    return values, units


def label_of(rng, date):
    """A label at or near ``date``, as a user would write it: partial or full."""
    forms = [
        f"{date.year:04d}",
        f"{date.year:04d}-{date.month:02d}",
        f"{date.year:04d}-{date.month:02d}-{date.day:02d}",
        f"{date.year:04d}-{date.month:02d}-{date.day:02d}T{date.hour:02d}",
        f"{date.year:04d}-{date.month:02d}-{date.day:02d}T{date.hour:02d}:{date.minute:02d}:{date.second:02d}",
    ]
    return forms[int(rng.integers(len(forms)))]


@pytest.mark.parametrize("calendar", CALENDARS)
def test_date_ranges_equal_xarray_in_every_calendar(calendar):
    rng = np.random.default_rng(len(calendar))
    for _ in range(30):
        values, units = random_times(rng, calendar)
        if rng.random() < 0.4:
            values = values[::-1].copy()
        dates = xr.CFTimeIndex(_coords._cftime_dates(values, units, calendar))
        ours = _core.LabelIndex("time", values, units, calendar)
        picks = [label_of(rng, dates[int(rng.integers(len(dates)))]) for _ in range(3)]
        for a in [*picks, None]:
            for b in [*picks, None]:
                want = reference(dates.slice_indexer, a, b)
                got = engine(ours.range, a, b)
                if reversed_range(dates.slice_indexer, a, b, got, want, len(values)):
                    continue
                assert same(got, want, len(values)), (calendar, values[:3], a, b, got, want)


def test_single_dates_equal_pandas_on_a_datetime_index():
    rng = np.random.default_rng(7)
    for _ in range(60):
        values, units = random_times(rng, "proleptic_gregorian")
        index = pd.DatetimeIndex(_coords.decode_time(values, {"units": units, "calendar": "proleptic_gregorian"}))
        ours = _core.LabelIndex("time", values, units, "proleptic_gregorian")
        for _ in range(4):
            label = label_of(rng, index[int(rng.integers(len(index)))])
            want = reference(index.get_loc, label)
            got = engine(ours.locate, label)
            assert same(got, want, len(values)), (values[:3], label, got, want)
            stamp = index[int(rng.integers(len(index)))] + pd.Timedelta(minutes=int(rng.integers(-900, 900)))
            for method in ["nearest", "pad", "backfill"]:
                want = reference(index.get_indexer, [stamp], method=method)
                got = engine(ours.locate, _coords.engine_label(stamp, "time"), method)
                assert same(got, None if want == -1 else want, len(values)), (stamp, method, got, want)


def test_labels_of_every_date_type_select_the_same():
    values = np.arange(10.0)
    ours = _core.LabelIndex("time", values, "days since 2000-01-01", "standard")
    import datetime

    import cftime

    for label in [
        "2000-01-04",
        datetime.date(2000, 1, 4),
        datetime.datetime(2000, 1, 4),
        pd.Timestamp("2000-01-04"),
        np.datetime64("2000-01-04"),
        cftime.DatetimeGregorian(2000, 1, 4),
    ]:
        assert ours.locate(_coords.engine_label(label, "time")) == 3, label
    with pytest.raises(strata.InvalidArgumentError, match="holds dates"):
        ours.locate(3.0)
    with pytest.raises(strata.InvalidArgumentError, match="not a date"):
        ours.select_text("2000-13")
    with pytest.raises(strata.InvalidArgumentError, match="cannot select 'time' by a boolean"):
        _coords.engine_label(True, "time")


def test_text_coordinates_select_as_xarray(tmp_path):
    import netCDF4

    path = tmp_path / "stations.nc"
    names = ["Bergen", "Bodo", "Oslo", "Tromso"]
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("station", len(names))
        nc.createDimension("time", 3)
        nc.createVariable("station", str, ("station",))[:] = np.array(names, dtype=object)
        nc.createVariable("temp", "f4", ("station", "time"))[:] = np.arange(12, dtype="f4").reshape(4, 3)
    strata.import_file(path, tmp_path / "s.strata")
    temp = strata.open(tmp_path / "s.strata")["temp"]
    ref = xr.open_dataset(path)["temp"]
    for label in ["Oslo", slice("Bodo", "Oslo"), slice("C", None), slice(None, "Bodo")]:
        np.testing.assert_array_equal(temp.sel(station=label), ref.sel(station=label).values, str(label))
    np.testing.assert_array_equal(temp.sel(station="Narvik", method="pad"), ref.sel(station="Narvik", method="pad"))
    with pytest.raises(strata.InvalidArgumentError, match="not a value of coordinate 'station'"):
        temp.sel(station="Narvik")

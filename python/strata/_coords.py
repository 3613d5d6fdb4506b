"""Label-based selection through 1-D coordinates, with CF time decoded.

Selection follows xarray's rules: a label slice is inclusive at both ends and is applied in
the coordinate's own order (pandas ``slice_indexer``), partial date strings such as
``"2000-01"`` cover their whole period, and a scalar label must match exactly unless a
``method`` ("nearest", "pad", "backfill") is given.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import pandas as pd


def is_time(attrs: dict[str, Any]) -> bool:
    units = attrs.get("units")
    return isinstance(units, str) and " since " in units


def decode_time(values: np.ndarray, attrs: dict[str, Any]) -> pd.Index:
    """A pandas index of datetimes (dates a timestamp holds) or cftime dates (other calendars,
    dates outside datetime64[ns]), decoded by the engine (``strata_core::cftime``, as SQL's
    timestamp columns are)."""
    import pandas as pd

    calendar = attrs.get("calendar", "standard")
    if not isinstance(calendar, str):
        calendar = "standard"
    nums = np.ascontiguousarray(values, dtype="f8").ravel()
    try:
        micros = _core.cf_unix_micros(nums, attrs["units"], calendar)
        fields = None if micros is not None else _core.cf_date_fields(nums, attrs["units"], calendar)
    except InvalidArgumentError:
        # Units the engine does not decode (months, years): cftime's rules, as before.
        return _cftime_index(_cftime_dates(nums, attrs["units"], calendar), calendar)
    if micros is not None:
        if len(micros) == 0 or (micros.min() >= _NS_MIN_US and micros.max() <= _NS_MAX_US):
            return pd.DatetimeIndex(micros.astype("datetime64[us]").astype("datetime64[ns]"))
        # Beyond datetime64[ns]: cftime dates, as xarray does.
        fields = _core.cf_date_fields(nums, attrs["units"], calendar)
    if fields is None:  # a NaN among the times
        return _cftime_index(_cftime_dates(nums, attrs["units"], calendar), calendar)
    import cftime

    fields = fields.reshape(-1, 4)
    # The engine counts years astronomically (a year 0 before year 1); cftime's real-world
    # calendars have no year 0 unless told.
    zero = {"has_year_zero": True} if len(fields) and fields[:, 0].min() <= 0 else {}
    # The calendar's own date class, as cftime.num2date gives: xarray parses labels into it.
    date_type = getattr(cftime, _DATE_TYPES[calendar.lower()])
    seconds, micro = np.divmod(fields[:, 3], 1_000_000)
    minutes, second = np.divmod(seconds, 60)
    hour, minute = np.divmod(minutes, 60)
    columns = (fields[:, 0], fields[:, 1], fields[:, 2], hour, minute, second, micro)
    make = functools.partial(date_type, **zero) if zero else date_type
    dates = list(map(make, *(c.tolist() for c in columns)))
    return _cftime_index(dates, calendar)


# datetime64[ns] holds 1677-09-21T00:12:43.145224192 .. 2262-04-11T23:47:16.854775807.
_NS_MIN_US = -9_223_372_036_854_775 + 1
_NS_MAX_US = 9_223_372_036_854_775 - 1


_DATE_TYPES = {
    "standard": "DatetimeGregorian",
    "gregorian": "DatetimeGregorian",
    "proleptic_gregorian": "DatetimeProlepticGregorian",
    "julian": "DatetimeJulian",
    "noleap": "DatetimeNoLeap",
    "365_day": "DatetimeNoLeap",
    "all_leap": "DatetimeAllLeap",
    "366_day": "DatetimeAllLeap",
    "360_day": "Datetime360Day",
}


def _cftime_dates(nums: np.ndarray, units: str, calendar: str):
    import cftime

    return cftime.num2date(nums, units, calendar=calendar, only_use_cftime_datetimes=True)


def _cftime_index(dates, calendar: str) -> pd.Index:
    try:
        import xarray as xr

        return xr.CFTimeIndex(np.asarray(dates).ravel())
    except ImportError as err:  # pragma: no cover - xarray is installed with the test extras
        raise InvalidArgumentError(f"label selection on calendar '{calendar}' needs xarray installed") from err


def coordinate_index(values: np.ndarray, attrs: dict[str, Any], decode_times: bool = True) -> pd.Index:
    import pandas as pd

    if decode_times and is_time(attrs):
        return decode_time(values, attrs)
    return pd.Index(np.asarray(values))


def label_to_positions(index: pd.Index, label: Any, dim: str, method: str | None = None) -> slice | int:
    """Positions of ``label`` (a slice of labels or a single label) along ``dim``."""
    if isinstance(label, slice):
        if label.step is not None:
            raise InvalidArgumentError(f"label slices on '{dim}' cannot have a step; use isel for strides")
        if not (index.is_monotonic_increasing or index.is_monotonic_decreasing):
            raise InvalidArgumentError(f"coordinate '{dim}' is not monotonic: select by position (isel)")
        try:
            pos = index.slice_indexer(label.start, label.stop)
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidArgumentError(f"cannot select {label} on '{dim}': {err}") from err
        return pos
    try:
        if method is None:
            loc = index.get_loc(label)
        else:
            loc = int(index.get_indexer([label], method=method)[0])
            if loc < 0:
                raise KeyError(label)
    except (KeyError, TypeError, ValueError) as err:
        raise InvalidArgumentError(
            f"{label!r} is not a value of coordinate '{dim}' (use a slice, or method='nearest')"
        ) from err
    if isinstance(loc, slice):
        return loc
    if isinstance(loc, np.ndarray):
        hits = np.flatnonzero(loc)
        return slice(int(hits[0]), int(hits[-1]) + 1)
    return int(loc)


def index_range(k: Any, n: int, dim: str) -> tuple[int, int, int]:
    """(start, stop, step) of a positional selection along ``dim`` of length ``n``: an
    integer (negative from the end) selects one position; stop is never before start."""
    if isinstance(k, int | np.integer):
        i = int(k) + (n if k < 0 else 0)
        if not 0 <= i < n:
            raise InvalidArgumentError(f"index {k} is out of range for '{dim}' of length {n}")
        k = slice(i, i + 1)
    if not isinstance(k, slice):
        raise InvalidArgumentError(f"select '{dim}' with an integer or a slice, not {type(k).__name__}")
    start, stop, step = k.indices(n)
    if step < 1:
        raise InvalidArgumentError(f"the step along '{dim}' must be positive")
    return start, max(start, stop), step

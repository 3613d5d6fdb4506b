"""1-D coordinates: CF time decoded into pandas indexes (to label results), and labels
handed to the engine, which picks their positions (``strata_core::labels``).

Selection follows xarray's rules, decided in the engine: a label slice is inclusive at both
ends and is applied in the coordinate's own order, partial date strings such as
``"2000-01"`` cover their whole period in the coordinate's CF calendar, and a scalar label
must match exactly unless a ``method`` ("nearest", "pad", "backfill") is given.
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


def label_to_positions(index: _core.LabelIndex, label: Any, dim: str, method: str | None = None) -> slice | int:
    """Positions of ``label`` (a slice of labels or a single label) along ``dim``, picked
    by the engine (``strata_core::labels``)."""
    if isinstance(label, slice):
        return slice(*index.range(*slice_labels(label, dim)))
    return as_positions(index.locate(engine_label(label, dim), method))


def slice_labels(label: slice, dim: str) -> tuple[float | str | None, float | str | None]:
    """A slice of labels as the engine's two ends (a label slice has no step)."""
    if label.step is not None:
        raise InvalidArgumentError(f"label slices on '{dim}' cannot have a step; use isel for strides")
    return engine_label(label.start, dim), engine_label(label.stop, dim)


def as_positions(pick: int | tuple[int, int]) -> slice | int:
    """The engine's pick (a position, or a range) as a NumPy index."""
    return slice(*pick) if isinstance(pick, tuple) else pick


def engine_label(label: Any, dim: str) -> float | str | None:
    """A label as the engine takes it: a number, or text (dates as ISO 8601 to the
    microsecond, whatever their type: datetime, pandas, NumPy or cftime)."""
    if label is None or isinstance(label, str):
        return label
    if isinstance(label, bool | np.bool_):
        raise InvalidArgumentError(f"cannot select '{dim}' by a boolean")
    if isinstance(label, int | float | np.integer | np.floating):
        return float(label)
    if isinstance(label, np.datetime64):
        return str(np.datetime_as_string(label.astype("datetime64[us]")))
    if all(hasattr(label, f) for f in ("year", "month", "day")):  # datetime, date, Timestamp, cftime
        sign = "-" if label.year < 0 else ""
        h, m, s, us = (getattr(label, f, 0) for f in ("hour", "minute", "second", "microsecond"))
        return f"{sign}{abs(label.year):04d}-{label.month:02d}-{label.day:02d}T{h:02d}:{m:02d}:{s:02d}.{us:06d}"
    raise InvalidArgumentError(f"cannot select '{dim}' by {type(label).__name__} {label!r}")


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

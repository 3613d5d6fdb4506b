"""Label-based selection through 1-D coordinates, with CF time decoded.

Selection follows xarray's rules: a label slice is inclusive at both ends and is applied in
the coordinate's own order (pandas ``slice_indexer``), partial date strings such as
``"2000-01"`` cover their whole period, and a scalar label must match exactly unless a
``method`` ("nearest", "pad", "backfill") is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import pandas as pd


def is_time(attrs: dict[str, Any]) -> bool:
    units = attrs.get("units")
    return isinstance(units, str) and " since " in units


def decode_time(values: np.ndarray, attrs: dict[str, Any]) -> pd.Index:
    """A pandas index of datetimes (standard calendars) or cftime dates (others)."""
    import cftime
    import pandas as pd

    calendar = attrs.get("calendar", "standard")
    if not isinstance(calendar, str):
        calendar = "standard"
    nums = np.asarray(values, dtype="f8")
    if calendar.lower() in ("standard", "gregorian", "proleptic_gregorian"):
        try:
            dates = cftime.num2date(
                nums, attrs["units"], calendar=calendar, only_use_cftime_datetimes=False, only_use_python_datetimes=True
            )
            return pd.DatetimeIndex(pd.to_datetime(list(np.asarray(dates).ravel())))
        except (ValueError, OverflowError, pd.errors.OutOfBoundsDatetime):
            pass  # dates outside datetime64[ns]: fall back to cftime dates, as xarray does
    dates = cftime.num2date(nums, attrs["units"], calendar=calendar, only_use_cftime_datetimes=True)
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

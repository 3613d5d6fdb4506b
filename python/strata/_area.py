"""Selection through auxiliary coordinates: 2-D curvilinear lat/lon (``lat(y, x)``), or the
1-D coordinates of an unstructured mesh (``lat(ncol)``), are not dimensions, so a range of
their values is not a range of positions. The engine (``strata_core::area``, which SQL's
``WHERE latitude >= 60`` uses too) makes it a mask over the axes they span: the query is
narrowed to the mask's bounding box, sub-chunks outside it are not read, and a count
through it comes from the bin bitmaps ANDed with it. This module parses the selection.

>>> ds.query("siconc > 50", sel={"latitude": slice(60, 90)}, output="count")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _core
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy as np

    from .dataset import Dataset


def is_auxiliary(ds: Dataset, dims: tuple[str, ...], name: str) -> bool:
    """Whether ``name`` is an auxiliary coordinate of variables on ``dims``: a variable that
    is not one of those dimensions, spanning only (some of) them (the engine's rule)."""
    return ds._reader.is_auxiliary(list(dims), name)


def split_selection(ds: Dataset, dims: tuple[str, ...], sel: dict | None) -> tuple[dict, dict]:
    """``sel`` as (selections by dimension, selections by auxiliary coordinate; see
    :func:`is_auxiliary`)."""
    by_dim, by_aux = {}, {}
    for name, label in (sel or {}).items():
        if is_auxiliary(ds, dims, name):
            by_aux[name] = label
        elif name in dims or name not in ds.variables:
            by_dim[name] = label
        else:
            raise InvalidArgumentError(
                f"'{name}' is neither a dimension of the queried variables {dims} nor a coordinate on some of "
                f"them (its dimensions: {ds[name].dims})"
            )
    return by_dim, by_aux


def area(ds: Dataset, dims: tuple[str, ...], shape: tuple[int, ...], by_aux: dict) -> _core.Area | None:
    """The elements whose auxiliary coordinates are inside the given ranges (all of them),
    over the axes those coordinates span: the engine's ``Area`` (``strata_core::area``)."""
    if not by_aux:
        return None
    ranges = sorted((name, *range_bounds(name, label)) for name, label in by_aux.items())
    # The same ranges give the same area: kept with the dataset, as the coordinates are.
    key = ("area", dims, tuple(ranges))
    if key not in ds._indexes:
        ds._indexes[key] = _core.Area.build(ds._reader, list(dims), list(shape), ranges)
    return ds._indexes[key]


def range_bounds(name: str, label: Any) -> tuple[float | None, float | None]:
    if isinstance(label, slice):
        if label.step is not None:
            raise InvalidArgumentError(f"the range of '{name}' cannot have a step")
        lo, hi = label.start, label.stop
    elif isinstance(label, tuple | list) and len(label) == 2:
        lo, hi = label
    else:
        raise InvalidArgumentError(
            f"select by '{name}', a coordinate spanning several positions, with a range of values: "
            f"slice(lo, hi) or (lo, hi), not {label!r}"
        )
    try:
        return (None if lo is None else float(lo)), (None if hi is None else float(hi))
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"the range of '{name}' must be numbers, not {label!r}") from None


def coordinate_values(ds: Dataset, name: str) -> np.ndarray:
    """The stored values of an auxiliary coordinate, read once per dataset (they are reused
    by every query and every streamed piece)."""
    key = ("values", name)
    if key not in ds._indexes:
        ds._indexes[key] = ds[name][...]
    return ds._indexes[key]


def auxiliary_coordinates(ds: Dataset, var) -> list[str]:
    """The coordinates a CF ``coordinates`` attribute names for ``var`` that span some of its
    dimensions but are not dimension coordinates (2-D lat/lon)."""
    return ds._reader.auxiliary_coordinates(var.name)

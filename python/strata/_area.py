"""Selection through auxiliary coordinates: 2-D curvilinear lat/lon (``lat(y, x)``), or the
1-D coordinates of an unstructured mesh (``lat(ncol)``), are not dimensions, so a range of
their values is not a range of positions. It becomes a mask over the axes they span: the
query is narrowed to the mask's bounding box, and the engine takes the mask
(``strata_core::mask``): sub-chunks outside it are not read, and a count through it comes
from the bin bitmaps ANDed with it.

>>> ds.query("siconc > 50", sel={"latitude": slice(60, 90)}, output="count")  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from .dataset import Dataset


@dataclass
class Area:
    """Which elements of some axes of the queried variables are selected."""

    axes: tuple[int, ...]
    """The queried variables' axes the mask spans, in order."""
    mask: np.ndarray
    """Over the whole extent of those axes."""
    _engine: Any = field(default=None, repr=False, compare=False)
    _extent: list | None = field(default=None, repr=False, compare=False)

    def extent(self) -> list[tuple[int, int] | None]:
        """Per axis of the mask, the first and one past the last index holding a selected
        element (None: none does); computed once, as every query through the area asks."""
        if self._extent is None:
            self._extent = []
            for k in range(len(self.axes)):
                others = tuple(j for j in range(self.mask.ndim) if j != k)
                hit = np.flatnonzero(self.mask.any(axis=others)) if self.mask.size else np.array([], dtype=np.intp)
                self._extent.append((int(hit[0]), int(hit[-1]) + 1) if hit.size else None)
        return self._extent

    def narrow(self, starts: list[int], stops: list[int], steps: list[int]) -> None:
        """Shrinks a region (in place) to the mask's bounding box along its axes."""
        for axis, hit in zip(self.axes, self.extent(), strict=True):
            if hit is None:
                stops[axis] = starts[axis]
                continue
            lo, hi = hit
            if lo > starts[axis]:
                # The first selected index at or after lo, on the region's stride.
                step = steps[axis]
                starts[axis] += -(-(lo - starts[axis]) // step) * step
            stops[axis] = max(starts[axis], min(stops[axis], hi))

    def engine_mask(self):
        """The mask as the engine takes it (``_core.AreaMask``), built on first use."""
        if self._engine is None:
            from . import _core

            self._engine = _core.AreaMask(list(self.axes), np.ascontiguousarray(self.mask, dtype=bool))
        return self._engine

    def covers(self, starts: list[int], stops: list[int], steps: list[int]) -> bool:
        """Whether every element of the region along the mask's axes is selected (nothing to
        drop afterwards)."""
        box = tuple(slice(starts[a], stops[a], steps[a]) for a in self.axes)
        return bool(self.mask[box].all())


def is_auxiliary(ds: Dataset, dims: tuple[str, ...], name: str) -> bool:
    """Whether ``name`` is an auxiliary coordinate of variables on ``dims``: a variable that
    is not one of those dimensions, spanning only (some of) them."""
    if name in dims or name not in ds.variables:
        return False
    own = ds[name].dims
    return bool(own) and set(own) <= set(dims)


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


def area(ds: Dataset, dims: tuple[str, ...], shape: tuple[int, ...], by_aux: dict) -> Area | None:
    """The mask of the elements whose auxiliary coordinates are inside the given ranges
    (all of them), over the axes those coordinates span."""
    if not by_aux:
        return None
    # The same ranges give the same mask: kept with the dataset, as the coordinates are.
    key = ("area", dims, tuple(sorted((name, _bounds(name, label)) for name, label in by_aux.items())))
    if key not in ds._indexes:
        ds._indexes[key] = _area(ds, dims, shape, by_aux)
    return ds._indexes[key]


def _area(ds: Dataset, dims: tuple[str, ...], shape: tuple[int, ...], by_aux: dict) -> Area:
    axes = tuple(sorted({dims.index(d) for name in by_aux for d in ds[name].dims}))
    mask = np.ones(tuple(shape[a] for a in axes), dtype=bool)
    for name, label in by_aux.items():
        var = ds[name]
        lo, hi = _bounds(name, label)
        values = _physical(ds, var)
        if lo is not None and hi is not None and lo > hi:
            if not _is_longitude(var):
                raise InvalidArgumentError(f"'{name}' range ({lo}, {hi}) is empty: its lower bound is above the upper")
            # A longitude range across the dateline: 170..-170 means >= 170 or <= -170.
            inside = (values >= lo) | (values <= hi)
        else:
            inside = np.ones(values.shape, dtype=bool)
            if lo is not None:
                inside &= values >= lo
            if hi is not None:
                inside &= values <= hi
        # Onto the mask's axes: the coordinate's own axes in the queried variables' order.
        own = [dims.index(d) for d in var.dims]
        order = np.argsort(own)
        inside = np.transpose(inside, order)
        own_sorted = sorted(own)
        expand = tuple(slice(None) if a in own_sorted else np.newaxis for a in axes)
        mask &= inside[expand]
    return Area(axes, mask)


def _bounds(name: str, label: Any) -> tuple[float | None, float | None]:
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
    return [n for n in str(var.attrs.get("coordinates", "")).split() if is_auxiliary(ds, var.dims, n)]


def _physical(ds: Dataset, var) -> np.ndarray:
    """A coordinate's values as float64, fill and missing values as NaN, unpacked."""
    values = np.array(coordinate_values(ds, var.name), dtype=np.float64)
    attrs = var.attrs
    for key in ("_FillValue", "missing_value"):
        if key in attrs:
            for v in np.atleast_1d(np.asarray(attrs[key], dtype=np.float64)):
                values[values == v] = np.nan
    if "scale_factor" in attrs or "add_offset" in attrs:
        values = values * float(attrs.get("scale_factor", 1.0)) + float(attrs.get("add_offset", 0.0))
    return values


def _is_longitude(var) -> bool:
    attrs = var.attrs
    units = str(attrs.get("units", "")).lower()
    return attrs.get("standard_name") == "longitude" or units in ("degrees_east", "degree_east", "degrees_e")

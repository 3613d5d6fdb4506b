"""Value queries: where a constraint holds inside a region, and the values there.

>>> ds = strata.open("ersst.strata")                                  # doctest: +SKIP
>>> ds.query("sst > 28", isel={"time": slice(0, 12)}, output="count")  # doctest: +SKIP
>>> ds.query("sst >= 25 and (sst < 28 or lat > 0)")                   # doctest: +SKIP

A constraint compares variables with numbers (``<  <=  >  >=  ==  !=``, also ``=``, and
``25 < sst``) and combines comparisons with ``and``/``or`` (also ``&``/``|``, ``&&``/``||``)
and parentheses; ``and`` binds tighter; ``not`` negates. A name that is not a
plain identifier is quoted: ``"sea ice" > 0`` or `` `T-2m` > 273``. Every variable in it must
have the same dimensions. NaN and fill values satisfy no comparison (``not`` included, as in
SQL). Selection is exact at every precision level: only the returned values are read at
reduced precision.

Parsing, planning, the choice between index and scan, execution and the cost model's
learning are the engine's (``strata_core::constraint`` and ``strata_core::session``); this
module turns arguments into a region and results into NumPy and pandas.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core
from ._frames import frame
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from .dataset import Dataset

OUTPUTS = ("points", "positions", "dense", "count")
METHODS = ("auto", "index", "scan")


def parse_where(text: str) -> _core.Constraint:
    """Parses a constraint (the grammar is the engine's: ``strata_core::constraint``).
    ``str()`` of the result gives it back in a canonical form."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"a constraint is text, not {type(text).__name__}")
    return _core.Constraint(text)


def _as_constraint(where: str | dict | _core.Constraint) -> _core.Constraint:
    if isinstance(where, _core.Constraint):
        return where
    if isinstance(where, dict):
        return _core.Constraint.from_json(json.dumps(where))
    return parse_where(where)


_default: tuple[Any, _core.Session] | None = None
_default_lock = threading.Lock()


def session() -> _core.Session:
    """The process's query session: the stored cost model (``strata calibrate``) with the
    corrections learned from the queries run so far, shared by ``Dataset.query``,
    ``query_batches`` and ``strata.sql``. A new stored model (another path, or the file
    rewritten) starts a new session."""
    global _default
    path = _core.cost_model_path()
    try:
        st = os.stat(path)
        key: Any = (path, st.st_mtime_ns, st.st_size)
    except OSError:
        key = (path, None, None)
    with _default_lock:
        if _default is None or _default[0] != key:
            _default = (key, _core.Session())
        return _default[1]


def _region(ds: Dataset, dims: tuple[str, ...], shape: tuple[int, ...], isel: dict | None, sel: dict | None):
    """Per dimension (start, stop, step) from positional and label selections, and the
    :class:`strata._core.Area` selected through auxiliary coordinates (None without any):
    the region is narrowed to its bounding box."""
    from ._area import area, split_selection
    from ._coords import index_range, label_to_positions

    picks: dict[str, Any] = dict(isel or {})
    sel, by_aux = split_selection(ds, dims, sel)
    for dim, label in sel.items():
        if dim in picks:
            raise InvalidArgumentError(f"dimension '{dim}' is selected twice")
        if dim not in dims:
            raise InvalidArgumentError(f"the constraint's variables have no dimension '{dim}' (dims: {dims})")
        picks[dim] = label_to_positions(ds.label_index(dim), label, dim)
    for dim in picks:
        if dim not in dims:
            raise InvalidArgumentError(f"the constraint's variables have no dimension '{dim}' (dims: {dims})")
    starts, stops, steps = [], [], []
    for dim, n in zip(dims, shape, strict=True):
        start, stop, step = index_range(picks.get(dim, slice(None)), n, dim)
        starts.append(start)
        stops.append(stop)
        steps.append(step)
    selected = area(ds, dims, shape, by_aux)
    if selected is not None:
        starts, stops, needed = selected.narrow(starts, stops, steps)
        if not needed:
            selected = None
    return starts, stops, steps, selected


def _constraint(ds: Dataset, where: str | dict, method: str) -> tuple[_core.Constraint, list[str]]:
    """The parsed constraint and the variables it names, checked against the store, and
    the method checked."""
    constraint = _as_constraint(where)
    names = constraint.variables
    for n in names:
        if n not in ds.variables:
            raise InvalidArgumentError(f"the constraint names '{n}', which is not a variable of this store")
    if method not in METHODS:
        raise InvalidArgumentError(f"method must be one of {', '.join(METHODS)}, not '{method}'")
    return constraint, names


def run_query(
    ds: Dataset,
    where: str | dict | _core.Constraint,
    *,
    isel: dict | None = None,
    sel: dict | None = None,
    variables: list[str] | None = None,
    output: str = "points",
    precision: int | None = None,
    max_rel_error: float | None = None,
    with_stats: bool = False,
    method: str = "auto",
    region: tuple | None = None,
    raw: bool = False,
    frame: bool = False,
):
    """See :meth:`strata.Dataset.query`. ``region``: (starts, stops, steps, area) as
    :func:`_region` gives it, instead of ``isel``/``sel``; ``frame``: one frame of
    :func:`query_batches` (its columns are freed with it, not kept for the next result).
    The engine's session plans, chooses the method, runs and learns; this shapes
    arguments and results."""
    if output not in OUTPUTS:
        raise InvalidArgumentError(f"output must be one of {', '.join(OUTPUTS)}, not '{output}'")
    constraint, names = _constraint(ds, where, method)
    driver = ds[names[0]]
    starts, stops, steps, selected = region if region is not None else _region(ds, driver.dims, driver.shape, isel, sel)
    views = {}
    if output in ("points", "dense"):
        for n in list(variables) if variables else names:
            if n not in ds.variables:
                raise InvalidArgumentError(f"'{n}' is not a variable of this store")
            v = ds[n]
            if v.dims != driver.dims:
                raise InvalidArgumentError(f"'{n}' has dimensions {v.dims}, the constraint's variables {driver.dims}")
            if precision is not None or max_rel_error is not None:
                v = v.at_precision(precision, max_rel_error=max_rel_error)
            views[n] = v
    levels = {v.level for v in views.values()}
    # One level for every returned variable: they are read with the selection; otherwise
    # the selection comes first and each variable is gathered at its own level.
    outputs = list(views) if len(levels) == 1 else []
    level = next(iter(levels)) if len(levels) == 1 else None
    kind = "points" if output in ("points", "dense") else output
    # An area (curvilinear or mesh coordinates) is the engine's mask: sub-chunks outside it
    # are not read, and a count through it comes from the index where bins allow.
    query = _core.Query(
        constraint,
        starts,
        stops,
        steps,
        area=selected,
        output=kind,
        variables=outputs,
        level=level,
        method=method,
        raw=raw,
    )
    if output == "points" and outputs:
        # Read with the selection: the engine builds the columns a piece at a time.
        result, answer = _points(ds, driver, query, views, recycle=not frame)
        return (result, _stats(answer)) if with_stats else result
    found, columns, answer = session().query(ds._reader, query, coordinates=kind == "positions")
    flat = found
    count = answer.count
    result: Any
    if output == "count":
        result = int(count)
    elif output == "positions":
        result = tuple(flat)
    else:
        if outputs:
            values = {n: _native(col.view(views[n].dtype)) for n, col in zip(outputs, columns, strict=True)}
        else:
            values = {n: _gather(ds, v, flat) for n, v in views.items()}
        if output == "points":
            result = _points_at(ds, driver, flat, values)
        else:
            result = _dense(driver, starts, stops, steps, flat, values)
    # The stats (the EXPLAIN text among them) only when asked: a count through an area
    # takes a tenth of a millisecond, formatting them a few hundredths.
    return (result, _stats(answer)) if with_stats else result


def _stats(answer: _core.Answer) -> dict[str, Any]:
    stats: dict[str, Any] = dict(zip(("subchunks", "full", "empty", "boundary", "scanned"), answer.stats, strict=True))
    stats["methods"] = answer.methods
    stats["estimated_s"] = answer.estimated_s
    stats["seconds"] = answer.seconds
    stats["explain"] = str(answer)
    return stats


def iter_query(
    ds: Dataset,
    where: str | dict,
    *,
    isel: dict | None = None,
    sel: dict | None = None,
    variables: list[str] | None = None,
    output: str = "points",
    precision: int | None = None,
    max_rel_error: float | None = None,
    method: str = "auto",
    records: int | None = None,
    raw: bool = False,
):
    """See :meth:`strata.Dataset.query_batches`."""
    if output not in ("points", "positions", "count"):
        raise InvalidArgumentError(f"query_batches streams points, positions or count, not '{output}'")
    if records is not None and records < 1:
        raise InvalidArgumentError(f"records must be at least 1, not {records}")
    # Checked here, not when the first piece runs: errors surface at the call.
    constraint, names = _constraint(ds, where, method)
    driver = ds[names[0]]
    starts, stops, steps, selected = _region(ds, driver.dims, driver.shape, isel, sel)
    kw = dict(
        variables=variables,
        output=output,
        precision=precision,
        max_rel_error=max_rel_error,
        method=method,
        raw=raw,
        frame=True,
    )
    whole = (starts, stops, steps, selected)
    if not driver.shape or stops[0] <= starts[0]:
        return iter([run_query(ds, constraint, region=whole, **kw)])
    # The engine cuts the pieces where the driver's sub-chunks start, so no sub-chunk is
    # read by two pieces; `records` asks for longer pieces.
    spans = ds._reader.pieces(names[0], starts, stops, steps, records)
    regions = [(a, b, steps, selected) for a, b in spans]
    # An empty selection along another dimension has no pieces: one empty answer.
    return _pieces(ds, constraint, regions or [whole], kw)


def _pieces(ds: Dataset, constraint: _core.Constraint, regions: list, kw: dict):
    """Runs the pieces one ahead of the consumer: the next piece is read and decoded on a
    worker thread (the extension releases the GIL) while the caller handles the current one,
    so at most two pieces are in memory. Closing the iterator waits for the piece in flight
    and starts no other."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="strata-prefetch") as pool:
        pending = None
        for region in regions:
            ahead = pool.submit(run_query, ds, constraint, region=region, **kw)
            if pending is not None:
                yield pending.result()
            pending = ahead
        if pending is not None:
            yield pending.result()


def _native(arr: np.ndarray) -> np.ndarray:
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def _gather(ds: Dataset, var, flat: np.ndarray) -> np.ndarray:
    out = np.empty(flat.size * var.dtype.itemsize, dtype=np.uint8)
    ds._reader.gather(var.name, flat, out, var.level)
    return _native(out.view(var.dtype))


def _point_columns(ds: Dataset, driver, values: dict) -> tuple[list, list[str]]:
    """What the frame of a points result holds besides the values: per dimension, its
    coordinate's values (numeric ones as the engine takes them, else None) and whether the
    index along it is needed; and the auxiliary coordinates to add."""
    from ._area import auxiliary_coordinates

    aux = [n for n in auxiliary_coordinates(ds, driver) if n not in values]
    plan = []
    for d, dim in enumerate(driver.dims):
        coord = ds.coords.get(dim)
        numeric = None
        if coord is not None and dim not in values:
            labels = np.asarray(ds.coordinate_index(dim))
            plain = labels.dtype.kind in "iufMm" and labels.dtype.itemsize in (1, 2, 4, 8)
            if plain and len(labels) == driver.shape[d]:
                numeric = labels
            plan.append((dim, labels, numeric, numeric is None))
        else:
            plan.append((dim if dim not in values else f"{dim}_index", None, None, True))
    return plan, aux


def _engine_columns(ds: Dataset, plan: list, aux: list[str]) -> tuple[list, list, list]:
    """What the engine builds besides the values, as it takes it: per dimension, its numeric
    coordinate (bytes, item size) or None, and whether to give the index along it; per
    auxiliary coordinate, its name and its stored values' bytes."""
    from ._area import coordinate_values

    coordinates = [
        None if numeric is None else (np.ascontiguousarray(numeric).view(np.uint8).reshape(-1), numeric.dtype.itemsize)
        for _, _, numeric, _ in plan
    ]
    wanted = [want for *_, want in plan]
    return (
        coordinates,
        wanted,
        [(n, np.ascontiguousarray(coordinate_values(ds, n)).view(np.uint8).reshape(-1)) for n in aux],
    )


def _aux_columns(ds: Dataset, aux: list[str], picked: list) -> dict:
    """The engine's auxiliary coordinate columns (bytes) as arrays of their type."""
    from ._area import coordinate_values

    return {n: col.view(coordinate_values(ds, n).dtype) for n, col in zip(aux, picked, strict=True)}


def _points(ds: Dataset, driver, query: _core.Query, views: dict, recycle: bool):
    """A points query run by the engine a piece at a time, its columns built there: the
    frame and what the query did."""
    plan, aux = _point_columns(ds, driver, views)
    dims, cols, picked, answer = session().points(ds._reader, query, *_engine_columns(ds, plan, aux), recycle=recycle)
    values = {n: _native(col.view(views[n].dtype)) for n, col in zip(views, cols, strict=True)}
    return _frame(plan, dims, _aux_columns(ds, aux, picked), values), answer


def _points_at(ds: Dataset, driver, flat: np.ndarray, values: dict):
    """The frame of a points result given by flat indices (values gathered by position)."""
    flat = np.ascontiguousarray(flat, dtype=np.uint64)
    plan, aux = _point_columns(ds, driver, values)
    dims, picked = _core.points_at(ds._reader, driver.name, flat, *_engine_columns(ds, plan, aux))
    return _frame(plan, dims, _aux_columns(ds, aux, picked), values)


def _frame(plan: list, dims: list, aux: dict, values: dict):
    """The frame of a points result: per dimension (as `_point_columns` planned it) the
    coordinate's values or the indices along it, from `dims` (the engine's (coordinate
    bytes, uint64 indices) per dimension, each None unless asked for); the auxiliary
    coordinates at each point (2-D lat/lon of a curvilinear grid); then the values."""
    columns: dict[str, Any] = {}
    for (name, labels, numeric, _), (picked, index) in zip(plan, dims, strict=True):
        if numeric is not None:
            columns[name] = picked.view(numeric.dtype)
        elif labels is not None:
            columns[name] = labels[index.view(np.int64)]
        else:
            columns[name] = index.view(np.int64)
    columns.update(aux)
    columns.update(values)
    # The columns become the frame as they are (copied into one block per dtype, they took
    # longer than the query on large results).
    return frame(columns)


def _dense(driver, starts, stops, steps, flat: np.ndarray, values: dict):
    """The region of the first requested variable, with NaN (floats) or masked elements
    where the constraint does not hold."""
    vals = next(iter(values.values()))
    shape = tuple(len(range(a, b, s)) for a, b, s in zip(starts, stops, steps, strict=True))
    coords = np.unravel_index(flat.astype(np.int64), driver.shape)
    local = tuple((c - a) // s for c, a, s in zip(coords, starts, steps, strict=True))
    if vals.dtype.kind == "f":
        out = np.full(shape, np.nan, dtype=vals.dtype)
        out[local] = vals
        return out
    data = np.zeros(shape, dtype=vals.dtype)
    mask = np.ones(shape, dtype=bool)
    data[local] = vals
    mask[local] = False
    return np.ma.masked_array(data, mask=mask)

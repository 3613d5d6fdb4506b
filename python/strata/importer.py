"""Import NetCDF-3/4 and HDF5 files into a store, and append more records to one.

Import streams slab by slab: at any time it holds one slab of one variable as read from
the source plus that slab's compressed segments, so memory stays bounded whatever the file
size (variables without the record dimension are read whole; they are the coordinates and
static fields).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _attrs, _core
from ._slabs import le_bytes, write_record_slabs, write_static, writer_options
from ._sources import open_source, source_dtype
from .dataset import is_store
from .errors import CompatibilityError, ConflictError, InvalidArgumentError


@dataclass
class ImportReport:
    """What an import or append did, with its figures."""

    source: str
    store: str
    version: int
    #: Records written along the record dimension (None: the store has none).
    records: int | None
    raw_bytes: int
    seconds: float
    variables: list[dict] = field(default_factory=list)

    @property
    def mb_per_s(self) -> float:
        return self.raw_bytes / 1e6 / self.seconds if self.seconds > 0 else float("inf")


def choose_record_dim(nc) -> str | None:
    """The dimension to cut slabs along: the unlimited one, else the leading dimension of the
    largest variable; provided every variable that uses it has it first and no string
    variable uses it (strings live in the manifest, not in slabs)."""
    candidates = [d for d, dim in nc.dimensions.items() if dim.isunlimited()]
    if not candidates:
        sized = [v for v in nc.variables.values() if v.dimensions and v.dtype is not str]
        if sized:
            largest = max(sized, key=lambda v: int(np.prod(v.shape, dtype=np.int64)) * np.dtype(v.dtype).itemsize)
            candidates = [largest.dimensions[0]]
    for dim in candidates:
        users = [v for v in nc.variables.values() if dim in v.dimensions]
        if all(v.dimensions[0] == dim and v.dtype is not str for v in users):
            return dim
    return None


def _schema(nc, record_dim: str | None) -> dict:
    variables = []
    for name, var in nc.variables.items():
        dtype = source_dtype(var)
        entry: dict[str, Any] = {
            "name": name,
            "dtype": dtype,
            "dims": list(var.dimensions),
            "attrs": [_attrs.encode(a, var.getncattr(a)) for a in var.ncattrs()],
        }
        if dtype == "string":
            if record_dim in var.dimensions:
                raise CompatibilityError(f"string variable '{name}' along the record dimension is not supported")
            entry["inline_strings"] = [str(s) for s in np.asarray(var[...], dtype=object).ravel()]
        variables.append(entry)
    return {
        "dims": [{"name": n, "size": len(d), "unlimited": d.isunlimited()} for n, d in nc.dimensions.items()],
        "record_dim": record_dim,
        "attrs": [_attrs.encode(a, nc.getncattr(a)) for a in nc.ncattrs()],
        "variables": variables,
    }


def source_schema(nc, source: str, record_dim: str | None) -> tuple[str | None, dict]:
    """The record dimension (``record_dim``, else the one ``choose_record_dim`` finds) and
    the schema of an open source: what an import and an index in place both start from."""
    rec = record_dim if record_dim is not None else choose_record_dim(nc)
    if rec is not None and rec not in nc.dimensions:
        raise InvalidArgumentError(f"--record-dim '{rec}' is not a dimension of '{source}'")
    return rec, _schema(nc, rec)


class _Silent:
    """The progress bar of work that shows none: tqdm is not even imported (it added 24 ms
    to a new process's first import of a small file, 183 ms in all)."""

    def update(self, n: int = 1) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc) -> None:
        return None


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return _Silent()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, leave=False)


def _write_records(writer, nc, names: list[str], dtypes: dict[str, str], bar) -> int:
    """Every record variable of ``nc``, slab by slab; returns the records written."""
    if not names:
        return 0
    sources = {name: (nc.variables[name], dtypes[name]) for name in names}
    return write_record_slabs(writer, sources, len(nc.variables[names[0]]), bar)


def _prepare(nc, source: str, *, record_dim: str | None = None, codec: str | None = "auto", **writer_args):
    """The record dimension, the schema and the writer's options of an import of the open
    source ``nc``: what :func:`import_file` and :func:`preview_import` both start from."""
    rec, schema = source_schema(nc, source, record_dim)
    return rec, schema, writer_options("auto" if codec is None else codec, **writer_args)


def import_file(
    source: str | os.PathLike,
    store: str | os.PathLike,
    *,
    codec: str | None = "auto",
    objective: str = "balanced",
    error_bound: str | None = None,
    layout: str | None = None,
    byte_groups: dict[str, list[int]] | list[str] | None = None,
    bins: int | None = None,
    binning: str | None = None,
    chunks: dict[str, int] | str | None = None,
    subchunks: dict[str, int] | str | None = None,
    shape_rule: str | None = None,
    record_dim: str | None = None,
    slab_records: int | None = None,
    progress: bool = False,
) -> ImportReport:
    """Imports a NetCDF-3/4 or HDF5 file into a new store. Values are kept exactly as stored
    (packed integers stay packed, NaNs and fill values stay), with every attribute.

    ``codec="auto"`` (the default) lets the engine's analyzer plan every variable of at
    least 16 KiB from a sample of its first slab, for ``objective``: ``ratio`` (smallest),
    ``speed`` (fastest decoding) or ``balanced`` (among chains that decode at 1 GB/s and
    encode at 150 MB/s per core or faster, the quickest to write of those that store 15%
    less than netCDF4's zlib 4 + shuffle on the same sample, else the smallest; a variable
    of at most 1 MiB, stored whole, gets the smallest among chains encoding at 125 MB/s or
    faster); the plan and its scores are recorded in the manifest. Smaller variables use
    ``shuffle+zstd:3``, or ``raw`` where that would not make one without the record
    dimension smaller (a scalar). Any other value is a chain applied to every variable.

    ``error_bound`` (``abs=E`` or ``rel=E``, relative to the value range) lets ``auto`` also
    pick the error-bounded lossy codecs ``sz`` and ``zfp`` for float variables.

    ``layout`` orders the levels by priority: ``"S"`` (space only), ``"S-M"`` or ``"M-S"``
    (level M splits floats into ``byte_groups``, most significant first, so reads at reduced
    precision fetch only the first groups). Under M, float variables are compressed group by
    group with ``zstd:3`` unless ``codec`` names a chain.

    ``chunks`` and ``subchunks`` fix lengths along some dimensions; the others follow
    ``shape_rule``: ``"auto"`` (the default: ``"cube"``, or ``"proportional"`` where a
    cube would hold a few levels or months whole), ``"cube"`` (the longest axis is halved
    until a block fits, so maps and series at a point read about as much),
    ``"proportional"`` (blocks keep the array's proportions: short axes such as a few
    levels or months are cut too, which suits boxes that take a share of every axis) or
    ``"slices"`` (the leading axes are cut first, which suits maps); docs/writing.md,
    "Chunk shapes", has the measurements.

    Options left unset (``layout``, ``bins``, chunks...) come from the layout file
    ``STRATA_CONFIG`` names, if any (docs/writing.md), else the defaults (layout ``"S"``)."""
    source, store = os.fspath(source), os.fspath(store)
    if is_store(store):
        raise InvalidArgumentError(f"'{store}' already holds a strata store (use 'strata append')")
    t0 = time.perf_counter()
    nc = open_source(source)
    try:
        rec, schema, options = _prepare(
            nc,
            source,
            record_dim=record_dim,
            codec=codec,
            objective=objective,
            error_bound=error_bound,
            chunks=chunks,
            subchunks=subchunks,
            shape_rule=shape_rule,
            slab_records=slab_records,
            layout=layout,
            byte_groups=byte_groups,
            bins=bins,
            binning=binning,
        )
        writer = _core.Writer.create(store, json.dumps(schema), json.dumps(options))
        dtypes = {v["name"]: v["dtype"] for v in schema["variables"]}
        record_vars = [v["name"] for v in schema["variables"] if v["dims"][:1] == [rec] and rec is not None]
        static_vars = [n for n, t in dtypes.items() if n not in record_vars and t != "string"]
        raw = sum(
            int(np.prod(nc.variables[n].shape, dtype=np.int64)) * max(np.dtype(nc.variables[n].dtype).itemsize, 1)
            for n in record_vars + static_vars
        )
        with _progress(raw, f"import {os.path.basename(source)}", progress) as bar:
            for name in static_vars:
                write_static(writer, name, nc.variables[name], dtypes[name], bar)
            records = _write_records(writer, nc, record_vars, dtypes, bar) if rec is not None else None
        version = writer.commit(f"import {os.path.basename(source)}")
    finally:
        nc.close()
    return _report(source, store, version, records, raw, time.perf_counter() - t0)


@dataclass
class PlannedVariable:
    """What an import stores for one variable (:func:`preview_import`): its chunk and
    sub-chunk shapes, the chain new segments use and the analyzer's record (None when the
    variable was too small to plan, or the chain was given)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...] | None
    subchunks: tuple[int, ...] | None
    chain: str | None
    plan: dict | None


def preview_import(source: str | os.PathLike, variables: list[str] | None = None, **options) -> list[PlannedVariable]:
    """What :func:`import_file` with the same options would store for each numeric variable
    of ``source`` (or of ``variables``): chunk and sub-chunk shapes, chain and plan, made by
    the engine's writer from the data the import would plan from (a record variable's first
    slab, a static variable's first piece), with nothing written anywhere. ``options`` are
    :func:`import_file`'s (``codec``, ``objective``, ``error_bound``, ``chunks``,
    ``record_dim``, ...), but for ``progress``."""
    source = os.fspath(source)
    nc = open_source(source)
    try:
        rec, schema, writer_opts = _prepare(nc, source, **options)
        writer = _core.Writer.create_preview(json.dumps(schema), json.dumps(writer_opts))
        wanted = [v for v in schema["variables"] if v["dtype"] != "string"]
        if variables is not None:
            missing = set(variables) - {v["name"] for v in wanted}
            if missing:
                raise InvalidArgumentError(f"no numeric variable(s) {', '.join(sorted(missing))} in '{source}'")
            wanted = [v for v in wanted if v["name"] in variables]
        first = writer.slab_records()
        for v in wanted:
            var = nc.variables[v["name"]]
            if var.size == 0:
                continue
            on_records = rec is not None and v["dims"][:1] == [rec]
            piece = writer.static_piece(v["name"])
            data = var[:first] if on_records else var[tuple(slice(0, n) for n in piece)] if piece else var[...]
            writer.preview(v["name"], le_bytes(data, v["dtype"]))
        planned = {v.name: v for v in writer.schema().variables}
    finally:
        nc.close()
    out = []
    for v in wanted:
        info = planned[v["name"]]
        out.append(
            PlannedVariable(
                name=info.name,
                dtype=info.dtype,
                shape=tuple(_schema_shape(schema, v)),
                chunks=None if info.chunk is None else tuple(info.chunk),
                subchunks=None if info.subchunk is None else tuple(info.subchunk),
                chain=info.chains[-1] if info.chains else None,
                plan=info.plan,
            )
        )
    return out


def _schema_shape(schema: dict, variable: dict) -> list[int]:
    """A schema variable's shape from the schema's dimension sizes."""
    sizes = {d["name"]: d["size"] for d in schema["dims"]}
    return [sizes[d] for d in variable["dims"]]


def append_file(
    source: str | os.PathLike,
    store: str | os.PathLike,
    *,
    recheck: bool = True,
    objective: str | None = None,
    allow_unordered: bool = False,
    retries: int = 3,
    progress: bool = False,
) -> ImportReport:
    """Appends the records of ``source`` along the store's record dimension, as a new version.
    The source must have the same record variables, with the same types and other dimensions.

    The record coordinate (the variable named after the record dimension) is checked: CF
    times in other units than the store's (``hours since ...`` against ``days since ...``)
    are converted to the store's units, or refused when they cannot be held exactly in its
    type or calendar; and the new records must come after the store's last one, in
    increasing order, unless ``allow_unordered`` (duplicate or earlier times refused).

    With ``recheck`` (the default) the analyzer scores the first new slab of every record
    variable (when it holds at least 16 KiB): if another chain is at least 10% better than
    the current one for the variable's recorded objective (or ``objective``, when given), new
    slabs use it (old slabs keep theirs).

    When another writer commits first, the append starts again on the new version (checks
    included), up to ``retries`` times, then raises :class:`ConflictError`; the files of a
    lost attempt are left for ``strata gc``."""
    source, store = os.fspath(source), os.fspath(store)
    t0 = time.perf_counter()
    nc = open_source(source)
    try:
        for attempt in range(retries + 1):
            try:
                version, records, raw = _append_once(nc, source, store, recheck, objective, allow_unordered, progress)
                break
            except ConflictError:
                if attempt == retries:
                    raise
    finally:
        nc.close()
    return _report(source, store, version, records, raw, time.perf_counter() - t0)


def _append_once(nc, source: str, store: str, recheck, objective, allow_unordered, progress) -> tuple[int, int, int]:
    """One attempt of :func:`append_file` on the store's newest version: (version, records, bytes)."""
    from .dataset import open as open_store

    ds = open_store(store)
    schema = ds.schema
    rec = schema.record_dim
    if rec is None:
        raise InvalidArgumentError(f"'{store}' has no record dimension to append along")
    if rec not in nc.dimensions:
        raise CompatibilityError(f"'{source}' has no dimension '{rec}' to append along")
    dims = {d.name: d.size for d in schema.dims}
    record_vars = [v for v in schema.variables if v.dims[:1] == [rec]]
    for v in record_vars:
        src = nc.variables.get(v.name)
        if src is None:
            raise CompatibilityError(f"'{source}' lacks record variable '{v.name}'")
        if list(src.dimensions) != v.dims:
            raise CompatibilityError(
                f"'{v.name}' has dims {src.dimensions} in '{source}', {tuple(v.dims)} in the store"
            )
        # The record coordinate is converted to the store's type and units where its values
        # allow (xarray writes times as int64 or float64, as they need): see _record_coordinate.
        converts = v.name == rec and v.dims == [rec] and src.dtype.kind in "iuf" and v.dtype != "char"
        if source_dtype(src) != v.dtype and not converts:
            raise CompatibilityError(f"'{v.name}' is {source_dtype(src)} in '{source}', {v.dtype} in the store")
        for d, n in zip(v.dims[1:], src.shape[1:], strict=True):
            if dims[d] != n:
                raise CompatibilityError(f"dimension '{d}' has length {n} in '{source}', {dims[d]} in the store")
    names = [v.name for v in record_vars]
    dtypes = {v.name: v.dtype for v in record_vars}
    sources = {n: (nc.variables[n], dtypes[n]) for n in names}
    if rec in sources:
        times = _record_coordinate(ds, rec, nc.variables[rec], source, allow_unordered)
        if times is not None:
            sources[rec] = (times, dtypes[rec])
    options = {"recheck": recheck}
    if objective is not None:
        options["request"] = {"kind": "auto", "objective": objective}
    writer = _core.Writer.open_append(store, json.dumps(options))
    raw = sum(int(np.prod(nc.variables[n].shape, dtype=np.int64)) * nc.variables[n].dtype.itemsize for n in names)
    with _progress(raw, f"append {os.path.basename(source)}", progress) as bar:
        records = write_record_slabs(writer, sources, len(nc.variables[names[0]]), bar) if names else 0
    version = writer.commit(f"append {os.path.basename(source)}")
    return version, records, raw


def _units(attrs: dict) -> str:
    return str(attrs.get("units", "")).strip()


# Calendars that name the same dates (the proleptic Gregorian one differs from the
# standard one only before 1582-10-15).
_SAME_CALENDAR = {
    "gregorian": "standard",
    "proleptic_gregorian": "standard",
    "365_day": "noleap",
    "366_day": "all_leap",
}


def _calendar(attrs: dict) -> str:
    name = str(attrs.get("calendar", "standard")).strip().lower()
    return _SAME_CALENDAR.get(name, name)


def _record_coordinate(ds, rec: str, src, source: str, allow_unordered: bool):
    """The source's record coordinate as the store (``ds``, its newest version) holds it:
    converted to the store's CF time units when they differ (None: nothing to convert);
    refuses records that do not come after the store's, unless allowed."""
    var = ds[rec]
    if var.dims != (rec,):
        return None
    theirs = {a: src.getncattr(a) for a in src.ncattrs()}
    ours = var.attrs
    values = np.asarray(src[...])
    converted = None
    if " since " in _units(ours) and (_units(ours), _calendar(ours)) != (_units(theirs), _calendar(theirs)):
        if " since " not in _units(theirs) or _calendar(ours) != _calendar(theirs):
            raise CompatibilityError(
                f"'{rec}' in '{source}' is in '{_units(theirs)}' ({_calendar(theirs)} calendar), the store in "
                f"'{_units(ours)}' ({_calendar(ours)} calendar): they cannot be converted"
            )
        import cftime

        cal = _calendar(ours)
        dates = cftime.num2date(values.astype("f8"), _units(theirs), calendar=cal)
        new = np.asarray(cftime.date2num(dates, _units(ours), calendar=cal), dtype="f8")
        cast = new.astype(var.dtype)
        if not np.array_equal(cast.astype("f8"), new):
            raise CompatibilityError(
                f"'{rec}' in '{source}' ('{_units(theirs)}') does not fall on whole values of the store's "
                f"'{_units(ours)}' ({var.dtype}): convert the file first"
            )
        converted = values = cast
    elif values.dtype != var.dtype:
        cast = values.astype(var.dtype)
        if not np.array_equal(cast.astype("f8"), values.astype("f8"), equal_nan=True):
            raise CompatibilityError(
                f"'{rec}' in '{source}' is {values.dtype}, in the store {var.dtype}: its values do not all fit "
                "(convert the file first)"
            )
        converted = values = cast
    if not allow_unordered and len(values):
        last = np.asarray(var[-1:]) if var.shape[0] else np.asarray([], dtype=values.dtype)
        order = np.concatenate([last.astype("f8"), values.astype("f8")])
        if not np.all(np.diff(order) > 0):
            first_bad = int(np.flatnonzero(np.diff(order) <= 0)[0])
            raise CompatibilityError(
                f"'{source}' has records at or before ones already in the store ({rec} = "
                f"{order[first_bad + 1]!r} after {order[first_bad]!r}, in the store's units): refusing duplicate "
                "or out-of-order records (allow_unordered=True, or --allow-unordered, to append anyway)"
            )
    return converted


def _report(source, store, version, records, raw, seconds) -> ImportReport:
    from .dataset import open as open_store

    ds = open_store(store, version)
    stats = ds.stats()
    rows = []
    for name, var in ds.variables.items():
        s = stats.get(name, {})
        rows.append(
            {
                "name": name,
                "dims": var.dims,
                "shape": var.shape,
                "dtype": var.dtype_name,
                "chunks": var.chunks,
                "subchunks": var.subchunks,
                "raw_bytes": s.get("raw_bytes", 0),
                "stored_bytes": s.get("stored_bytes", 0),
                "codec": var.chains[-1] if var.chains else "inline",
            }
        )
    return ImportReport(source, store, version, records, raw, seconds, rows)

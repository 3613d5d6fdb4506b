"""A dask-backed xarray Dataset written as a strata store by its own tasks: each task
computes a range of records and writes them as its own files (the subfiles placement); the
client gathers the tasks' segment tables and commits once."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from . import _core
from ._slabs import le_bytes
from .errors import InvalidArgumentError
from .writer import stream_schema, writer_options_of


def _write_range(path, schema_json, options_json, token, rank, first, arrays, statics) -> list[bytes]:
    """One task: records ``first..`` of every record variable (``arrays``), and the fixed
    variables when it holds the first range. Returns its tables (metadata only)."""
    part = _core.PartWriter(path, schema_json, options_json, token, "subfiles", "[]", rank, first)
    schema = json.loads(schema_json)
    dtypes = {v["name"]: v["dtype"] for v in schema["variables"]}
    for name, value in statics.items():
        part.put_static(name, le_bytes(np.asarray(value), dtypes[name]))
    for name, value in arrays.items():
        part.append(name, le_bytes(np.asarray(value), dtypes[name]))
    tables = []
    while (table := part.encode(True)) is not None:
        tables.append(bytes(table))
    return tables


def _encoded(ds):
    """The dataset with CF encoding applied (times as numbers with units), as netCDF gets it."""
    import xarray as xr

    variables, attrs = xr.conventions.cf_encoder(dict(ds.variables), dict(ds.attrs))
    return variables, attrs


def to_strata(
    ds, path: str | os.PathLike, *, record_dim: str | None = None, message: str = "to_strata", **options
) -> int:
    """Writes ``ds`` (an xarray Dataset, dask-backed or not) to a new store at ``path``.

    Each chunk of the record dimension (``record_dim``, default: the dataset's unlimited
    dimension or its first) becomes one task that computes its records and writes them as
    its own files, on whatever Dask scheduler is active (a ``distributed`` client, say);
    the client gathers the tasks' tables and commits once. Chunks along other dimensions are
    joined first. Layout and codec options are those of :class:`strata.Writer`. Returns the
    committed version.
    """
    import dask

    path = os.fspath(path)
    if record_dim is None:
        unlimited = ds.encoding.get("unlimited_dims") or ()
        record_dim = next(iter(unlimited), None) or next(iter(ds.dims), None)
    if record_dim not in ds.dims:
        raise InvalidArgumentError(f"'{record_dim}' is not a dimension of the dataset (dims: {list(ds.dims)})")
    variables, attrs = _encoded(ds)
    n = ds.sizes[record_dim]
    # Record chunks: the dataset's own along the record dimension (the first variable's).
    chunks = next((v.chunksizes for v in ds.variables.values() if v.chunks and record_dim in v.dims), None)
    lengths = [int(c) for c in chunks[record_dim]] if chunks else [n]
    starts = list(np.cumsum([0, *lengths[:-1]]))
    g = math.gcd(*[int(s) for s in starts[1:]]) if len(starts) > 1 else 0
    if options.get("slab_records") is None and g:
        options["slab_records"] = g
    elif options.get("slab_records") and g and g % options["slab_records"]:
        raise InvalidArgumentError(
            f"slab_records={options['slab_records']} must divide where the record chunks start ({starts})"
        )
    dims = {d: (None if d == record_dim else int(s)) for d, s in ds.sizes.items()}
    specs: dict[str, Any] = {}
    for name, var in variables.items():
        if var.dtype.kind in "OUS":
            raise InvalidArgumentError(f"'{name}' holds strings: write it with strata.write_arrays")
        if record_dim in var.dims and var.dims[0] != record_dim:
            var = var.transpose(record_dim, *[d for d in var.dims if d != record_dim])
            variables[name] = var
        specs[name] = (var.dtype, var.dims, dict(var.attrs))
    schema = stream_schema(dims, specs, attrs, records=n)
    opts = writer_options_of(**options)
    schema_json, options_json = json.dumps(schema), json.dumps(opts)
    coordinator = _core.Coordinator.create(path, schema_json, options_json, len(lengths), "subfiles")
    token = coordinator.token()
    record_vars = {k: v for k, v in variables.items() if v.dims and v.dims[0] == record_dim}
    statics = {k: v.data for k, v in variables.items() if k not in record_vars}
    tasks = []
    for rank, (start, length) in enumerate(zip(starts, lengths, strict=True)):
        block = {k: v.data[int(start) : int(start + length)] for k, v in record_vars.items()}
        mine = statics if rank == 0 else {}
        tasks.append(
            dask.delayed(_write_range, pure=False)(
                path, schema_json, options_json, token, rank, int(start), block, mine
            )
        )
    results = dask.compute(*tasks)
    coordinator.place([t for tables in results for t in tables])
    return coordinator.commit(message)


def register_accessor() -> None:
    """``ds.strata.to_store(path)`` on every xarray Dataset."""
    import xarray as xr

    if hasattr(xr.Dataset, "strata"):
        return

    @xr.register_dataset_accessor("strata")
    class _Accessor:
        def __init__(self, ds):
            self._ds = ds

        def to_store(self, path, **options) -> int:
            """Writes this dataset to a new strata store (see :func:`strata.to_strata`)."""
            return to_strata(self._ds, path, **options)

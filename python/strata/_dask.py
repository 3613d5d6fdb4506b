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
from ._slabs import le_bytes, write_static
from .errors import InvalidArgumentError
from .writer import stream_schema, writer_options_of


class _Deferred:
    """A variable without the record dimension, handed to the task that writes it without
    Dask computing it first (Dask computes the arrays among a task's arguments, so a large
    one was whole in memory, twice): the task reads it a block at a time
    (``_slabs.write_static``), each block computed there, synchronously."""

    def __init__(self, array):
        self.array = array
        self.shape = array.shape

    def __getitem__(self, box):
        part = self.array[box]
        compute = getattr(part, "compute", None)
        return np.asarray(compute(scheduler="sync") if compute is not None else part)


def _write_range(path, schema_json, options_json, token, rank, first, arrays, statics) -> list[bytes]:
    """One task: records ``first..`` of every record variable (``arrays``), and the fixed
    variables (each a ``_Deferred``) when it holds the first range. Returns its tables
    (metadata only)."""
    part = _core.PartWriter(path, schema_json, options_json, token, "subfiles", "[]", rank, first)
    schema = json.loads(schema_json)
    dtypes = {v["name"]: v["dtype"] for v in schema["variables"]}
    for name, value in statics.items():
        write_static(part, name, value, dtypes[name])
    for name, value in arrays.items():
        part.append(name, le_bytes(np.asarray(value), dtypes[name]))
    tables = []
    while (table := part.encode(True)) is not None:
        tables.append(bytes(table))
    return tables


def _encoded(ds):
    """The dataset with CF encoding applied (times as numbers with units), as netCDF gets it;
    strings as characters along one more dimension (its own name, such as WRF's
    ``DateStrLen``, else ``stringN``; ``_Encoding`` for text), as xarray writes them to a
    classic NetCDF file and reads them back."""
    import xarray as xr
    from xarray.coding import strings

    # Which variables are whose coordinates goes into their `coordinates` attributes first,
    # as a NetCDF backend does: without it, WRF's XLAT was a data variable when read back,
    # and no area query could find it.
    variables, attrs = xr.conventions.encode_dataset_coordinates(ds)
    variables, attrs = xr.conventions.cf_encoder(dict(variables), dict(attrs))
    for name, var in variables.items():
        if var.dtype.kind == "O":
            # Python strings (NetCDF-4's, or built in memory) as a fixed-width array first.
            values = np.asarray(var.values)
            kinds = {type(x) for x in values.flat}
            if not kinds or not kinds <= {str, bytes} or len(kinds) > 1:
                raise InvalidArgumentError(f"'{name}' holds Python objects that are not all text")
            var = xr.Variable(var.dims, values.astype(str if kinds == {str} else bytes), var.attrs, var.encoding)
            variables[name] = var
        if var.dtype.kind in "US":
            # In a dataset xarray decoded, bytes are strings (a char array's last dimension
            # joined), single bytes too: each gets its characters' dimension back.
            var = strings.EncodedStringCoder(allows_unicode=False).encode(var, name)
            variables[name] = strings.CharacterArrayCoder().encode(var, name)
    return variables, attrs


def _leading(variables, dim: str) -> list[str]:
    """The variables that have ``dim`` but not first."""
    return [n for n, v in variables.items() if dim in v.dims and v.dims[0] != dim]


def to_strata(
    ds, path: str | os.PathLike, *, record_dim: str | None = None, message: str = "to_strata", **options
) -> int:
    """Writes ``ds`` (an xarray Dataset, dask-backed or not) to a new store at ``path``.

    Each chunk of the record dimension becomes one task that computes its records and writes
    them as its own files, on whatever Dask scheduler is active (a ``distributed`` client,
    say); the client gathers the tasks' tables and commits once. Chunks along other
    dimensions are joined first. The record dimension is ``record_dim``, else the dataset's
    unlimited dimension, else its first dimension that comes first in every variable using
    it; without one, a single task writes the whole dataset. Variables keep their dimensions'
    order. Layout and codec options are those of :class:`strata.Writer`. Returns the
    committed version.
    """
    import dask

    path = os.fspath(path)
    variables, attrs = _encoded(ds)
    if record_dim is None:
        unlimited = list(ds.encoding.get("unlimited_dims") or ())
        record_dim = next((d for d in [*unlimited, *ds.dims] if not _leading(variables, d)), None)
    elif record_dim not in ds.dims:
        raise InvalidArgumentError(f"'{record_dim}' is not a dimension of the dataset (dims: {list(ds.dims)})")
    elif late := _leading(variables, record_dim):
        raise InvalidArgumentError(
            f"the record dimension '{record_dim}' must come first in every variable using it, not in {late[:5]}: "
            f"transpose them (ds.transpose('{record_dim}', ...)) or choose another record_dim"
        )
    n = ds.sizes[record_dim] if record_dim is not None else 0
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
        # The characters' own dimension, which encoding added.
        for d, size in zip(var.dims, var.shape, strict=True):
            dims.setdefault(d, int(size))
        specs[name] = (var.dtype, var.dims, dict(var.attrs))
    schema = stream_schema(dims, specs, attrs, records=n)
    opts = writer_options_of(**options)
    schema_json, options_json = json.dumps(schema), json.dumps(opts)
    coordinator = _core.Coordinator.create(path, schema_json, options_json, len(lengths), "subfiles")
    token = coordinator.token()
    record_vars = {k: v for k, v in variables.items() if record_dim is not None and v.dims[:1] == (record_dim,)}
    statics = {k: _Deferred(v.data) for k, v in variables.items() if k not in record_vars}
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

"""Writing NumPy arrays straight into a store (no NetCDF file in between)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _attrs, _core
from ._slabs import le_bytes, write_record_slabs, writer_options
from ._sources import strata_dtype
from .errors import InvalidArgumentError


def write_arrays(
    path: str | os.PathLike,
    variables: Mapping[str, tuple[tuple[str, ...], Any] | tuple[tuple[str, ...], Any, Mapping[str, Any]]],
    *,
    record_dim: str | None = None,
    attrs: Mapping[str, Any] | None = None,
    codec: str | None = None,
    objective: str = "balanced",
    error_bound: str | None = None,
    chunks: dict[str, int] | str | None = None,
    subchunks: dict[str, int] | str | None = None,
    slab_records: int | None = None,
    layout: str = "S",
    byte_groups: dict[str, list[int]] | None = None,
    bins: int | None = None,
    binning: str | None = None,
) -> int:
    """Creates a store from arrays: ``{"sst": (("time", "lat", "lon"), array, {"units": "degC"})}``.

    Variables whose first dimension is ``record_dim`` are cut into slabs along it; the rest
    are written whole. ``codec`` is a chain for every variable (default ``shuffle+zstd:3``)
    or ``"auto"``: the engine plans each variable as :func:`strata.import_file` does, for
    ``objective`` and ``error_bound``, so the same arrays get the same plans. ``layout`` and
    ``byte_groups`` are as for :func:`strata.import_file` (under level M, float byte-group
    segments get ``zstd:3`` unless a chain is given). Returns the committed version (1).
    """
    path = os.fspath(path)
    sizes: dict[str, int] = {}
    prepared = []
    for name, spec in variables.items():
        if len(spec) not in (2, 3):
            raise InvalidArgumentError(f"variable '{name}' must be (dims, array) or (dims, array, attrs)")
        dims, data = tuple(spec[0]), spec[1]
        var_attrs = dict(spec[2]) if len(spec) == 3 else {}
        arr = np.asarray(data)
        if arr.ndim != len(dims):
            raise InvalidArgumentError(f"variable '{name}' has {arr.ndim} dimensions but names {len(dims)}")
        for d, n in zip(dims, arr.shape, strict=True):
            if sizes.setdefault(d, n) != n:
                raise InvalidArgumentError(f"dimension '{d}' has length {sizes[d]} and {n}")
        prepared.append((name, dims, arr, var_attrs, strata_dtype(arr.dtype, name)))
    if record_dim is not None and record_dim not in sizes:
        raise InvalidArgumentError(f"record dimension '{record_dim}' is not used by any variable")
    schema = {
        "dims": [{"name": d, "size": n, "unlimited": d == record_dim} for d, n in sizes.items()],
        "record_dim": record_dim,
        "attrs": _attrs.encode_all(dict(attrs or {})),
        "variables": [
            {
                "name": name,
                "dtype": dtype,
                "dims": list(dims),
                "attrs": _attrs.encode_all(var_attrs),
                **({"inline_strings": [str(s) for s in arr.ravel()]} if dtype == "string" else {}),
            }
            for name, dims, arr, var_attrs, dtype in prepared
        ],
    }
    auto = codec == "auto"
    options = writer_options(
        None if auto else codec, chunks, subchunks, slab_records, layout, byte_groups, bins, binning
    )
    if auto:
        options["request"] = {"kind": "auto", "objective": objective, "error_bound": error_bound}
    elif error_bound is not None:
        raise InvalidArgumentError("error_bound needs codec='auto' (or give a lossy chain such as 'sz:abs=0.01')")
    writer = _core.Writer.create(path, json.dumps(schema), json.dumps(options))
    records = {n: (a, t) for n, d, a, _, t in prepared if record_dim is not None and d[:1] == (record_dim,)}
    for name, _, arr, _, dtype in prepared:
        if dtype != "string" and name not in records:
            writer.put_static(name, le_bytes(arr, dtype))
    if records:
        write_record_slabs(writer, records, sizes[record_dim])
    return writer.commit("write_arrays")

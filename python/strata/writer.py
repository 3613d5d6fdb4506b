"""Writing NumPy arrays straight into a store (no NetCDF file in between): whole arrays
(:func:`write_arrays`) or records as a simulation produces them (:class:`Writer`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _attrs, _core
from ._slabs import LAYOUT_ARGS, le_bytes, write_record_slabs, write_static, writer_options
from ._sources import strata_dtype
from .dataset import numpy_dtype
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
    shape_rule: str | None = None,
    slab_records: int | None = None,
    layout: str | None = None,
    byte_groups: dict[str, list[int]] | None = None,
    bins: int | None = None,
    binning: str | None = None,
    config: str | os.PathLike | None = None,
) -> int:
    """Creates a store from arrays: ``{"sst": (("time", "lat", "lon"), array, {"units": "degC"})}``.

    Variables whose first dimension is ``record_dim`` are cut into slabs along it; the rest
    are written whole. Python strings are stored as strings; fixed-width bytes (``|S19``, as
    xarray reads a char array) as characters along one more dimension, ``stringN``.

    ``codec`` is a chain for every variable (default ``shuffle+zstd:3``) or ``"auto"``: the
    engine plans each variable as :func:`strata.import_file` does, for ``objective`` and
    ``error_bound``, so the same arrays get the same plans. ``layout`` and
    ``byte_groups`` are as for :func:`strata.import_file` (under level M, float byte-group
    segments get ``zstd:3`` unless a chain is given). ``shape_rule`` cuts the automatic
    chunk and sub-chunk shapes: ``"auto"`` (the default), ``"cube"``, ``"proportional"`` or
    ``"slices"`` (see docs/writing.md). ``config`` is a layout file (see :class:`Writer`).
    Returns the committed version (1).
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
        if arr.dtype.kind == "S" and arr.dtype.itemsize > 1:
            # Fixed-width bytes (xarray's reading of a char array, such as WRF's Times) as the
            # characters along one more dimension, as xarray writes them and reads them back.
            width = arr.dtype.itemsize
            arr = np.ascontiguousarray(arr).view("S1").reshape(*arr.shape, width)
            dims = (*dims, f"string{width}")
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
    options = _options(
        codec=codec,
        objective=objective,
        error_bound=error_bound,
        config=config,
        chunks=chunks,
        subchunks=subchunks,
        shape_rule=shape_rule,
        slab_records=slab_records,
        layout=layout,
        byte_groups=byte_groups,
        bins=bins,
        binning=binning,
    )
    writer = _core.Writer.create(path, json.dumps(schema), json.dumps(options))
    records = {n: (a, t) for n, d, a, _, t in prepared if record_dim is not None and d[:1] == (record_dim,)}
    for name, _, arr, _, dtype in prepared:
        if dtype != "string" and name not in records:
            write_static(writer, name, arr, dtype)
    if records:
        write_record_slabs(writer, records, sizes[record_dim])
    return writer.commit("write_arrays")


def _options(*, codec=None, objective=None, error_bound=None, config=None, **layout) -> dict:
    """The Rust writer's options; what is None is left to a layout file, then to defaults."""
    options = writer_options(codec, objective=objective, error_bound=error_bound, **layout)
    if config is not None:
        options["config"] = os.fspath(config)
    return options


def stream_schema(dims: Mapping[str, int | None], variables: Mapping[str, Any], attrs=None, records=None) -> dict:
    """The Rust writer's schema for dims (``None``: the record dimension) and variables
    given as ``(dtype, dims[, attrs])``; shared by every writer that takes records."""
    record = [d for d, n in dims.items() if n is None]
    if len(record) > 1:
        raise InvalidArgumentError(f"only one dimension can be the record dimension (size None), not {record}")
    record_dim = record[0] if record else None
    specs = {name: _variable_spec(name, spec) for name, spec in variables.items()}
    for name, (dtype, vdims, _) in specs.items():
        if dtype == "string":
            raise InvalidArgumentError(f"'{name}' holds strings: strata.write_arrays stores string variables")
        for d in vdims:
            if d not in dims:
                raise InvalidArgumentError(f"variable '{name}' names dimension '{d}', which is not defined")
        if record_dim in vdims[1:]:
            raise InvalidArgumentError(f"variable '{name}': the record dimension '{record_dim}' must come first")
    if records is not None and records < 0:
        raise InvalidArgumentError("records must be at least 0")
    return {
        "dims": [
            {"name": d, "size": int(records or 0) if n is None else int(n), "unlimited": n is None}
            for d, n in dims.items()
        ],
        "record_dim": record_dim,
        "attrs": _attrs.encode_all(dict(attrs or {})),
        "variables": [
            {"name": name, "dtype": dtype, "dims": list(vdims), "attrs": _attrs.encode_all(vattrs)}
            for name, (dtype, vdims, vattrs) in specs.items()
        ],
    }


def writer_options_of(**kw) -> dict:
    """The Rust writer's options from :class:`Writer`'s keyword arguments."""
    named = ("codec", "objective", "error_bound", "config", *LAYOUT_ARGS)
    return _options(**{k: kw.get(k) for k in named})


def cast_values(name: str, dtype: str, value) -> np.ndarray:
    """``value`` as variable ``name``'s stored type ``dtype``; refused when it would not fit."""
    arr = np.asarray(value)
    target = numpy_dtype(dtype)
    if arr.dtype != target and not np.can_cast(arr.dtype, target, "same_kind"):
        raise InvalidArgumentError(f"'{name}' is {dtype}; values of type {arr.dtype} would not fit")
    return arr.astype(target, copy=False)


def as_records(name: str, dims, record_dim, arr: np.ndarray, inner: tuple, write_call: str, refusal) -> np.ndarray:
    """One record (the shape ``inner``) or a block of them (record axis first) of variable
    ``name`` on ``dims``, as a block; ``refusal(inner, shape)`` says why any other shape is
    refused."""
    if not dims or dims[0] != record_dim:
        raise InvalidArgumentError(f"'{name}' has no record dimension: write it with {write_call}")
    if arr.shape == inner:
        arr = arr[np.newaxis]
    if arr.shape[1:] != inner:
        raise InvalidArgumentError(refusal(inner, arr.shape))
    return arr


def _variable_spec(name: str, spec) -> tuple[str, tuple[str, ...], dict]:
    """``(dtype, dims)``, ``(dtype, dims, attrs)`` or ``{"dtype", "dims", "attrs"}``."""
    if isinstance(spec, Mapping):
        dtype, dims, attrs = spec.get("dtype"), spec.get("dims"), spec.get("attrs", {})
    elif isinstance(spec, tuple | list) and len(spec) in (2, 3):
        dtype, dims, attrs = spec[0], spec[1], (spec[2] if len(spec) == 3 else {})
    else:
        raise InvalidArgumentError(f"variable '{name}' must be (dtype, dims) or (dtype, dims, attrs)")
    if dtype is None or dims is None:
        raise InvalidArgumentError(f"variable '{name}' needs a dtype and dims")
    if isinstance(dims, str):
        dims = (dims,)
    return strata_dtype(np.dtype(dtype), name), tuple(dims), dict(attrs or {})


class Writer:
    """Writes a store as a simulation produces it: define the dimensions and variables,
    :meth:`append` time steps (or blocks of them) as they come, :meth:`commit`.

    >>> import numpy as np, strata
    >>> w = strata.Writer.create(
    ...     "run.strata",
    ...     dims={"time": None, "lat": 90, "lon": 180},
    ...     variables={"time": ("f8", "time", {"units": "days since 2000-01-01"}),
    ...                "lat": ("f4", "lat"), "lon": ("f4", "lon"),
    ...                "sst": ("f4", ("time", "lat", "lon"), {"units": "degC"})},
    ...     codec="auto")                                    # doctest: +SKIP
    >>> w.write("lat", np.linspace(-89, 89, 90)); w.write("lon", np.arange(180) * 2.0)  # doctest: +SKIP
    >>> for t in range(365):                               # doctest: +SKIP
    ...     w.append(time=t, sst=model_step(t))
    >>> w.commit()                                         # doctest: +SKIP

    Slabs are laid out (``layout``: value bins, byte groups, Hilbert order) and compressed
    in memory as they fill, and written once, on the writer's own thread while your program
    goes on to the next steps (``overlap=False`` writes them in the calling thread): memory
    holds about three slabs per variable.
    Nothing is visible to readers until :meth:`commit`; a writer that dies leaves the last
    committed version as it was (``strata gc`` removes what it wrote). As a context manager
    it commits when the block ends normally and commits nothing when it raises.

    A dimension of size ``None`` is the record dimension (at most one). ``records`` is how
    many records you expect (it helps to choose chunk shapes; it is not a limit). Layout
    and codec options are those of :func:`strata.import_file`; any left unset come from the
    layout file ``config`` or the one ``STRATA_CONFIG`` names (docs/writing.md).
    """

    def __init__(self, core, message: str, overlap: bool = True):
        self._w = core
        core.set_overlap(overlap)
        self._message = message
        schema = core.schema()
        self._record_dim = schema.record_dim
        self._vars = {v.name: v for v in schema.variables}
        self._sizes = {d.name: d.size for d in schema.dims}
        self._committed: int | None = None

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        dims: Mapping[str, int | None],
        variables: Mapping[str, Any],
        *,
        attrs: Mapping[str, Any] | None = None,
        records: int | None = None,
        codec: str | None = None,
        objective: str | None = None,
        error_bound: str | None = None,
        chunks: dict[str, int] | str | None = None,
        subchunks: dict[str, int] | str | None = None,
        shape_rule: str | None = None,
        slab_records: int | None = None,
        layout: str | None = None,
        byte_groups: dict[str, list[int]] | None = None,
        bins: int | None = None,
        binning: str | None = None,
        config: str | os.PathLike | None = None,
        overlap: bool = True,
        message: str = "Writer",
    ) -> Writer:
        schema = stream_schema(dims, variables, attrs, records)
        options = _options(
            codec=codec,
            objective=objective,
            error_bound=error_bound,
            config=config,
            chunks=chunks,
            subchunks=subchunks,
            shape_rule=shape_rule,
            slab_records=slab_records,
            layout=layout,
            byte_groups=byte_groups,
            bins=bins,
            binning=binning,
        )
        return cls(_core.Writer.create(os.fspath(path), json.dumps(schema), json.dumps(options)), message, overlap)

    @classmethod
    def append_to(
        cls, path: str | os.PathLike, *, recheck: bool = True, overlap: bool = True, message: str = "Writer.append_to"
    ) -> Writer:
        """New records after the newest version of an existing store (same variables). With
        ``recheck`` (the default, as :func:`strata.append_file`) each planned variable's
        chain is scored again on the first new slab, and new slabs switch to a clearly better
        one (old slabs keep theirs)."""
        return cls(_core.Writer.open_append(os.fspath(path), json.dumps({"recheck": recheck})), message, overlap)

    @property
    def record_count(self) -> int:
        """Records appended so far, including those of earlier versions."""
        return self._w.record_count()

    def _dtype(self, name: str) -> str:
        if name not in self._vars:
            raise InvalidArgumentError(f"no variable '{name}' (variables: {', '.join(self._vars)})")
        return self._vars[name].dtype

    def _cast(self, name: str, value) -> np.ndarray:
        return cast_values(name, self._dtype(name), value)

    def write(self, name: str, value) -> None:
        """A variable without the record dimension, whole."""
        arr = self._cast(name, value)
        var = self._vars[name]
        shape = tuple(self._sizes[d] for d in var.dims)
        if arr.shape != shape:
            raise InvalidArgumentError(f"'{name}' has shape {shape}, got {arr.shape}")
        # Block by block when large: a block's bytes converted at a time, not a copy of all.
        write_static(self._w, name, arr, var.dtype)

    def append(self, arrays: Mapping[str, Any] | None = None, /, **more) -> None:
        """One record (an array without the record axis) or several (with it, first) of each
        record variable: ``w.append(time=t, sst=field)``. Each record variable must get the
        same number of records before :meth:`commit`."""
        for name, value in {**(arrays or {}), **more}.items():
            arr = self._cast(name, value)
            var = self._vars[name]
            inner = tuple(self._sizes[d] for d in var.dims[1:])
            arr = as_records(
                name,
                var.dims,
                self._record_dim,
                arr,
                inner,
                "Writer.write",
                lambda inner, got, name=name: (
                    f"'{name}' takes records of shape {inner} (or blocks of shape (n, *{inner})); got {got}"
                ),
            )
            self._w.append(name, le_bytes(arr, var.dtype))

    def set_attrs(self, name: str | None = None, /, **attrs) -> None:
        """Attributes of the store (``name`` None) or of a variable, set or replaced."""
        if name is not None:
            self._dtype(name)
        self._w.set_attributes(name, json.dumps(_attrs.encode_all(attrs)))

    def commit(self, message: str | None = None) -> int:
        """Writes what waits and publishes a new version; returns its number."""
        self._committed = self._w.commit(message or self._message)
        return self._committed

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None and self._committed is None:
            self.commit()

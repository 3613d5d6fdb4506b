"""Reading stores: :func:`open`, :class:`Dataset` and :class:`Variable`."""

from __future__ import annotations

import json
import math
import os
from functools import cached_property
from typing import Any

import numpy as np

from . import _core
from ._coords import coordinate_index, label_to_positions
from .errors import InvalidArgumentError, NotFoundError

_NUMPY_DTYPES = {
    "i8": "<i1",
    "u8": "<u1",
    "i16": "<i2",
    "u16": "<u2",
    "i32": "<i4",
    "u32": "<u4",
    "i64": "<i8",
    "u64": "<u8",
    "f32": "<f4",
    "f64": "<f8",
    "char": "S1",
    "string": "O",
}


def is_store(path) -> bool:
    """Whether ``path`` is a strata store directory with a committed version: a ``HEAD``,
    or the first version's manifest (a first commit stopped before its ``HEAD``; the
    manifest is the commit)."""
    try:
        path = os.fspath(path)
    except TypeError:
        return False
    return os.path.isfile(os.path.join(path, "HEAD")) or os.path.isfile(
        os.path.join(path, "manifests", "v00000001.json")
    )


def numpy_dtype(name: str) -> np.dtype:
    return np.dtype(_NUMPY_DTYPES[name])


def open(path: str | os.PathLike, version: int | None = None, *, cache_bytes: int | None = None) -> Dataset:
    """Opens a store at its newest version, or at ``version`` (time travel).

    Decoded sub-chunks are kept in an LRU cache of ``cache_bytes`` (default 64 MiB; 0 turns
    it off) so repeated and overlapping reads skip I/O and decompression."""
    return Dataset(os.fspath(path), version, cache_bytes=cache_bytes)


def check_version(version: int | None) -> None:
    """Refuses what cannot name a store version (None names the newest)."""
    if version is None:
        return
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidArgumentError(f"a store version is a positive integer, not {version!r} (see `strata log`)")
    if version >= 1 << 64:
        raise NotFoundError(f"no version {version} (see `strata log`)")


def check_cache_bytes(cache_bytes: int | None) -> None:
    """Refuses a decoded-cache size that is not a byte count (None is the default size)."""
    if cache_bytes is None:
        return
    if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or not 0 <= cache_bytes < 1 << 64:
        raise InvalidArgumentError(f"cache_bytes is a number of bytes, 0 (no cache) or more, not {cache_bytes!r}")


class Dataset:
    """One version of a store: dimensions, coordinates, variables and attributes."""

    def __init__(self, path: str, version: int | None = None, *, cache_bytes: int | None = None):
        check_version(version)
        check_cache_bytes(cache_bytes)
        self.path = path
        self._reader = _core.Reader.open(path, version, cache_bytes)
        self._schema = self._reader.schema()
        self._indexes: dict[str, Any] = {}

    @property
    def version(self) -> int:
        return self._schema.version

    @cached_property
    def manifest(self) -> dict:
        """The manifest of this version, as stored (see docs/format.md)."""
        return json.loads(self._reader.manifest_json())

    @property
    def schema(self) -> _core.Schema:
        """This version's dimensions, attributes, variables and layout as typed objects."""
        return self._schema

    @cached_property
    def dims(self) -> dict[str, int]:
        return {d.name: d.size for d in self._schema.dims}

    @cached_property
    def unlimited_dims(self) -> list[str]:
        return [d.name for d in self._schema.dims if d.unlimited]

    @property
    def record_dim(self) -> str | None:
        return self._schema.record_dim

    @cached_property
    def attrs(self) -> dict[str, Any]:
        return {a.name: a.value for a in self._schema.attrs}

    @cached_property
    def variables(self) -> dict[str, Variable]:
        return {v.name: Variable(self, v) for v in self._schema.variables}

    @property
    def coords(self) -> dict[str, Variable]:
        """1-D variables named after their dimension (NetCDF coordinate variables)."""
        return {n: v for n, v in self.variables.items() if v.dims == (n,)}

    @property
    def data_vars(self) -> dict[str, Variable]:
        return {n: v for n, v in self.variables.items() if n not in self.coords}

    def __getitem__(self, name: str) -> Variable:
        try:
            return self.variables[name]
        except KeyError:
            raise InvalidArgumentError(f"no variable '{name}' (variables: {', '.join(self.variables)})") from None

    def __contains__(self, name: str) -> bool:
        return name in self.variables

    def __iter__(self):
        return iter(self.variables)

    def __repr__(self) -> str:
        dims = ", ".join(f"{k}: {v}" for k, v in self.dims.items())
        return f"<strata.Dataset '{self.path}' v{self.version} ({dims}) variables: {', '.join(self.variables)}>"

    def stats(self) -> dict[str, dict]:
        """Per variable: raw and stored bytes, segments, non-NaN count, min and max (from the index)."""
        return {
            s.name: {
                "name": s.name,
                "raw_bytes": s.raw_bytes,
                "stored_bytes": s.stored_bytes,
                "segments": s.segments,
                "count": s.count,
                "min": s.min,
                "max": s.max,
            }
            for s in self._reader.variable_stats()
        }

    def read_stats(self) -> dict[str, int]:
        """What this dataset has read so far: range requests, bytes, segments decoded, index
        files loaded, and segments served from the decoded-segment cache."""
        keys = ("requests", "bytes_read", "segments_decoded", "index_loads", "cache_hits")
        return dict(zip(keys, self._reader.read_stats(), strict=True))

    def coordinate_index(self, dim: str, decode_times: bool = True):
        """The pandas index of the 1-D coordinate of ``dim`` (decoded CF time for time axes)."""
        key = (dim, decode_times)
        if key not in self._indexes:
            coord = self.coords.get(dim)
            if coord is None:
                raise InvalidArgumentError(f"dimension '{dim}' has no 1-D coordinate variable to select by label")
            self._indexes[key] = coordinate_index(coord.values, coord.attrs, decode_times)
        return self._indexes[key]

    def label_index(self, dim: str) -> _core.LabelIndex:
        """The engine's index of the 1-D coordinate of ``dim``: it picks the positions of
        labels (``sel``)."""
        key = ("labels", dim)
        if key not in self._indexes:
            self._indexes[key] = _core.LabelIndex.read(self._reader, dim)
        return self._indexes[key]

    def query(
        self,
        where: str,
        *,
        isel: dict | None = None,
        sel: dict | None = None,
        variables: list[str] | None = None,
        output: str = "points",
        precision: int | None = None,
        max_rel_error: float | None = None,
        with_stats: bool = False,
        method: str = "auto",
        raw: bool = False,
    ):
        """Where the constraint ``where`` (``"sst > 28"``, ``"t >= 25 and (s < 30 or s > 35)"``)
        holds inside a region (``isel`` by position, ``sel`` by coordinate label, per dimension).
        ``sel`` also takes auxiliary coordinates, such as the 2-D ``lat``/``lon`` of a curvilinear
        grid, with a range of values (``{"lat": (60, None), "lon": (300, 60)}``, both ends
        included; a longitude range is an arc from its first end eastward, in either convention,
        so it may cross the dateline): they select through a mask (see docs/query.md).

        ``output``:

        - ``"count"``: the number of points (from the index alone where bins are covered);
        - ``"positions"``: a tuple of index arrays, one per dimension, as ``np.nonzero`` gives;
        - ``"points"``: a pandas DataFrame with one row per point: the dimensions' coordinates
          and the values of ``variables`` (default: the constraint's variables);
        - ``"dense"``: the region of the first of ``variables``, NaN (floats) or masked
          (integers) where the constraint fails.

        ``precision``/``max_rel_error`` read the returned values at reduced precision (layout
        level M); the selection itself is always exact. With ``with_stats`` returns
        ``(result, stats)``, stats counting segments answered from the index (``full``),
        skipped (``empty``) and read (``boundary``), sub-chunks scanned (``scanned``), the
        methods used, and the estimated and observed seconds.

        ``method``: ``"auto"`` lets the cost model choose per slab between the index and a
        scan (see :mod:`strata.planner`); ``"index"`` or ``"scan"`` force one. The result is
        the same either way.

        A constraint on a packed variable (``scale_factor``/``add_offset``), or on integers
        flagged ``_Unsigned``, compares its physical values, as xarray shows them (stored
        int8 -39 flagged unsigned is 217); ``raw=True`` compares the stored integers. The
        values returned are the stored ones either way (as ``ds[name][...]`` gives them)."""
        from .query import run_query

        return run_query(
            self,
            where,
            isel=isel,
            sel=sel,
            variables=variables,
            output=output,
            precision=precision,
            max_rel_error=max_rel_error,
            with_stats=with_stats,
            method=method,
            raw=raw,
        )

    def query_batches(
        self,
        where: str,
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
        """:meth:`query`, streamed: an iterator of results, one per run of sub-chunks along
        the first dimension (at least ``records`` records; default one sub-chunk, and where
        one index of it is itself large, such as an ensemble member stored without a record
        dimension, runs of sub-chunks along the next dimensions), in order. The
        next piece is read and decoded on a worker thread while you handle the current one,
        so memory holds at most two pieces and a result larger than memory can be written out
        piece by piece; closing the iterator (or leaving a loop) cancels the rest.

        ``output`` is ``"points"`` (DataFrames), ``"positions"`` (index tuples) or
        ``"count"`` (ints, to sum). Each piece is planned on its own.

        >>> total = sum(ds.query_batches("sst > 28", output="count"))  # doctest: +SKIP
        >>> for frame in ds.query_batches("sst > 28"):  # doctest: +SKIP
        ...     frame.to_csv("hot.csv", mode="a", header=False, index=False)"""
        from .query import iter_query

        return iter_query(
            self,
            where,
            isel=isel,
            sel=sel,
            variables=variables,
            output=output,
            precision=precision,
            max_rel_error=max_rel_error,
            method=method,
            records=records,
            raw=raw,
        )

    def to_xarray(self, **kwargs):
        """This version as an ``xarray.Dataset`` with lazy, indexed reads (CF decoding applied)."""
        import xarray as xr

        return xr.open_dataset(self.path, engine="strata", version=self.version, **kwargs)


class Variable:
    """A stored variable. Index it like a NumPy array; nothing is read until you do."""

    def __init__(self, dataset: Dataset, meta: _core.VariableInfo):
        self._ds = dataset
        self._meta = meta
        self.name: str = meta.name
        self.dims: tuple[str, ...] = tuple(meta.dims)
        self.dtype: np.dtype = numpy_dtype(meta.dtype)
        #: The stored type name (``f32``, ``i16``, ``char``, ``string``, ...).
        self.dtype_name: str = meta.dtype
        #: Precision level this view reads (byte groups), None for full precision.
        self.level: int | None = None

    @cached_property
    def precision_levels(self) -> list[tuple[int, int, float]]:
        """For a float variable split into byte groups (layout level M): ``(level, bytes kept,
        worst relative error)`` per level; empty otherwise."""
        return [tuple(x) for x in self._ds._reader.precision_levels(self.name)]

    def at_precision(self, level: int | None = None, *, max_rel_error: float | None = None) -> Variable:
        """A view of this variable that reads only the first ``level`` byte groups, or the
        fewest groups whose worst relative error is at most ``max_rel_error``. Missing bytes
        are filled to the middle of the possible interval; zeros, infinities and quiet NaNs
        are kept. Variables without level M are read at full precision."""
        if (level is None) == (max_rel_error is None):
            raise InvalidArgumentError("give exactly one of level and max_rel_error")
        levels = self.precision_levels
        if max_rel_error is not None:
            if not max_rel_error >= 0:
                raise InvalidArgumentError(f"max_rel_error must be >= 0, got {max_rel_error}")
            level = next((k for k, _, err in levels if err <= max_rel_error), None)
        elif not isinstance(level, int | np.integer) or level < 1:
            raise InvalidArgumentError(f"precision level must be an integer >= 1, got {level!r}")
        view = Variable(self._ds, self._meta)
        view.level = None if level is None or not levels or level >= len(levels) else int(level)
        return view

    @property
    def max_rel_error(self) -> float:
        """The worst relative error of reads through this view (0.0 at full precision)."""
        if self.level is None:
            return 0.0
        return self.precision_levels[self.level - 1][2]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._ds.dims[d] for d in self.dims)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def attrs(self) -> dict[str, Any]:
        return {a.name: a.value for a in self._meta.attrs}

    @property
    def chunks(self) -> tuple[int, ...] | None:
        c = self._meta.chunk
        return tuple(c) if c is not None else None

    @property
    def subchunks(self) -> tuple[int, ...] | None:
        c = self._meta.subchunk
        return tuple(c) if c is not None else None

    @property
    def codecs(self) -> list:
        """Every codec chain the variable's segments use, as the manifest stores them."""
        return self._meta.codecs

    @property
    def chains(self) -> list[str]:
        """The same chains in their short form (``shuffle+zstd:3``)."""
        return self._meta.chains

    @property
    def plan(self) -> dict | None:
        """The analyzer's record for this variable (objective, chosen chain, sample scores,
        error bound if lossy codecs were allowed), or None when no plan was made."""
        return self._meta.plan

    @property
    def values(self) -> np.ndarray:
        return self[...]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d variable")
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        arr = self.values
        return arr.astype(dtype) if dtype is not None else arr

    def __repr__(self) -> str:
        dims = ", ".join(f"{d}: {n}" for d, n in zip(self.dims, self.shape, strict=True))
        return f"<strata.Variable '{self.name}' ({dims}) {self.dtype_name}>"

    # -- reading ---------------------------------------------------------------------------

    def read_box(self, starts, stops, steps) -> np.ndarray:
        """Reads ``[start:stop:step]`` along every dimension (non-negative, step >= 1)."""
        shape = tuple(max(0, -(-(b - a) // s)) for a, b, s in zip(starts, stops, steps, strict=True))
        if self.dtype == np.dtype("O"):
            full = np.array(self._meta.inline_strings or [], dtype=object).reshape(self.shape)
            return full[tuple(slice(a, b, s) for a, b, s in zip(starts, stops, steps, strict=True))]
        # math.prod: NumPy's reduction over a few Python ints costs more than a small read.
        out = np.empty(math.prod(shape) * self.dtype.itemsize, dtype=np.uint8)
        self._ds._reader.read_into(self.name, list(starts), list(stops), list(steps), out, self.level)
        arr = out.view(self.dtype).reshape(shape)
        return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))

    def __getitem__(self, key) -> np.ndarray:
        """NumPy basic indexing (ints, slices with any step, ``...``) plus 1-D integer arrays
        per axis (outer indexing, as xarray and netCDF4 do). Returns exactly the stored values;
        an integer for every axis gives a NumPy scalar, as NumPy does."""
        full = _expand_key(key, self.ndim)
        arr = self._read_outer(full)
        if self.ndim and all(not isinstance(k, slice | np.ndarray | list) for k in full):
            return arr[()]
        return arr

    def _read_outer(self, key: tuple) -> np.ndarray:
        starts, stops, steps, post, squeeze = [], [], [], [], []
        for axis, (k, n) in enumerate(zip(key, self.shape, strict=True)):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step < 0:
                    # Read the same elements forwards, then reverse.
                    count = len(range(start, stop, step))
                    last = start + (count - 1) * step if count else 0
                    starts.append(last if count else 0)
                    stops.append(start + 1 if count else 0)
                    steps.append(-step)
                    post.append(slice(None, None, -1))
                else:
                    starts.append(start)
                    stops.append(max(start, stop))
                    steps.append(step)
                    post.append(slice(None))
            elif isinstance(k, np.ndarray | list):
                idx = np.asarray(k)
                if idx.dtype == bool:
                    if idx.shape != (n,):
                        raise IndexError(f"boolean index for axis {axis} must have length {n}")
                    idx = np.flatnonzero(idx)
                if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
                    raise IndexError("only 1-D integer or boolean arrays can index an axis")
                idx = np.where(idx < 0, idx + n, idx).astype(np.int64)
                if idx.size and (idx.min() < 0 or idx.max() >= n):
                    raise IndexError(f"index out of range for axis {axis} of length {n}")
                lo = int(idx.min()) if idx.size else 0
                hi = int(idx.max()) + 1 if idx.size else 0
                starts.append(lo)
                stops.append(hi)
                steps.append(1)
                post.append(idx - lo)
            else:
                i = int(k)
                if i < -n or i >= n:
                    raise IndexError(f"index {i} is out of range for axis {axis} ('{self.dims[axis]}') of length {n}")
                i %= n
                starts.append(i)
                stops.append(i + 1)
                steps.append(1)
                post.append(slice(None))
                squeeze.append(axis)
        arr = self.read_box(starts, stops, steps)
        for axis, p in enumerate(post):
            if isinstance(p, np.ndarray):
                arr = np.take(arr, p, axis=axis)
            elif p.step == -1:
                arr = np.flip(arr, axis=axis)
        if squeeze:
            arr = arr.reshape([s for a, s in enumerate(arr.shape) if a not in squeeze])
        return arr

    def isel(self, **indexers) -> np.ndarray:
        """Selection by position per dimension name: ``v.isel(time=0, lat=slice(10, 20))``."""
        key = [slice(None)] * self.ndim
        for dim, k in indexers.items():
            if dim not in self.dims:
                raise InvalidArgumentError(f"'{self.name}' has no dimension '{dim}' (dims: {self.dims})")
            key[self.dims.index(dim)] = k
        return self[tuple(key)]

    def sel(self, method: str | None = None, **indexers) -> np.ndarray:
        """Selection by coordinate value: ``v.sel(lat=slice(-10, 10), time=slice("2000-01", "2000-06"))``.
        Label slices include both ends; date strings may be partial. Scalars must match
        exactly unless ``method`` is "nearest", "pad" or "backfill"."""
        positions = {}
        for dim, label in indexers.items():
            if dim not in self.dims:
                raise InvalidArgumentError(f"'{self.name}' has no dimension '{dim}' (dims: {self.dims})")
            positions[dim] = label_to_positions(self._ds.label_index(dim), label, dim, method)
        return self.isel(**positions)


def _expand_key(key, ndim: int) -> tuple:
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is None for k in key):
        raise IndexError("np.newaxis is not supported; reshape the result instead")
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_ellipsis:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = ndim - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1 :]
    if len(key) > ndim:
        raise IndexError(f"too many indices: {len(key)} for {ndim} dimensions")
    return key + (slice(None),) * (ndim - len(key))

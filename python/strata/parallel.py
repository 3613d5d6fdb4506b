"""Several writers make one store at once: threads, MPI ranks or Dask tasks each compress
their own block, and one commit gathers their segment tables (offsets, never data).

Each writer holds a **block**: ``{"lat": (0, 90), "lon": (0, 180)}`` (dimensions not named
are whole; every writer writes every record of its block) — or, with
``placement="subfiles"``, a range of records ``{"time": (0, 120)}`` over the whole domain.
Blocks meet at chunk boundaries: chunks are cut to fit them.

Placements (docs/writing.md compares them):

- ``"dense"``: one data file per slab, in the store's global layout order; each slab's
  offsets are exchanged before anyone writes (PnetCDF's dense layout).
- ``"hybrid"``: one data file per slab; each writer writes at once into a slot reserved
  from the expected compressed fraction plus padding; what does not fit goes after the slots.
- ``"subfiles"``: each writer writes its own files for its own records; nothing is exchanged
  until the commit.

Threads::

    def work(w, rank):
        for t in range(steps):
            w.append(temp=model_block(rank, t))

    strata.parallel.write_threads("run.strata", dims, variables, blocks, work)

MPI (run with ``mpirun -n 4 python -m mpi4py program.py``, so that a failing rank stops all)::

    w = strata.parallel.ParallelWriter(MPI.COMM_WORLD, "run.strata", dims, variables, blocks[rank])
    for t in range(steps):
        w.append(temp=model_block(rank, t))
    w.commit()
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _core
from ._slabs import le_bytes
from .errors import InvalidArgumentError, StrataError
from .writer import as_records, cast_values, stream_schema, writer_options_of

PLACEMENTS = ("dense", "hybrid", "subfiles")


class ParallelWriteError(StrataError):
    """Another writer of the same parallel write failed: nothing was committed."""


class _ThreadGroup:
    """What threads of one process exchange: a barrier and a slot per writer."""

    def __init__(self, size: int):
        self.size = size
        self.barrier = threading.Barrier(size)
        self.slots: list[Any] = [None] * size
        self.out: Any = None

    def wait(self) -> None:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            raise ParallelWriteError("another writer of this parallel write failed; nothing was committed") from None


class ThreadComm:
    """One thread's end of a :class:`_ThreadGroup`, with the calls of an MPI communicator
    that the parallel writer uses (``gather``, ``scatter``, ``bcast``, ``allgather``)."""

    def __init__(self, group: _ThreadGroup, rank: int):
        self._g, self.rank, self.size = group, rank, group.size

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def gather(self, obj, root: int = 0):
        g = self._g
        g.slots[self.rank] = obj
        g.wait()
        out = list(g.slots) if self.rank == root else None
        g.wait()
        return out

    def allgather(self, obj):
        g = self._g
        g.slots[self.rank] = obj
        g.wait()
        out = list(g.slots)
        g.wait()
        return out

    def scatter(self, objs, root: int = 0):
        g = self._g
        if self.rank == root:
            g.out = list(objs)
        g.wait()
        mine = g.out[self.rank]
        g.wait()
        return mine

    def bcast(self, obj, root: int = 0):
        g = self._g
        if self.rank == root:
            g.out = obj
        g.wait()
        out = g.out
        g.wait()
        return out

    def abort(self) -> None:
        self._g.barrier.abort()


def _raise_if(errors: Sequence[str | None]) -> None:
    failed = [(i, e) for i, e in enumerate(errors) if e]
    if failed:
        rank, why = failed[0]
        raise ParallelWriteError(f"writer {rank} failed: {why}; nothing was committed")


def _decomposition(blocks: Sequence[Mapping[str, tuple[int, int]]], sizes: Mapping[str, int]) -> dict[str, list]:
    """Where the blocks meet, per dimension: the cut points inside it."""
    cuts: dict[str, set[int]] = {}
    for block in blocks:
        for dim, (start, stop) in block.items():
            points = cuts.setdefault(dim, set())
            points.update(p for p in (int(start), int(stop)) if 0 < p < sizes[dim])
    return {d: sorted(p) for d, p in cuts.items() if p}


class ParallelWriter:
    """This writer's part of a store written by ``comm.Get_size()`` writers at once.

    ``comm`` is an ``mpi4py`` communicator (or the :class:`ThreadComm` that
    :func:`write_threads` makes); every writer constructs its own with the same ``dims``,
    ``variables`` and options and its own ``block``. Rank 0 also gathers the tables and
    commits. Layout and codec options are those of :class:`strata.Writer`.
    """

    def __init__(
        self,
        comm,
        path: str | os.PathLike,
        dims: Mapping[str, int | None],
        variables: Mapping[str, Any],
        block: Mapping[str, tuple[int, int]],
        *,
        placement: str = "dense",
        attrs: Mapping[str, Any] | None = None,
        records: int | None = None,
        fraction: float | None = None,
        padding: float | None = None,
        message: str = "parallel write",
        **options,
    ):
        if placement not in PLACEMENTS:
            raise InvalidArgumentError(f"unknown placement '{placement}' (placements: {', '.join(PLACEMENTS)})")
        self._comm, self._placement, self._message = comm, placement, message
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._path = os.fspath(path)
        schema = stream_schema(dims, variables, attrs, records)
        self._record_dim = schema["record_dim"]
        sizes = {d["name"]: d["size"] for d in schema["dims"]}
        self._vars = {v["name"]: v for v in schema["variables"]}
        self._block = {str(d): (int(a), int(b)) for d, (a, b) in block.items()}
        blocks = comm.allgather(self._block)
        first_record = 0
        if placement == "subfiles":
            for b in blocks:
                if set(b) != {self._record_dim}:
                    raise InvalidArgumentError(
                        f"subfile writers hold ranges of the record dimension: {{'{self._record_dim}': (start, stop)}}"
                    )
            first_record = self._block[self._record_dim][0]
            self._limit = self._block[self._record_dim][1] - first_record
            starts = [b[self._record_dim][0] for b in blocks] + [b[self._record_dim][1] for b in blocks]
            g = math.gcd(*[s for s in starts if s > 0]) if any(starts) else 0
            if options.get("slab_records") is None and g > 0:
                options["slab_records"] = g
            rust_blocks: list = []
        else:
            if any(self._record_dim in b for b in blocks):
                raise InvalidArgumentError(
                    f"blocks do not cut the record dimension '{self._record_dim}' (use placement='subfiles' for "
                    "writers of record ranges)"
                )
            for b in blocks:  # every writer checks every block: all raise alike
                for dim in b:
                    if dim not in sizes:
                        raise InvalidArgumentError(f"a block names dimension '{dim}', which is not defined")
            rust_blocks = [{d: list(r) for d, r in b.items()} for b in blocks]
            options["decomposition"] = _decomposition(blocks, sizes)
        self._sizes = sizes
        opts = writer_options_of(**options)
        decomposition = options.get("decomposition")
        if decomposition:
            opts["decomposition"] = decomposition
        schema_json, options_json = json.dumps(schema), json.dumps(opts)

        self._coord = None
        error = token = None
        if self.rank == 0:
            try:
                self._coord = _core.Coordinator.create(
                    self._path, schema_json, options_json, self.size, placement, fraction, padding
                )
                token = self._coord.token()
            except StrataError as err:
                error = err
        token, why = comm.bcast((token, str(error) if error else None))
        if error is not None:
            raise error
        if why:
            raise ParallelWriteError(f"writer 0 could not start the write: {why}")
        part = error = None
        try:
            part = _core.PartWriter(
                self._path,
                schema_json,
                options_json,
                token,
                placement,
                json.dumps(rust_blocks),
                self.rank,
                first_record,
                fraction,
                padding,
            )
        except StrataError as err:
            error = err
        everyone = comm.allgather(str(error) if error else None)
        if error is not None:
            raise error
        _raise_if(everyone)
        self._part = part
        self._static_sent = placement == "subfiles"
        self._tables: list[bytes] = []
        self._appended = 0
        self._committed: int | None = None

    def _shape(self, name: str, records: int | None) -> tuple[int, ...]:
        var = self._vars[name]
        shape = []
        for d in var["dims"]:
            if d == self._record_dim:
                shape.append(records)
            elif d in self._block:
                a, b = self._block[d]
                shape.append(b - a)
            else:
                shape.append(self._sizes[d])
        return tuple(shape)

    def _cast(self, name: str, value) -> np.ndarray:
        var = self._vars.get(name)
        if var is None:
            raise InvalidArgumentError(f"no variable '{name}' (variables: {', '.join(self._vars)})")
        return cast_values(name, var["dtype"], value)

    def write(self, name: str, value) -> None:
        """This writer's block of a variable without the record dimension."""
        if self._static_sent and self._placement != "subfiles":
            raise InvalidArgumentError("variables without the record dimension are written before the first slab fills")
        arr = self._cast(name, value)
        shape = self._shape(name, None)
        if arr.shape != shape:
            raise InvalidArgumentError(f"'{name}': this writer's block has shape {shape}, got {arr.shape}")
        self._part.put_static(name, le_bytes(arr, self._vars[name]["dtype"]))

    def append(self, arrays: Mapping[str, Any] | None = None, /, **more) -> None:
        """One record (or a block of records, record axis first) of this writer's block of
        each record variable it holds; every writer appends the same records."""
        count = None
        for name, value in {**(arrays or {}), **more}.items():
            arr = self._cast(name, value)
            var = self._vars[name]
            inner = self._shape(name, None)[1:]
            arr = as_records(
                name,
                var["dims"],
                self._record_dim,
                arr,
                inner,
                "write()",
                lambda inner, got, name=name: f"'{name}': this writer's records have shape {inner}; got {got}",
            )
            count = arr.shape[0]
            self._part.append(name, le_bytes(arr, var["dtype"]))
        if self._placement == "subfiles" and count is not None:
            self._appended += count
            if self._appended > self._limit:
                raise InvalidArgumentError(f"this writer holds {self._limit} records and was given {self._appended}")
        while self._part.ready():
            self._round(last=False)

    def _round(self, last: bool) -> bool:
        """Encodes the next slab and places it with the others; False when none waited."""
        if self._placement == "subfiles":
            table = self._part.encode(last)
            if table is not None:
                self._tables.append(table)
            return table is not None
        if not self._static_sent:
            self._static_sent = True
            self._exchange(last=False)
        return self._exchange(last)

    def _exchange(self, last: bool) -> bool:
        table = error = None
        try:
            table = self._part.encode(last)
        except StrataError as err:
            error = str(err)
        gathered = self._comm.gather((error, table))
        answer = None
        if self.rank == 0:
            errors = [e for e, _ in gathered]
            tables = [t for _, t in gathered]
            if any(errors):
                answer = [(errors, None)] * self.size
            elif all(t is None for t in tables):
                answer = [(None, None)] * self.size
            elif any(t is None for t in tables):
                missing = [i for i, t in enumerate(tables) if t is None]
                answer = [([f"writers {missing} have no slab to send while others do"], None)] * self.size
            else:
                try:
                    answer = [(None, p) for p in self._coord.place(tables)]
                except StrataError as err:
                    answer = [([str(err)], None)] * self.size
        errors, placement = self._comm.scatter(answer)
        if errors:
            _raise_if(errors)
        if placement is None:
            return False
        self._part.write(placement)
        return True

    def commit(self) -> int:
        """Writes what waits and publishes the version (every writer calls it); returns its
        number. A failure on any writer makes every writer raise and commits nothing."""
        if self._committed is not None:
            return self._committed
        error = None
        try:
            while self._round(last=True):
                pass
        except ParallelWriteError:
            raise
        except StrataError as err:
            error = str(err)
        gathered = self._comm.gather((error, self._tables))
        result = None
        if self.rank == 0:
            errors = [e for e, _ in gathered]
            if any(errors):
                result = (errors, None)
            else:
                try:
                    if self._placement == "subfiles":
                        self._coord.place([t for _, tables in gathered for t in tables])
                    result = (None, self._coord.commit(self._message))
                except StrataError as err:
                    result = ([str(err)], None)
        errors, version = self._comm.bcast(result)
        if errors:
            _raise_if(errors)
        self._committed = version
        return version


def write_threads(
    path: str | os.PathLike,
    dims: Mapping[str, int | None],
    variables: Mapping[str, Any],
    blocks: Sequence[Mapping[str, tuple[int, int]]],
    work: Callable[[ParallelWriter, int], None],
    **options,
) -> int:
    """Writes a store with one thread per block: ``work(writer, rank)`` appends that
    block's records (and writes its part of the fixed variables); the store is committed
    when every thread returns. Returns the version; if any thread fails, raises its error
    and commits nothing."""
    group = _ThreadGroup(len(blocks))
    versions: list[int | None] = [None] * len(blocks)
    errors: list[tuple[int, BaseException]] = []

    def run(rank: int) -> None:
        comm = ThreadComm(group, rank)
        try:
            w = ParallelWriter(comm, path, dims, variables, blocks[rank], **options)
            work(w, rank)
            versions[rank] = w.commit()
        except BaseException as err:
            errors.append((rank, err))
            comm.abort()

    threads = [threading.Thread(target=run, args=(r,), name=f"strata-writer-{r}") for r in range(len(blocks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        # The writer that failed first, not those it stopped.
        errors.sort(key=lambda e: isinstance(e[1], ParallelWriteError))
        raise errors[0][1]
    return versions[0]

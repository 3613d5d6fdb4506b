"""SQL over strata stores, through Apache DataFusion (the ``strata-sql`` crate).

Every group of numeric variables sharing dimensions is a table: one row per grid point, a
column per dimension (its 1-D coordinate; CF times as timestamps; the position when the
dimension has no coordinate variable) and a column per variable, NULL where the value is NaN
or a fill value. A store's group holding the most data (groups along the record dimension
first; auxiliary coordinates are not data) is named after the store (``ersst.strata`` ->
``ersst``, or ``table=``); every group is also ``<name>_<dim1>_<dim2>...``, in lower case.

Comparisons of coordinates with constants become index ranges and comparisons of variables
become value constraints answered from strata's index or by a scan, as the cost model
chooses (see :mod:`strata.planner`). Aggregates, GROUP BY, ORDER BY, LIMIT and joins are
DataFusion's.

>>> import strata
>>> strata.sql("ersst.strata", "SELECT time, avg(sst) AS m FROM ersst "
...            "WHERE lat > 60 GROUP BY time ORDER BY time")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _core
from .errors import InvalidArgumentError

# More parallel parts than this only add DataFusion's per-partition overhead on any machine
# this runs on (each part is a stream of pieces, and the work is split among at most 8
# threads).
MAX_PARTITIONS = 1024


def _stores(store: str | os.PathLike | Mapping[str, str | os.PathLike], table: str | None):
    if isinstance(store, Mapping):
        if table is not None:
            raise InvalidArgumentError("give table names as the keys of the store mapping, not with table=")
        return [(os.fspath(p), name) for name, p in store.items()]
    return [(os.fspath(store), table)]


class SqlSession:
    """Stores registered as tables, for several queries. Value constraints are planned by
    the engine's ``session`` (default: the process's, which ``Dataset.query`` shares), so
    the cost model's corrections learned from each query carry over to the next.
    ``cache_bytes``: decoded sub-chunks each store keeps in memory across queries (default
    64 MiB; 0 turns the cache off)."""

    def __init__(
        self,
        store: str | os.PathLike | Mapping[str, str | os.PathLike],
        *,
        table: str | None = None,
        method: str = "auto",
        partitions: int | None = None,
        cache_bytes: int | None = None,
        session: _core.Session | None = None,
    ):
        # The query module and the dataset bring NumPy: loaded when SQL is used, not by
        # `import strata`.
        from .dataset import check_cache_bytes
        from .query import METHODS
        from .query import session as query_session

        if method not in METHODS:
            raise InvalidArgumentError(f"method must be one of {', '.join(METHODS)}, not '{method}'")
        if partitions is not None and (not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS):
            raise InvalidArgumentError(f"partitions must be 1 to {MAX_PARTITIONS}, not {partitions!r}")
        check_cache_bytes(cache_bytes)
        self._session = _core.SqlSession.open(
            _stores(store, table),
            session or query_session(),
            method=method,
            partitions=partitions,
            cache_bytes=cache_bytes,
        )

    @property
    def tables(self) -> dict[str, list[str]]:
        """Table name -> its variable columns."""
        return {name: cols.split(",") for name, cols in self._session.tables()}

    def stream(self, query: str):
        """The result as a ``pyarrow.RecordBatchReader``: batches are computed as they are
        read, in bounded memory, and closing the reader early cancels the rest. Errors met
        while reading raise strata's typed exceptions (``CorruptionError``, ...)."""
        import pyarrow as pa

        handle = self._session.execute(query)
        inner = pa.RecordBatchReader.from_stream(handle)

        def batches():
            try:
                yield from inner
            except pa.ArrowException:
                handle.raise_error()
                raise
            finally:
                inner.close()

        return pa.RecordBatchReader.from_batches(inner.schema, batches())

    def execute(self, query: str):
        """The whole result as a ``pyarrow.Table``."""
        return self.stream(query).read_all()

    def pieces_run(self, since: int = 0) -> list[tuple[str, float, float]]:
        """Pieces scanned after the first ``since`` (a ``pieces_run_count()`` taken
        earlier; 0: the most recent 10,000 kept): (method, estimated seconds, observed
        seconds)."""
        return self._session.pieces_run(since)

    def pieces_run_count(self) -> int:
        """How many pieces this session scanned."""
        return self._session.pieces_run_count()


def sql(
    store: str | os.PathLike | Mapping[str, str | os.PathLike],
    query: str,
    *,
    table: str | None = None,
    method: str = "auto",
    stream: bool = False,
    partitions: int | None = None,
) -> Any:
    """Runs ``query`` over ``store`` (a path, or ``{table_name: path}`` for several) and
    returns a ``pyarrow.Table`` (``stream=True``: a ``pyarrow.RecordBatchReader``).
    ``method`` forces how value constraints are answered (``"index"``/``"scan"``; default:
    the cost model picks per piece)."""
    session = SqlSession(store, table=table, method=method, partitions=partitions)
    return session.stream(query) if stream else session.execute(query)

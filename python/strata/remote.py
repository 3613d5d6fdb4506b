"""A dataset served by ``strata serve``, queried and subset at the server.

>>> ds = strata.remote.open("http://127.0.0.1:8470/ersst")          # doctest: +SKIP
>>> ds.query("sst > 28", isel={"time": slice(0, 12)}, output="count")  # doctest: +SKIP
>>> ds.sel(time=slice("2000-01", "2000-12"), lat=slice(-10, 10))      # doctest: +SKIP
>>> ds.fetch("subset.nc", variables=["sst"], isel={"time": slice(0, 120)}, streams=4)  # doctest: +SKIP

Only what is asked for crosses the network: value queries come back as Arrow, dense
subsets as NetCDF, and a large subset can come over several connections at once (byte
ranges of one file). Label selections (``sel``) are turned into positions here, from the
coordinates the server's schema lists, with the same rules as :meth:`strata.Dataset.sel`.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import errors
from ._coords import coordinate_index, engine_label, index_range, slice_labels
from ._text import human_bytes, human_rate, human_seconds

_KINDS = {
    "invalid_argument": errors.InvalidArgumentError,
    "not_found": errors.NotFoundError,
    "compatibility": errors.CompatibilityError,
    "conflict": errors.ConflictError,
    "unauthorized": errors.AccessError,
    "too_large": errors.LimitError,
    "too_many_requests": errors.LimitError,
    "timeout": errors.LimitError,
}


@dataclass(frozen=True)
class FetchEstimate:
    """Whether a subset or the whole dataset comes sooner (:meth:`RemoteDataset.estimate_fetch`):
    the subset's size (exact for a dense subset; for points selected by value, the exact
    count times the bytes per row of a sample of the answer, as encoded for the wire), the
    whole dataset's (the file it indexes in place, or the store's files), and the server's
    cost-model estimate of its time to cut the subset. The server sends each of the
    subset's ``pieces`` while it cuts the next, so on a link of B bytes/s the subset takes
    about ``max(S, T) + min(S, T) / pieces`` (S the server's seconds, T ``subset_bytes / B``)
    and the whole ``dataset_bytes / B``; ``whole_sooner_above_bits_per_s`` is the link speed
    above which the whole dataset comes sooner (0: always, None: never), the server's."""

    subset_bytes: int
    dataset_bytes: int
    server_seconds: float
    whole_sooner_above_bits_per_s: float | None
    subset_exact: bool = True
    pieces: int = 1

    def advice(self, bits_per_s: float | None = None) -> str:
        """One sentence: which to fetch, on any link, or on one of ``bits_per_s``."""
        subset = ("" if self.subset_exact else "about ") + human_bytes(self.subset_bytes)
        sizes = f"the subset is {subset}, the whole dataset {human_bytes(self.dataset_bytes)}"
        cut = f"the server cuts it in about {human_seconds(self.server_seconds)} (its cost model)"
        above = self.whole_sooner_above_bits_per_s
        if above == 0:
            return f"{sizes}: the whole dataset is no larger, so fetching it would be sooner on any link"
        if above is None:
            return f"{sizes}; {cut}: the subset is sooner on any link"
        text = f"{sizes}; {cut}: the whole dataset would be sooner only on links faster than {human_rate(above)}"
        if bits_per_s is not None:
            from . import _core

            subset_s, whole_s = _core.fetch_seconds(
                self.subset_bytes, self.dataset_bytes, self.server_seconds, self.pieces, bits_per_s
            )
            which = "the whole dataset" if bits_per_s > above else "the subset"  # the server's break-even
            times = f"subset {human_seconds(subset_s)}, whole {human_seconds(whole_s)}"
            text += f" (at {human_rate(bits_per_s)}: {times}; {which} wins)"
        return text


def open(url: str, token: str | None = None, timeout: float = 300.0) -> RemoteDataset:
    """The dataset at ``url`` (``http://HOST:PORT/NAME``; the server's ``/dap/NAME`` or
    ``/api/schema/NAME`` URLs work too). ``token`` is sent when the dataset is protected."""
    return RemoteDataset(url, token=token, timeout=timeout)


def _numbers(values: list) -> np.ndarray:
    """A numeric coordinate's values as the schema lists them (non-finite ones as text)."""
    return np.array([np.nan if isinstance(x, str) else x for x in values], dtype="f8")


class RemoteDataset:
    def __init__(self, url: str, token: str | None = None, timeout: float = 300.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise errors.InvalidArgumentError(f"'{url}' is not an http(s) URL of a served dataset")
        name = parts.path.strip("/")
        for prefix in ("dap/", "api/schema/", "api/subset/", "api/query/"):
            name = name.removeprefix(prefix)
        if not name:
            raise errors.InvalidArgumentError(f"'{url}' names no dataset (http://HOST:PORT/NAME)")
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.name = name
        self.token = token
        self.timeout = timeout
        self._schema: dict | None = None
        self._indexes: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<strata.remote.RemoteDataset {self.name!r} at {self.base}>"

    # -- HTTP ---------------------------------------------------------------------------

    def _request(self, route: str, params: dict | None = None, headers: dict | None = None, body=None):
        url = f"{self.base}/api/{route}/{urllib.parse.quote(self.name)}"
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            h["Content-Type"] = "application/json"
            body = json.dumps(body).encode()
        req = urllib.request.Request(url, data=body, headers=h)
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            raise _error(e) from None
        except urllib.error.URLError as e:
            raise errors.StrataIOError(f"cannot reach {self.base}: {e.reason}") from None

    # -- description --------------------------------------------------------------------

    @property
    def schema(self) -> dict:
        """The server's three descriptors: ``physical``, ``logical`` and ``values``."""
        if self._schema is None:
            with self._request("schema") as r:
                self._schema = json.loads(_body(r))
        return self._schema

    @property
    def dims(self) -> dict[str, int]:
        return {d["name"]: d["size"] for d in self.schema["logical"]["dims"]}

    @property
    def variables(self) -> list[str]:
        return [v["name"] for v in self.schema["logical"]["variables"]]

    @property
    def attrs(self) -> dict:
        return self.schema["logical"]["attrs"]

    def coordinate_index(self, dim: str):
        if dim not in self._indexes:
            c = self.schema["logical"]["coordinates"].get(dim)
            if c is None or c["values"] is None:
                raise errors.InvalidArgumentError(f"dimension '{dim}' has no 1-D coordinate to select by label")
            if c.get("text"):
                import pandas as pd

                self._indexes[dim] = pd.Index(c["values"], dtype=object, name=dim)
                return self._indexes[dim]
            self._indexes[dim] = coordinate_index(_numbers(c["values"]), c["attrs"])
        return self._indexes[dim]

    # -- selections -----------------------------------------------------------------------

    def _isel_text(self, isel: dict | None) -> str | None:
        items = []
        dims = self.dims
        for dim, k in (isel or {}).items():
            if dim not in dims:
                raise errors.InvalidArgumentError(f"no dimension '{dim}' (dims: {list(dims)})")
            start, stop, step = index_range(k, dims[dim], dim)
            items.append(f"{dim}={start}:{stop}:{step}")
        return ",".join(items) or None

    def _sel_text(self, sel: dict | None) -> str | None:
        """Labels as the server's ``sel`` text (``time=2000-01:2000-06``): the server's
        engine picks their positions, by the rules of a local ``sel``. A string is sent as
        written, so the command line's ``LO:HI`` text works too."""
        items = []
        for dim, label in (sel or {}).items():
            if dim not in self.dims:
                raise errors.InvalidArgumentError(
                    f"no dimension '{dim}' (dims: {list(self.dims)}); a range of a 2-D coordinate selects in a query"
                )
            if isinstance(label, slice):
                text = ":".join(_label_text(end, dim) for end in slice_labels(label, dim))
            else:
                text = _label_text(label, dim)
            items.append(f"{dim}={text}")
        return ",".join(items) or None

    def query(
        self,
        where: str,
        *,
        isel: dict | None = None,
        sel: dict | None = None,
        variables: list[str] | None = None,
        output: str = "points",
        method: str = "auto",
        raw: bool = False,
        streams: int = 1,
    ):
        """Runs :meth:`strata.Dataset.query` at the server: the count (``output="count"``),
        or a pandas DataFrame of points or positions (a column per dimension, with
        coordinate values where there are 1-D coordinates, CF times as timestamps, then the
        variables). ``streams`` > 1 fetches the result in that many parts of about equal
        estimated size over as many connections at once."""
        body = self._query_body(where, isel, sel, variables, output, method, raw)
        if output == "count":
            with self._request("query", body=body) as r:
                return int(json.loads(_body(r))["count"])
        if streams < 1:
            raise errors.InvalidArgumentError("streams must be at least 1")

        def part(i: int):
            b = dict(body, parts=streams, part=i) if streams > 1 else body
            with self._request("query", body=b, headers={"Accept-Encoding": "zstd"}) as r:
                return _arrow(r)

        if streams == 1:
            return self._dates(part(0).to_pandas())
        import concurrent.futures

        import pyarrow as pa

        with concurrent.futures.ThreadPoolExecutor(streams) as pool:
            tables = list(pool.map(part, range(streams)))
        return self._dates(pa.concat_tables(tables).to_pandas())

    def _dates(self, frame):
        """The frame's CF times as a local query gives them: nanosecond timestamps, and
        cftime dates for other calendars (the server sends what its tables hold: for a
        noleap calendar's dates, timestamps bearing their labels; numbers for dates no
        timestamp can label, such as 30 February of a 360-day calendar)."""
        import pandas as pd

        coords = self.schema["logical"]["coordinates"]
        for dim in [c for c in frame.columns if c in coords and frame[c].dtype.kind == "M"]:
            c = coords[dim]
            labels = np.asarray(self.coordinate_index(dim)) if c.get("values") is not None else None
            if labels is not None and labels.dtype.kind == "O":
                with contextlib.suppress(ValueError, AttributeError):
                    stamps = np.array([np.datetime64(d.isoformat(), "us") for d in labels]).astype("i8")
                    got = frame[dim].to_numpy().astype("datetime64[us]").astype("i8")
                    at = pd.Index(stamps).get_indexer(got)
                    if (at >= 0).all():
                        frame[dim] = labels[at]
                        continue
            # Arrow's microseconds as a local query's nanoseconds, where they fit.
            with contextlib.suppress(OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
                frame[dim] = frame[dim].astype("datetime64[ns]")
        for dim in [c for c in frame.columns if c in coords and frame[c].dtype.kind in "iuf"]:
            c = coords[dim]
            if c.get("values") is None or " since " not in str(c["attrs"].get("units", "")):
                continue
            labels = np.asarray(self.coordinate_index(dim))
            if labels.dtype.kind != "O":
                continue
            at = pd.Index(_numbers(c["values"])).get_indexer(frame[dim].to_numpy(dtype="f8"))
            if (at >= 0).all():
                frame[dim] = labels[at]
        return frame

    def _query_body(self, where, isel, sel, variables, output="points", method="auto", raw=False) -> dict:
        """The query route's fields for a value query."""
        body: dict[str, Any] = {"where": where, "output": output, "method": method, "raw": raw, "format": "arrow"}
        # Ranges of coordinates that are not dimensions (2-D lat/lon) go to the server as its
        # area; the server decides whether they are the variables' auxiliary coordinates.
        by_dim = {k: v for k, v in (sel or {}).items() if k in self.dims}
        area = _area_items(sel, by_dim)
        for key, text in (("isel", self._isel_text(isel)), ("sel", self._sel_text(by_dim))):
            if text:
                body[key] = text
        if area:
            body["area"] = ",".join(area)
        if variables is not None:
            body["variables"] = list(variables)
        return body

    def sql(self, query: str):
        """Runs read-only SQL at the server (the table is ``schema["sql_table"]``); a
        pandas DataFrame."""
        params = {"q": query, "format": "arrow"}
        with self._request("sql", params=params, headers={"Accept-Encoding": "zstd"}) as r:
            return _arrow(r).to_pandas()

    def _subset_params(self, variables, isel, sel) -> dict:
        params: dict[str, Any] = {"isel": self._isel_text(isel), "sel": self._sel_text(sel)}
        if variables is not None:
            params["vars"] = ",".join(variables)
        return params

    def _ranged(self, params: dict, lo: int, hi: int):
        """Bytes ``[lo, hi)`` of a subset, chunk by chunk, checked against the server's digest."""
        return self._digested("subset", params, [("Range", f"bytes={lo}-{hi - 1}")], f"bytes {lo}-{hi - 1}")

    def _digested(self, route: str, params: dict, headers: list, what: str):
        """A GET of ``route``'s body, chunk by chunk (as sent: still compressed when the
        server compressed it), checked against the server's digest: the request asks for
        trailers (``TE: trailers``), the body comes chunked and its CRC-32C must equal the
        ``x-strata-crc32c`` trailer. HTTP is spoken with h11 (urllib drops trailers).
        ``what`` names the body in errors."""
        import socket
        import ssl

        import h11

        from . import _core

        u = urllib.parse.urlsplit(self.base)
        target = f"/api/{route}/{urllib.parse.quote(self.name)}?" + urllib.parse.urlencode(
            {k: v for k, v in params.items() if v is not None}
        )
        headers = [("Host", u.netloc), *headers, ("TE", "trailers"), ("Connection", "close")]
        if self.token:
            headers.append(("Authorization", f"Bearer {self.token}"))
        port = u.port or (443 if u.scheme == "https" else 80)
        try:
            sock = socket.create_connection((u.hostname, port), timeout=self.timeout)
        except OSError as e:
            raise errors.StrataIOError(f"cannot reach {self.base}: {e}") from None
        if u.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=u.hostname)
        conn = h11.Connection(h11.CLIENT)
        crc, status, error_body = 0, 0, bytearray()
        with sock:
            sock.sendall(conn.send(h11.Request(method="GET", target=target, headers=headers)))
            sock.sendall(conn.send(h11.EndOfMessage()))
            while True:
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    data = sock.recv(1 << 20)
                    if not data:
                        raise errors.StrataIOError(f"the server closed the connection during {what}")
                    conn.receive_data(data)
                elif isinstance(ev, h11.Response):
                    status = ev.status_code
                elif isinstance(ev, h11.Data):
                    if status >= 400:
                        error_body += ev.data
                        continue
                    crc = _core.crc32c(bytes(ev.data), crc)
                    yield bytes(ev.data)
                elif isinstance(ev, h11.EndOfMessage):
                    break
        if status >= 400:
            raise _error_from(status, bytes(error_body))
        digest = dict(ev.headers).get(b"x-strata-crc32c")
        if digest is None or int(digest, 16) != crc:
            raise errors.StrataIOError(f"{what} arrived damaged or incomplete: digest {digest!r}, computed {crc:08x}")

    def subset(self, variables: list[str] | None = None, *, isel: dict | None = None, sel: dict | None = None):
        """The dense subset as an ``xarray.Dataset`` (cut at the server, sent as NetCDF)."""
        import netCDF4
        import xarray as xr

        with self._request("subset", params=self._subset_params(variables, isel, sel)) as r:
            data = _body(r)
        nc = netCDF4.Dataset("subset.nc", memory=data)
        return xr.open_dataset(xr.backends.NetCDF4DataStore(nc)).load()

    def isel(self, **indexers) -> Any:
        return self.subset(isel=indexers)

    def sel(self, **labels) -> Any:
        return self.subset(sel=labels)

    def to_xarray(self) -> Any:
        return self.subset()

    def estimate_fetch(
        self,
        variables: list[str] | None = None,
        *,
        isel: dict | None = None,
        sel: dict | None = None,
        where: str | None = None,
    ) -> FetchEstimate:
        """Whether :meth:`fetch` of this subset (with ``where``: of these points) or a
        download of the whole dataset would come sooner, from the server's sizes and cost
        model (nothing is transferred but the estimate)."""
        if where is None:
            route, params = "subset", self._subset_params(variables, isel, sel)
        else:
            route, params = "query", _url_params(self._query_body(where, isel, sel, variables))
        # The points come compressed (see fetch): their estimate is of that size.
        with self._request(route, params=dict(params, estimate="true"), headers={"Accept-Encoding": "zstd"}) as r:
            e = json.loads(_body(r))
        return FetchEstimate(
            subset_bytes=int(e["subset_bytes"]),
            dataset_bytes=int(e["dataset_bytes"]),
            server_seconds=float(e["server_seconds"]),
            whole_sooner_above_bits_per_s=e["whole_sooner_above_bits_per_s"],
            subset_exact=bool(e.get("subset_exact", True)),
            pieces=int(e.get("pieces", 1)),
        )

    def fetch(
        self,
        path: str | os.PathLike,
        variables: list[str] | None = None,
        *,
        isel: dict | None = None,
        sel: dict | None = None,
        where: str | None = None,
        streams: int = 4,
        progress: bool = False,
        expected_bytes: int | None = None,
    ) -> int:
        """Writes the dense subset to the NetCDF file ``path`` over ``streams`` connections
        at once (each a byte range of the same file, checked against the server's digest);
        returns its size in bytes.

        With ``where`` (a value constraint, ``"sst > 28"``), writes the points where it
        holds instead, the rows :meth:`query` returns (a column per dimension, then the
        variables), as Parquet, CSV or an Arrow IPC file by the suffix of ``path``
        (``.parquet``, ``.csv``, ``.arrow``): the answer comes in ``streams`` parts of about
        equal estimated size, each compressed and checked against its digest. Their size is
        not known before they come: ``expected_bytes`` (an :meth:`estimate_fetch`'s
        ``subset_bytes``) gives the progress bar its end."""
        if streams < 1:
            raise errors.InvalidArgumentError("streams must be at least 1")
        check_output(path, points=where is not None)
        if where is not None:
            bar = (progress, expected_bytes)
            return self._fetch_points(os.fspath(path), where, variables, isel, sel, streams, bar)
        params = self._subset_params(variables, isel, sel)
        with self._request("subset", params=params, headers={"Range": "bytes=0-0"}) as r:
            total = int(r.headers["Content-Range"].rsplit("/", 1)[1])
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"fetch {self.name}")
        lock = threading.Lock()
        failures: list[BaseException] = []
        tmp = f"{os.fspath(path)}.part"
        with _open(tmp) as f:
            f.truncate(total)
            fd = f.fileno()

            def part(i: int) -> None:
                lo, hi = total * i // streams, total * (i + 1) // streams
                if lo >= hi:
                    return
                try:
                    at = lo
                    for chunk in self._ranged(params, lo, hi):
                        os.pwrite(fd, chunk, at)
                        at += len(chunk)
                        if bar is not None:
                            with lock:
                                bar.update(len(chunk))
                    if at != hi:
                        raise errors.StrataIOError(f"part {i} ended at byte {at}, expected {hi}")
                except BaseException as e:  # re-raised below, in the caller's thread
                    failures.append(e)

            threads = [threading.Thread(target=part, args=(i,)) for i in range(streams)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if bar is not None:
            bar.close()
        if failures:
            os.unlink(tmp)
            raise failures[0]
        os.replace(tmp, path)
        return total

    def _fetch_points(self, path: str, where, variables, isel, sel, streams: int, progress) -> int:
        """:meth:`fetch` with ``where``: each part's body is saved as it comes, then the
        parts' batches are written in order into one file (memory holds a batch, not the
        answer). ``progress``: whether to show a bar, and its end if known."""
        import concurrent.futures

        fmt = points_format(path)
        params = _url_params(self._query_body(where, isel, sel, variables))
        show, end = progress
        bar = _points_bar(self.name, where, end) if show else None
        lock = threading.Lock()
        tmp = f"{path}.part"
        names = [f"{path}.part{i}" for i in range(streams)]

        def get(i: int) -> None:
            p = dict(params, parts=streams, part=i) if streams > 1 else params
            with _open(names[i]) as f:
                for chunk in self._digested("query", p, [("Accept-Encoding", "zstd")], f"part {i} of the points"):
                    f.write(chunk)
                    if bar is not None:
                        with lock:
                            bar.update(len(chunk))

        try:
            with concurrent.futures.ThreadPoolExecutor(streams) as pool:
                list(pool.map(get, range(streams)))
            writer = None
            try:
                for name in names:
                    for batch in _saved_batches(name):
                        if writer is None:
                            writer = _points_writer(fmt, tmp, batch.schema)
                        writer.write_batch(batch)
            finally:
                if writer is not None:
                    writer.close()
            os.replace(tmp, path)
        finally:
            if bar is not None:
                bar.close()
            for name in [*names, tmp]:
                if os.path.exists(name):
                    os.unlink(name)
        return os.path.getsize(path)


def _points_bar(name: str, where: str, expected_bytes: int | None):
    """The progress bar of a points fetch: bytes as they come, against the estimate if any."""
    from tqdm import tqdm

    return tqdm(total=expected_bytes, unit="B", unit_scale=True, desc=f"fetch {name} where {where}")


def check_output(path: str | os.PathLike, points: bool) -> None:
    """Refuses an output path :meth:`RemoteDataset.fetch` cannot write, before anything is
    fetched: its folder must exist, it must not be a folder, and its suffix must say the
    format (points: see :func:`points_format`; a dense subset is NetCDF, not those)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise errors.InvalidArgumentError(f"cannot write '{path}': folder '{folder}' does not exist")
    if os.path.isdir(path):
        raise errors.InvalidArgumentError(f"cannot write '{path}': it is a folder (give a file name)")
    if points:
        points_format(path)
    elif os.path.splitext(path)[1].lower() in _POINT_FORMATS:
        raise errors.InvalidArgumentError(
            f"a dense subset is a NetCDF file, not '{path}' (points selected by value, with where=, are written "
            "as Parquet, CSV or Arrow)"
        )


def _url_params(body: dict) -> dict:
    """The query route's JSON fields as URL parameters."""
    out = {}
    for k, v in body.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            v = ",".join(v)
        out[k] = v
    return out


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _saved_batches(name: str):
    """The record batches of an Arrow IPC stream saved as it came (zstd-compressed or not);
    a stream with no rows still yields one empty batch, so its schema reaches the writer."""
    import pyarrow as pa

    with builtins.open(name, "rb") as f:
        compressed = f.read(4) == _ZSTD_MAGIC
    src = pa.OSFile(name)
    try:
        reader = pa.ipc.open_stream(pa.CompressedInputStream(src, "zstd") if compressed else src)
        any_batch = False
        for batch in reader:
            any_batch = True
            yield batch
        if not any_batch:
            yield pa.RecordBatch.from_pylist([], schema=reader.schema)
    finally:
        src.close()


_POINT_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".arrow": "arrow", ".feather": "arrow"}


def points_format(path: str | os.PathLike) -> str:
    """The format points fetched to ``path`` are written in, by its suffix: parquet, csv
    or arrow (an Arrow IPC file)."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in _POINT_FORMATS:
        raise errors.InvalidArgumentError(
            f"points are written as Parquet, CSV or an Arrow IPC file: '{os.fspath(path)}' should end in "
            ".parquet, .csv or .arrow"
        )
    return _POINT_FORMATS[suffix]


def _points_writer(fmt: str, path: str, schema):
    """A writer of record batches to ``path`` in ``fmt`` (see :func:`points_format`)."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(path, schema, compression="zstd")
    if fmt == "csv":
        import pyarrow.csv as pcsv

        return pcsv.CSVWriter(path, schema)
    return pa.ipc.new_file(path, schema)


def _area_items(sel: dict | None, by_dim: dict) -> list[str]:
    """The ranges of ``sel`` on names that are not dimensions as the server's ``area``
    items (``latitude=60:``): a slice or pair of numbers, or text already in that form (as
    the command line's ``--sel latitude=60:`` gives it), which the server checks."""
    from ._area import range_bounds

    items = []
    for k, v in (sel or {}).items():
        if k in by_dim:
            continue
        if isinstance(v, str):
            items.append(f"{k}={v}")
            continue
        lo, hi = range_bounds(k, v)
        items.append(f"{k}={_label_text(lo, k)}:{_label_text(hi, k)}")
    return items


def _arrow(response):
    """The Arrow table of a response, decompressed as it streams when the server compressed
    it (``Content-Encoding: zstd``)."""
    import pyarrow as pa

    data = _body(response)
    stream = pa.BufferReader(data)
    if response.headers.get("Content-Encoding", "").lower() == "zstd":
        stream = pa.CompressedInputStream(stream, "zstd")
    return pa.ipc.open_stream(stream).read_all()


def _body(response) -> bytes:
    """The whole body of a response. A server that meets an error after it has begun
    sending (the status is already out) can only stop: the body ends short of its length or
    its last chunk, which is reported as what it is rather than as a protocol error."""
    import http.client

    try:
        return response.read()
    except (http.client.IncompleteRead, ConnectionError) as e:
        got = len(e.partial) if isinstance(e, http.client.IncompleteRead) else "some"
        raise errors.StrataIOError(
            f"the server cut its answer short after {got} bytes: it met an error while sending "
            "(its log names it); the answer is incomplete and was not used"
        ) from None


def _open(path: str):
    return builtins.open(path, "wb")


def _error(e: urllib.error.HTTPError) -> errors.StrataError:
    return _error_from(e.code, e.read())


def _error_from(code: int, body: bytes) -> errors.StrataError:
    text = body.decode("utf-8", "replace")
    try:
        err = json.loads(text)["error"]
        kind, message = err["kind"], err["message"]
    except (ValueError, KeyError, TypeError):
        kind, message = "", text.strip() or f"HTTP {code}"
    cls = _KINDS.get(kind, errors.StrataIOError)
    return cls(f"server answered {code}: {message}")


def _label_text(label: Any, dim: str) -> str:
    """One label as ``sel`` text: empty for an open end."""
    value = engine_label(label, dim)
    text = "" if value is None else repr(value) if isinstance(value, float) else value
    if "," in text:
        raise errors.InvalidArgumentError(f"a label on '{dim}' cannot hold a comma: {text!r}")
    return text

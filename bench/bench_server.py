"""Subsetting at the server against moving the file (SDQuery's experiment), over links
limited with tc in a network namespace this script makes itself.

    python bench/bench_server.py      # as root; writes bench/results/server.md and server.json

Everything runs inside a fresh network namespace whose loopback is shaped with `tc` (tbf
for 1 Gb/s, 100 Mb/s and 20 Mb/s; netem for 50 ms of round-trip delay). Servers listen on
that namespace's 127.0.0.1: `strata serve` (the stores), nginx (the NetCDF files, whole)
and pydap's server (the same files over DAP2). Clients run in the same namespace.

- Subset vs whole file, end to end as a user gets the answer: by value (points where
  `sst > q`, Arrow over zstd), by index and by coordinates (NetCDF subsets), against
  downloading the file from nginx and selecting locally with NumPy.
- Parallel streams: `strata fetch` of a large subset over 1 and 4 connections with 50 ms
  RTT.
- Time to first byte and the server's peak memory while it streams a 1 GB result.
- DAP2 hyperslabs read by netCDF4-python from strata and from pydap's server.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import netCDF4
import numpy as np
from common import DATA, ROOT, WORK, fresh, git_rev, machine, write_ersst_deflate

import strata
from strata import _core

NS = "strata-bench"
LINKS_MBIT = (1000, 100, 20)
TURNS = 3
ERSST = DATA / "ersst_v3b_1960-2016_concat.nc"


# -- the namespace and its link ---------------------------------------------------------------


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def shape_link(mbit: int | None = None) -> None:
    """The namespace's loopback as a link of `mbit` Mb/s (None: unshaped)."""
    sh("tc", "qdisc", "del", "dev", "lo", "root", check=False)
    if mbit is not None:
        burst = max(64 * 1024, mbit * 1_000_000 // 8 // 250)
        tbf = ["tbf", "rate", f"{mbit}mbit", "burst", str(burst), "latency", "200ms"]
        sh("tc", "qdisc", "add", "dev", "lo", "root", *tbf)


class DelayProxy:
    """A long path, emulated: every byte is delivered `one_way` seconds after it is sent, and
    each connection holds at most `window` bytes unacknowledged (acknowledged `one_way`
    after delivery), as a TCP connection over that round trip does. This kernel has no
    netem, so the delay is added here; the rate limit stays tc's."""

    def __init__(self, upstream_port: int, one_way: float = 0.025, window: int = 4 << 20):
        self.upstream, self.one_way, self.window = upstream_port, one_way, window
        self.port = free_port()

    def start(self) -> None:
        import threading

        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready) -> None:
        import asyncio

        async def pipe(reader, writer, window):
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue = asyncio.Queue()
            state = {"inflight": 0}
            freed = asyncio.Event()

            def ack(n):
                state["inflight"] -= n
                freed.set()

            async def deliver():
                while True:
                    due, data = await queue.get()
                    if data is None:
                        writer.close()
                        return
                    await asyncio.sleep(max(0.0, due - loop.time()))
                    writer.write(data)
                    await writer.drain()
                    loop.call_later(self.one_way, ack, len(data))

            task = asyncio.create_task(deliver())
            try:
                while data := await reader.read(64 * 1024):
                    while state["inflight"] + len(data) > window:
                        freed.clear()
                        await freed.wait()
                    state["inflight"] += len(data)
                    await queue.put((loop.time() + self.one_way, data))
            except ConnectionError:
                pass
            await queue.put((loop.time() + self.one_way, None))
            await task

        async def handle(client_r, client_w):
            try:
                up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream)
            except OSError:
                client_w.close()
                return
            await asyncio.gather(
                pipe(client_r, up_w, 1 << 30), pipe(up_r, client_w, self.window), return_exceptions=True
            )

        async def main():
            server = await asyncio.start_server(handle, "127.0.0.1", self.port)
            ready.set()
            async with server:
                await server.serve_forever()

        asyncio.run(main())


def in_namespace() -> bool:
    return os.environ.get("STRATA_BENCH_NS") == NS


def reexec_in_namespace() -> int:
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "netns", "add", NS)
    try:
        # A 1500-byte MTU, as on a real link (loopback's 64 KiB frames defeat tbf's burst).
        sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "mtu", "1500", "up")
        env = dict(os.environ, STRATA_BENCH_NS=NS)
        return subprocess.run(["ip", "netns", "exec", NS, sys.executable, *sys.argv], env=env).returncode
    finally:
        sh("ip", "netns", "del", NS, check=False)


# -- inputs -------------------------------------------------------------------------------------


def inputs():
    """The NetCDF files served whole, and the stores made from them."""
    base = WORK / "server"
    files, stores = base / "files", base / "stores"
    files.mkdir(parents=True, exist_ok=True)
    stores.mkdir(parents=True, exist_ok=True)
    with netCDF4.Dataset(ERSST) as nc:
        nc.set_auto_mask(False)
        sst, lat, lon, tm = (nc[v][:] for v in ("sst", "lat", "lon", "time"))
    if not (files / "ersst.nc").exists():
        shutil.copy(ERSST, files / "ersst.nc")
    x4 = files / "ersst_x4.nc"
    if not x4.exists():
        with netCDF4.Dataset(x4, "w", format="NETCDF3_64BIT_OFFSET") as out:
            out.createDimension("time", None)
            out.createDimension("lat", lat.size)
            out.createDimension("lon", lon.size)
            for name, dims, values in (("lat", ("lat",), lat), ("lon", ("lon",), lon)):
                out.createVariable(name, values.dtype, dims)[:] = values
            t = out.createVariable("time", "f8", ("time",))
            t.units = "days since 1960-01-01"
            t[:] = np.concatenate([tm + k * (tm[-1] - tm[0] + 30) for k in range(4)])
            v = out.createVariable("sst", "f4", ("time", "lat", "lon"), fill_value=np.float32(-999))
            v.units = "degree_Celsius"
            for k in range(4):
                v[k * sst.shape[0] : (k + 1) * sst.shape[0]] = sst
    # ERSST as NetCDF-4 model output is usually written: one record per chunk, shuffle +
    # deflate level 4 (for the DAP2 comparison on a compressed file).
    deflate = files / "ersst_deflate.nc"
    if not deflate.exists():
        write_ersst_deflate(deflate)
    # Each file indexed in place too, served by strata beside the stores (a copy there).
    for name, source in (("ersst_in_place", ERSST), ("ersst_deflate_in_place", deflate)):
        if not (stores / name / "HEAD").exists():
            shutil.copy(source, stores / f"{name}.nc")
            fresh(stores / name)
            strata.index_file(stores / f"{name}.nc", stores / name)
    if not (stores / "ersst_deflate" / "HEAD").exists():
        fresh(stores / "ersst_deflate")
        strata.import_file(deflate, stores / "ersst_deflate", layout="V-S", bins=16)
    for name in ("ersst", "ersst_x4"):
        if not (stores / name / "HEAD").exists():
            fresh(stores / name)
            strata.import_file(files / f"{name}.nc", stores / name, layout="V-S", bins=16)
    big = stores / "ersst_x24"
    if not (big / "HEAD").exists():
        fresh(big)
        w = np.concatenate([sst] * 24)
        strata.write_arrays(big, {"sst": (("time", "lat", "lon"), w)}, record_dim="time", codec="auto")
    return files, stores, {"sst": sst, "lat": lat, "lon": lon}


# -- servers --------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc, what: str) -> None:
    for _ in range(400):
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited") from None
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer")


def start_servers(files, stores, tmp):
    procs = {}
    port = free_port()
    procs["strata"] = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "strata.cli",
            "serve",
            str(stores),
            "--port",
            str(port),
            "--quiet",
            "--max-seconds",
            "3600",
        ],
        stderr=subprocess.DEVNULL,
    )
    strata_url = f"http://127.0.0.1:{port}"
    wait_http(f"{strata_url}/health", procs["strata"], "strata serve")
    nginx_port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"daemon off; worker_processes 1; pid {tmp}/nginx.pid; error_log {tmp}/nginx.err;\n"
        f"events {{}}\nhttp {{ access_log off; sendfile on; types {{}} default_type application/octet-stream;\n"
        f"  client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp};"
        f" scgi_temp_path {tmp};\n"
        f"  server {{ listen 127.0.0.1:{nginx_port}; root {files}; }} }}\n"
    )
    procs["nginx"] = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(tmp)], stderr=subprocess.DEVNULL)
    nginx_url = f"http://127.0.0.1:{nginx_port}"
    wait_http(f"{nginx_url}/ersst.nc", procs["nginx"], "nginx")
    # pydap's server, one per file (bench/pydap_app.py serves the file PYDAP_FILE names).
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable))
    pydap_urls = {}
    for name in ("ersst", "ersst_deflate"):
        port = free_port()
        procs[f"pydap {name}"] = subprocess.Popen(
            [
                gunicorn,
                "--workers",
                "2",
                "--bind",
                f"127.0.0.1:{port}",
                "--chdir",
                str(ROOT / "bench"),
                "pydap_app:app",
            ],
            env={**os.environ, "PYDAP_FILE": str(files / f"{name}.nc")},
            stderr=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        pydap_urls[name] = f"http://127.0.0.1:{port}/{name}.nc"
        wait_http(f"{pydap_urls[name]}.dds", procs[f"pydap {name}"], "pydap")
    return procs, strata_url, nginx_url, pydap_urls


# -- the measurements -----------------------------------------------------------------------------


def fetch(url: str, headers: dict | None = None) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=600) as r:
        return r.read()


def whole_file(nginx_url, name, select):
    """Download the file, then select locally: what a user does without a subsetting server."""
    t0 = time.perf_counter()
    data = fetch(f"{nginx_url}/{name}.nc")
    with netCDF4.Dataset("whole.nc", memory=data) as nc:
        nc.set_auto_mask(False)
        out = select(nc)
    return time.perf_counter() - t0, len(data), out


def value_points(strata_url, name, q):
    ds = strata.remote.open(f"{strata_url}/{name}")
    t0 = time.perf_counter()
    frame = ds.query(f"sst > {q}", output="points")
    return time.perf_counter() - t0, len(frame)


def index_subset(strata_url, name, params):
    t0 = time.perf_counter()
    data = fetch(f"{strata_url}/api/subset/{name}?" + urllib.parse.urlencode(params))
    with netCDF4.Dataset("subset.nc", memory=data) as nc:
        nc.set_auto_mask(False)
        n = nc["sst"].size
    return time.perf_counter() - t0, len(data), n


def fetch_advice(strata_url, name, kind, params, file_bytes, mbit):
    """Which `strata fetch`'s estimate says comes sooner on this link, the subset or the
    NetCDF file nginx serves, and the estimate itself. The subset takes what the estimate
    says (`max(S, T) + min(S, T) / pieces`: the server cuts a piece while the last is sent,
    docs/server.md); the file its bytes over the link. Points by value are priced as they
    come, compressed (`strata fetch --where`, `strata.remote`)."""
    if kind == "value":
        q = {"where": f"sst > {params['q']}", "output": "points", "estimate": "true"}
        url = f"{strata_url}/api/query/{name}?" + urllib.parse.urlencode(q)
    else:
        url = f"{strata_url}/api/subset/{name}?" + urllib.parse.urlencode(dict(params, estimate="true"))
    e = json.loads(fetch(url, headers={"Accept-Encoding": "zstd"}))
    subset, file = _core.fetch_seconds(e["subset_bytes"], file_bytes, e["server_seconds"], e["pieces"], mbit * 1e6)
    return ("file" if file < subset else "subset"), e


def cases(src, times):
    valid = src["sst"][src["sst"] != -999]
    lat = src["lat"]
    out = []
    for pct in (1, 10, 50, 90):
        q = float(np.quantile(valid, 1 - pct / 100 * valid.size / src["sst"].size))
        out.append(("value", f"sst > {q:.2f}", pct, {"q": q}))
    t1 = max(1, round(times * 0.01))
    out.append(("index", f"time 0:{t1}", 100 * t1 / times, {"isel": f"time=0:{t1}", "vars": "sst"}))
    t75 = round(times * 0.8)
    out.append(("index", f"time 0:{t75}", 100 * t75 / times, {"isel": f"time=0:{t75}", "vars": "sst"}))
    rows = np.flatnonzero((lat >= -8) & (lat <= 8))
    out.append(
        (
            "coordinates",
            "lat -8..8",
            100 * rows.size / lat.size,
            {"isel": f"lat={rows[0]}:{rows[-1] + 1}", "vars": "sst"},
        )
    )
    return out


def subset_vs_file(strata_url, nginx_url, src):
    results = []
    for mbit in LINKS_MBIT:
        shape_link(mbit=mbit)
        for name, copies in (("ersst", 1), ("ersst_x4", 4)):
            if name == "ersst_x4" and mbit == 20:
                continue  # 70 s per download: the ratio is the same as at 100 Mb/s
            times = src["sst"].shape[0] * copies
            for kind, label, pct, p in cases(src, times):
                for turn in range(TURNS if mbit > 20 else 1):
                    if kind == "value":

                        def select(nc, q=p["q"]):
                            a = nc["sst"][:]
                            return int(np.count_nonzero(a > q))

                        t_sub, n = value_points(strata_url, name, p["q"])
                    else:

                        def select(nc, p=p):
                            key = {}
                            for item in p["isel"].split(","):
                                d, r = item.split("=")
                                a, b = r.split(":")
                                key[d] = slice(int(a), int(b))
                            v = nc["sst"]
                            return v[tuple(key.get(d, slice(None)) for d in v.dimensions)].size

                        t_sub, _, n = index_subset(strata_url, name, p)
                    t_file, size, n_file = whole_file(nginx_url, name, select)
                    assert n == n_file, (name, label, n, n_file)
                    advice, estimate = fetch_advice(strata_url, name, kind, p, size, mbit)
                    results.append(
                        {
                            "mbit": mbit,
                            "dataset": name,
                            "kind": kind,
                            "selection": label,
                            "percent": pct,
                            "turn": turn,
                            "subset_s": t_sub,
                            "file_s": t_file,
                            "file_bytes": size,
                            "elements": n,
                            "advice": advice,
                            "estimate": estimate,
                        }
                    )
                    print(
                        f"{mbit:>5} Mb/s {name:9} {kind:11} {label:16} {pct:5.1f}%  subset {t_sub:7.3f} s  "
                        f"file {t_file:7.3f} s  x{t_file / t_sub:7.1f}",
                        flush=True,
                    )
    shape_link()
    return results


def streams(strata_url, tmp):
    shape_link(mbit=1000)
    out = []
    for window in (4 << 20, 1 << 20):
        proxy = DelayProxy(int(strata_url.rsplit(":", 1)[1]), window=window)
        proxy.start()
        ds = strata.remote.open(f"http://127.0.0.1:{proxy.port}/ersst_x4")
        for turn in range(TURNS):
            for n in (1, 4):
                t0 = time.perf_counter()
                size = ds.fetch(tmp / f"s{n}.nc", ["sst"], streams=n)
                sec = time.perf_counter() - t0
                out.append({"window": window, "streams": n, "turn": turn, "seconds": sec, "bytes": size})
                print(f"50 ms RTT, window {window >> 20} MiB, {n} streams: {sec:.2f} s for {size / 1e6:.0f} MB")
    shape_link()
    return out


def first_byte_and_memory(strata_url, pid):
    """A 1 GB result: seconds to its first byte, and the server's peak resident memory."""
    out = []
    for route in ("/api/subset/ersst_x24?vars=sst", "/dap/ersst_x24.dods?sst"):
        t0 = time.perf_counter()
        with urllib.request.urlopen(strata_url + route, timeout=600) as r:
            r.read(1)
            ttfb = time.perf_counter() - t0
            n = 1
            while chunk := r.read(1 << 20):
                n += len(chunk)
        total = time.perf_counter() - t0
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        hwm = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024
        out.append({"route": route, "ttfb_s": ttfb, "seconds": total, "bytes": n, "peak_rss": hwm})
        print(
            f"{route}: first byte {ttfb * 1e3:.0f} ms, {n / 1e9:.2f} GB in {total:.1f} s, "
            f"server peak RSS {hwm / 2**20:.0f} MiB",
            flush=True,
        )
    return out


def dap_vs_pydap(strata_url, pydap_urls):
    """netCDF4-python reading random boxes from strata's DAP2 and from pydap's server, in a
    client process without strata loaded (`dap_client.py`)."""
    rng = np.random.default_rng(7)
    out = []
    boxes = []
    for frac in (0.001, 0.01, 0.1):
        for _ in range(5):
            t = max(1, round(684 * frac ** (1 / 3)))
            la, lo = max(1, round(89 * frac ** (1 / 3))), max(1, round(180 * frac ** (1 / 3)))
            t0, a0, o0 = rng.integers(0, 684 - t + 1), rng.integers(0, 89 - la + 1), rng.integers(0, 180 - lo + 1)
            boxes.append((frac, (slice(t0, t0 + t), slice(a0, a0 + la), slice(o0, o0 + lo))))
    for turn in range(TURNS):
        plan, rows = [], []
        for k, ((file, name), (frac, key)) in enumerate(
            itertools.product(
                (("as shipped (contiguous)", "ersst"), ("deflate, a record per chunk", "ersst_deflate")), boxes
            )
        ):
            row = {"file": file, "fraction": frac, "turn": turn}
            servers = [
                ("strata", f"{strata_url}/dap/{name}"),
                ("in_place", f"{strata_url}/dap/{name}_in_place"),
                ("pydap", pydap_urls[name]),
            ]
            # Who goes first turns with each request: the request after pydap's shares the two
            # cores with its workers finishing (in a fixed order strata always came next).
            r = (k + turn) % len(servers)
            servers = servers[r:] + servers[:r]
            # The same box as a DAP2 constraint: the `.dods` response alone, fetched raw, is
            # the server's part of the request (netCDF4 adds its open and its own decoding).
            ce = "sst" + "".join(f"[{k.start}:1:{k.stop - 1}]" for k in key)
            for who, url in servers:
                box = [[int(k.start), int(k.stop)] for k in key]
                plan.append({"url": url, "box": box, "ce": ce, "row": len(rows), "who": who})
            rows.append(row)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
        done = subprocess.run(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dap_client.py"), str(ERSST)],
            input=json.dumps(plan),
            capture_output=True,
            text=True,
            check=True,
            env=env,
            timeout=1800,
        )
        for p, got in zip(plan, json.loads(done.stdout), strict=True):
            row = rows[p["row"]]
            row[p["who"] + "_error"] = got["error"]
            row[p["who"] + "_s"] = got["s"]
            row[p["who"] + "_dods_s"] = got["dods_s"]
        out += rows
    return out


def main() -> int:
    if os.geteuid() != 0 or not shutil.which("tc") or not shutil.which("ip") or not shutil.which("nginx"):
        print("bench_server needs root, iproute2 (ip, tc) and nginx (apt-get install nginx-light)", file=sys.stderr)
        return 1
    if not in_namespace():
        return reexec_in_namespace()
    files, stores, src = inputs()
    tmp = pathlib_tmp()
    procs, strata_url, nginx_url, pydap_urls = start_servers(files, stores, tmp)
    only = os.environ.get("BENCH_ONLY", "subset,streams,first_byte,dap").split(",")
    try:
        results = {
            "machine": machine(),
            "commit": git_rev(),
            "date": time.strftime("%Y-%m-%d"),
            "first_byte": first_byte_and_memory(strata_url, procs["strata"].pid) if "first_byte" in only else [],
            "subset": subset_vs_file(strata_url, nginx_url, src) if "subset" in only else [],
            "streams": streams(strata_url, tmp) if "streams" in only else [],
            "dap": dap_vs_pydap(strata_url, pydap_urls) if "dap" in only else [],
        }
    finally:
        shape_link()
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(timeout=30)
    out = ROOT / "bench" / "results"
    # A partial run (BENCH_ONLY) keeps the other sections of the last full run, with its commit.
    previous = json.loads((out / "server.json").read_text()) if (out / "server.json").exists() else {}
    for part in ("first_byte", "subset", "streams", "dap"):
        if part not in only and previous.get(part):
            results[part] = previous[part]
            # From the run that measured it (a partial run keeps what it kept).
            results.setdefault("kept", {})[part] = previous.get("kept", {}).get(part, previous.get("commit"))
    (out / "server.json").write_text(json.dumps(results, indent=1))
    (out / "server.md").write_text(report(results))
    print((out / "server.md").read_text())
    return 0


def pathlib_tmp():
    import pathlib

    return pathlib.Path(tempfile.mkdtemp(prefix="strata-bench-"))


def med(xs):
    return float(np.median(xs))


def report(r) -> str:
    lines = [
        "# Subsetting at the server (bench/bench_server.py)",
        "",
        "Command: `python bench/bench_server.py` (as root: it makes its own network namespace)  ",
        f"Machine: {r['machine']}  ",
        f"Commit: {r['commit']}, {r['date']}"
        + "".join(f"; section '{k}' from commit {c}" for k, c in r.get("kept", {}).items()),
        "",
        "Links are the namespace's loopback shaped by `tc` (tbf at the given rate, 1500-byte MTU). "
        "*Subset* is the answer from `strata serve`: value selections as points (coordinates and value, "
        "Arrow IPC compressed with zstd, decoded into a DataFrame by `strata.remote`), index and coordinate "
        "selections as NetCDF subsets opened by netCDF4. *File* is downloading the NetCDF file whole from "
        "nginx and selecting the same elements with NumPy. Times are end to end, medians over turns "
        f"({TURNS} at 1 Gb/s and 100 Mb/s, 1 at 20 Mb/s); *speed-up* is the median of per-turn ratios "
        "file / subset. *Advice* is what `strata fetch`'s estimate (`estimate=true`: the subset's size, exact "
        "for NetCDF subsets and sampled for points, and the cost model's time to cut it) says comes sooner on "
        "that link against this file (asked after each turn's downloads; the most frequent answer over turns), and "
        "whether the measured times agree.",
        "",
        "| link | dataset | selection | % of elements | subset s | file s | speed-up | advice |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keys = []
    for x in r["subset"]:
        k = (x["mbit"], x["dataset"], x["kind"], x["selection"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        xs = [x for x in r["subset"] if (x["mbit"], x["dataset"], x["kind"], x["selection"]) == k]
        ratio = med([x["file_s"] / x["subset_s"] for x in xs])
        said_each = [x.get("advice") for x in xs]
        advice = max(said_each, key=said_each.count)  # the most frequent over turns
        if advice is None:
            said = "—"
        else:
            right = (advice == "subset") == (ratio >= 1)
            said = f"{advice} ({'right' if right else 'wrong'})"
        lines.append(
            f"| {k[0]} Mb/s | {k[1]} ({xs[0]['file_bytes'] / 1e6:.0f} MB) | {k[2]}: {k[3]} | {xs[0]['percent']:.1f} "
            f"| {med([x['subset_s'] for x in xs]):.3f} | {med([x['file_s'] for x in xs]):.3f} | {ratio:.1f}x "
            f"| {said} |"
        )
    lines += [
        "",
        "## Parallel streams",
        "",
        f"`strata fetch` of ERSST x4 `sst` ({r['streams'][0]['bytes'] / 1e6:.0f} MB NetCDF) over a 1 Gb/s link "
        "(tbf) with 25 ms added each way (50 ms round trip) by a proxy in the benchmark that also holds each "
        "connection to a window of unacknowledged bytes, as TCP does (this kernel has no netem). The proxy is "
        "Python and itself moves at most about 55 MB/s; a window of W caps one connection at W / 50 ms.",
        "",
        "| window | 1 stream s | 4 streams s | 4 / 1 (median of paired turns) |",
        "|---|---|---|---|",
    ]
    for window in sorted({x["window"] for x in r["streams"]}, reverse=True):
        xs = [x for x in r["streams"] if x["window"] == window]
        s1 = [x["seconds"] for x in xs if x["streams"] == 1]
        s4 = [x["seconds"] for x in xs if x["streams"] == 4]
        ratios = [a / b for a, b in zip(s1, s4, strict=True)]
        lines.append(f"| {window >> 20} MiB | {med(s1):.2f} | {med(s4):.2f} | {med(ratios):.2f}x |")
    lines += [
        "",
        "## A 1 GB result: first byte and server memory",
        "",
        "ERSST x24 `sst` (1.05 GB of f32) on an unshaped loopback, read and discarded by the client.",
        "",
        "| route | first byte | whole response | bytes | server peak RSS (whole run so far) |",
        "|---|---|---|---|---|",
    ]
    for x in r["first_byte"]:
        lines.append(
            f"| `{x['route']}` | {x['ttfb_s'] * 1e3:.0f} ms | {x['seconds']:.1f} s | {x['bytes'] / 1e9:.2f} GB "
            f"| {x['peak_rss'] / 2**20:.0f} MiB |"
        )
    lines += [
        "",
        "## DAP2 hyperslabs: strata against pydap's server",
        "",
        "netCDF4-python opens the dataset and reads one random box of ERSST `sst` (0.1%, 1% and 10% of the "
        "elements; 5 boxes each, the same for every server; 3 turns; the three servers take turns going first), "
        "unshaped loopback, from: `strata serve` "
        "of the imported store (V-S); `strata serve` of the NetCDF file itself indexed in place (`strata index`); "
        "and pydap 3.5.9's DAP2 server (gunicorn, 2 workers) on the same NetCDF file, read lazily through "
        "netCDF4. Two files: ERSST as shipped (contiguous, uncompressed: pydap's best case) and the same field "
        "written as model output usually is (a record per chunk, shuffle + deflate 4). pydap reads "
        "through `bench/pydap_app.py` (pydap's own NetCDF handler fails every hyperslab, reshaping the subset "
        "to the whole variable, pydap/pydap#130). The client runs in a process of its own without strata "
        "loaded (`bench/dap_client.py`), as a user's does. Every answer is compared with the file's values. "
        "Times are medians; *x pydap* is the median of the per-request ratios.",
        "",
        "| file | box | strata store s | x pydap | strata, file in place s | x pydap | pydap s "
        "| answers equal (store / in place / pydap) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    files = list(dict.fromkeys(x.get("file", "as shipped (contiguous)") for x in r["dap"]))
    for file, frac in itertools.product(files, sorted({x["fraction"] for x in r["dap"]})):
        xs = [x for x in r["dap"] if x["fraction"] == frac and x.get("file", files[0]) == file]
        good = {w: sum(x.get(w + "_error", "") is None for x in xs) for w in ("strata", "in_place", "pydap")}
        ratio = {w: med([x["pydap_s"] / x[w + "_s"] for x in xs]) for w in ("strata", "in_place")}
        lines.append(
            f"| {file} | {frac * 100:g}% | {med([x['strata_s'] for x in xs]):.4f} | {ratio['strata']:.1f}x "
            f"| {med([x['in_place_s'] for x in xs]):.4f} | {ratio['in_place']:.1f}x "
            f"| {med([x['pydap_s'] for x in xs]):.4f} "
            f"| {good['strata']}/{good['in_place']}/{good['pydap']} of {len(xs)} |"
        )
    if all("strata_dods_s" in x for x in r["dap"]):
        lines += [
            "",
            "The server's part: the same boxes' `.dods` responses alone, fetched raw (urllib), and what "
            "a netCDF4-python request to strata takes beyond its `.dods` (the open's `.dds` and `.das` "
            "requests, and the client decoding the response; strata ends its `Data:` line as netCDF's "
            "library looks for first, so that library does not search the whole response, as it does "
            "for pydap's). "
            "The last column is pydap's time over that remainder: *x pydap* if strata's `.dods` took no "
            "time at all.",
            "",
            "| file | box | strata `.dods` s | pydap `.dods` s | x pydap (`.dods`) | netCDF4 beyond strata's `.dods` s "
            "| x pydap if strata's `.dods` took no time |",
            "|---|---|---|---|---|---|---|",
        ]
        for file, frac in itertools.product(files, sorted({x["fraction"] for x in r["dap"]})):
            xs = [x for x in r["dap"] if x["fraction"] == frac and x.get("file", files[0]) == file]
            client = med([x["strata_s"] - x["strata_dods_s"] for x in xs])
            lines.append(
                f"| {file} | {frac * 100:g}% | {med([x['strata_dods_s'] for x in xs]):.4f} "
                f"| {med([x['pydap_dods_s'] for x in xs]):.4f} "
                f"| {med([x['pydap_dods_s'] / x['strata_dods_s'] for x in xs]):.1f}x | {client:.4f} "
                f"| {med([x['pydap_s'] for x in xs]) / client:.1f}x |"
            )
    who = ("strata", "in_place", "pydap")
    errors = sorted({x[w + "_error"] for x in r["dap"] for w in who if x.get(w + "_error")})
    if errors:
        lines += ["", "Errors: " + "; ".join(f"`{e}`" for e in errors[:5])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

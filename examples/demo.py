"""The strata demo: import a dataset, show what was stored, and run example queries.

    make demo                      # a real file from ../shared/data, else a generated one
    make demo DATA=path/to/file.nc # your own file

Prints what it does and the figures (sizes, ratio, speeds, read latency).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np

import strata

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "demo-out"
PREFERRED = ROOT.parent / "shared" / "data" / "ersst_v3b_1960-2016_concat.nc"


def generated_dataset(path: pathlib.Path) -> pathlib.Path:
    """A CF dataset made here when no real file is at hand: 10 years of a smooth daily field."""
    import netCDF4

    rng = np.random.default_rng(0)
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 90)
        nc.createDimension("lon", 180)
        t = nc.createVariable("time", "f8", ("time",))
        t.units, t.calendar = "days since 2000-01-01", "standard"
        t[:] = np.arange(3650)
        nc.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-89, 89, 90)
        nc.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 358, 180)
        v = nc.createVariable("temp", "f4", ("time", "lat", "lon"), fill_value=np.float32(np.nan))
        v.units = "degC"
        lat = np.linspace(-89, 89, 90)[:, None]
        for t0 in range(0, 3650, 365):
            days = np.arange(t0, t0 + 365)[:, None, None]
            field = 28 * np.cos(np.radians(lat)) - 5 + 6 * np.sin(2 * np.pi * days / 365.25)
            v[t0 : t0 + 365] = (field + rng.normal(0, 0.3, (365, 90, 180))).astype("f4")
    return path


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run(cmd: list[str]) -> None:
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main() -> int:
    OUT.mkdir(exist_ok=True)
    if len(sys.argv) > 1 and sys.argv[1]:
        source = pathlib.Path(sys.argv[1])
    elif PREFERRED.exists():
        source = PREFERRED
    else:
        step("no real dataset at hand: generating one")
        source = generated_dataset(OUT / "generated.nc")
    store = OUT / (source.stem + ".strata")
    if store.exists():
        shutil.rmtree(store)
    strata_cli = str(pathlib.Path(sys.executable).parent / "strata")

    step(f"import {source.name} ({source.stat().st_size / 1e6:.1f} MB)")
    run([strata_cli, "import", str(source), str(store)])

    step("info")
    run([strata_cli, "info", str(store)])

    ds = strata.open(store)
    var = max(ds.data_vars.values(), key=lambda v: v.size)
    step(f"queries on '{var.name}' {var.shape}")
    t0 = time.perf_counter()
    first = var[(0,) * var.ndim] if var.ndim else var[()]
    print(f"one element {var.dims}: {first!r}  ({(time.perf_counter() - t0) * 1e3:.2f} ms)")
    if var.ndim >= 2:
        box = tuple(slice(n // 3, n // 3 + max(1, n // 10)) for n in var.shape)
        t0 = time.perf_counter()
        sub = var[box]
        dt = time.perf_counter() - t0
        print(
            f"box {[(b.start, b.stop) for b in box]}: shape {sub.shape}, {sub.nbytes / 1e3:.0f} kB "
            f"in {dt * 1e3:.2f} ms, read {ds.read_stats()}"
        )
    coords_1d = [d for d in var.dims if d in ds.coords]
    if coords_1d:
        dim = coords_1d[-1]
        index = ds.coordinate_index(dim)
        lo, hi = index[len(index) // 4], index[len(index) // 2]
        sel = var.sel(**{dim: slice(lo, hi)})
        print(f"sel {dim}={lo}..{hi}: shape {sel.shape}")
    if ds.record_dim and ds.record_dim in ds.coords and ds.record_dim in var.dims:
        index = ds.coordinate_index(ds.record_dim)
        if hasattr(index, "year"):
            year = str(index[len(index) // 2].year)
            out = OUT / f"{var.name}_{year}.nc"
            step(f"subset one year to NetCDF on the command line ({year})")
            run([strata_cli, "query", str(store), var.name, "--sel", f"{ds.record_dim}={year}:{year}", "-o", str(out)])

    if var.dtype.kind == "f" and var.ndim >= 2:
        binned = OUT / (source.stem + ".binned.strata")
        if binned.exists():
            shutil.rmtree(binned)
        step("value queries: import again with layout V-M-S (value bins, byte groups)")
        run([strata_cli, "import", str(source), str(binned), "--layout", "V-M-S", "--bins", "16", "-q"])
        sample = var[(slice(0, 1),) + (slice(None),) * (var.ndim - 1)].astype("f8").ravel()
        sample = sample[np.isfinite(sample)]
        if sample.size:
            threshold = float(np.percentile(sample, 99))
            where = f"{var.name} > {threshold:.6g}"
            run([strata_cli, "query", str(binned), var.name, "--where", where, "--output", "count"])
            points = ["--output", "points", "--max-print", "10"]
            run([strata_cli, "query", str(binned), var.name, "--where", where, *points])

    step("serve the stores over HTTP and OPeNDAP, subset at the server")
    serve_demo(strata_cli, store, var)

    step("the same store through xarray (lazy)")
    xds = strata.open(store).to_xarray()
    print(xds)
    step("versions")
    run([strata_cli, "log", str(store)])
    print(f"\nstore written to {store}")
    return 0


def serve_demo(strata_cli: str, store: pathlib.Path, var) -> None:
    """`strata serve` on a free loopback port (it stops by itself after a minute), read by
    netCDF's own DAP client and by strata.remote."""
    import re

    import netCDF4

    log = OUT / "serve.log"
    with open(log, "w") as err:
        cmd = [strata_cli, "serve", str(OUT), "--port", "0", "--max-seconds", "60", "--quiet"]
        print("$ " + " ".join(cmd), flush=True)
        proc = subprocess.Popen(cmd, stderr=err)
    try:
        m = None
        for _ in range(200):
            m = re.search(r"https?://127\.0\.0\.1:\d+", log.read_text())
            if m or proc.poll() is not None:
                break
            time.sleep(0.05)
        if not m:
            print(f"the server did not start: {log.read_text()}")
            return
        base, name = m.group(0), store.name
        print(f"listening on {base}/  (web page at {base}/, DAP2 at {base}/dap/{name})")
        t0 = time.perf_counter()
        with netCDF4.Dataset(f"{base}/dap/{name}") as nc:
            key = tuple(slice(0, min(3, n)) for n in nc[var.name].shape)
            got = nc[var.name][key]
        print(
            f"netCDF4 over DAP2: {var.name}{[f'0:{k.stop}' for k in key]} -> shape {got.shape} "
            f"({(time.perf_counter() - t0) * 1e3:.0f} ms)"
        )
        remote = strata.remote.open(f"{base}/{name}")
        print(f"strata.remote: {len(remote.variables)} variables, dims {remote.dims}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())

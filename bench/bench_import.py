"""The default import (`strata import` with no options: codec auto, objective balanced)
against netCDF4 zlib-4 + shuffle for size and python-blosc2 (zstd 5 + shuffle, its default
chunking) for write speed, on every numeric variable of at least 1 MB in ../shared/data;
and whether the plan stays the same when both cores are busy.

    python bench/bench_import.py          # writes bench/results/import.md and import.json
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import time

import blosc2
import h5py
import netCDF4
import numpy as np
from common import DATA, WORK, dir_size, fresh, report_header, write_results

import strata

TURNS = 3
MIN_BYTES = 1 << 20
# python-blosc2 as the peer writes: zstd 5 + shuffle, its own chunks and blocks.
BLOSC2_CPARAMS = blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=5, filters=[blosc2.Filter.SHUFFLE])


def variables(min_bytes: int = MIN_BYTES, max_bytes: float = float("inf")):
    """(file, name, raw array, dims) of every numeric variable of `min_bytes` to `max_bytes`
    (by default at least 1 MB)."""
    for path in sorted(DATA.glob("*.nc")):
        with netCDF4.Dataset(path) as nc:
            for name, v in nc.variables.items():
                if v.dtype == str or np.dtype(v.dtype).kind not in "iuf":
                    continue
                if not min_bytes <= v.size * np.dtype(v.dtype).itemsize <= max_bytes:
                    continue
                v.set_auto_maskandscale(False)
                yield path.name, name, np.ascontiguousarray(v[...]), v.dimensions


def write_nc(path, name, arr, dims, **kw):
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        for d, n in zip(dims, arr.shape, strict=True):
            nc.createDimension(d, n)
        v = nc.createVariable(name, arr.dtype, dims, **kw)
        v.set_auto_maskandscale(False)
        v[...] = arr


def zlib_bytes(path, name) -> int:
    """Bytes netCDF4 stored for the variable's data (HDF5's storage size: no header)."""
    with h5py.File(path, "r") as f:
        return f[name].id.get_storage_size()


def copies(name, arr, dims):
    """The variable alone in an uncompressed NetCDF-4 file (what the import reads), and the
    bytes netCDF4 stores it in with zlib 4 + shuffle."""
    src = fresh(WORK / "import_src.nc")
    write_nc(src, name, arr, dims)
    zsrc = fresh(WORK / "import_zlib.nc")
    write_nc(zsrc, name, arr, dims, zlib=True, complevel=4, shuffle=True)
    return src, zlib_bytes(zsrc, name)


def strata_import(src, name, codec=None):
    """`strata.import_file` with no options, or with `codec` given (no planning)."""
    store = fresh(WORK / "import.strata")
    t0 = time.perf_counter()
    if codec is None:
        strata.import_file(src, store)
    else:
        strata.import_file(src, store, codec=codec)
    seconds = time.perf_counter() - t0
    var = strata.open(store)[name]
    return seconds, strata.open(store).stats()[name]["stored_bytes"], var.plan


def blosc2_write(arr, durable: bool = False) -> tuple[float, int]:
    """blosc2 writing `arr`; `durable` also flushes the file and its directory entry to disk
    before the clock stops, as strata's import does for its files (fsync of the segments,
    the manifest and the directory) so that a crash cannot lose a finished import."""
    out = fresh(WORK / "import.b2nd")
    t0 = time.perf_counter()
    blosc2.asarray(
        arr,
        urlpath=str(out),
        mode="w",
        cparams=BLOSC2_CPARAMS,
    )
    if durable:
        for path in (out, out.parent):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return time.perf_counter() - t0, dir_size(out)


def spin(stop):
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    for file, name, arr, dims in variables():
        src, zbytes = copies(name, arr, dims)
        pairs, durable_pairs, given_pairs, raw_pairs, times, plan, stored, b2_bytes = [], [], [], [], [], None, 0, 0
        for turn in range(TURNS):
            # Alternate who goes first, so a drift in the machine's speed hits both.
            if turn % 2:
                tb, b2_bytes = blosc2_write(arr)
                tbd, _ = blosc2_write(arr, durable=True)
                ts, stored, plan = strata_import(src, name)
            else:
                ts, stored, plan = strata_import(src, name)
                tbd, _ = blosc2_write(arr, durable=True)
                tb, b2_bytes = blosc2_write(arr)
            pairs.append(tb / ts)
            durable_pairs.append(tbd / ts)
            times.append(ts)
            # The same import with the chosen chain given: what the import would take if
            # planning were free.
            given_s, _, _ = strata_import(src, name, codec=plan["chosen"] if plan else None)
            given_pairs.append(tb / given_s)
            # And with no codec at all: the import's own costs (reading the NetCDF file,
            # writing every byte, the durable commit) against blosc2's whole write.
            raw_s, _, _ = strata_import(src, name, codec="raw")
            raw_pairs.append(tb / raw_s)
        # The same import while two processes keep both cores busy: the plan must not move.
        stop = mp.Event()
        load = [mp.Process(target=spin, args=(stop,)) for _ in range(2)]
        for p in load:
            p.start()
        try:
            _, stored_loaded, plan_loaded = strata_import(src, name)
        finally:
            stop.set()
            for p in load:
                p.join()
        chain = plan["chosen"] if plan else "shuffle+zstd:3"
        declared = next((s["decode_mb_s"] for s in (plan or {}).get("scores", []) if s["chain"] == chain), None)
        (one,) = strata.analyze(src, [name], candidates=[chain], samples=16, min_seconds=0.2)
        row = {
            "file": file,
            "variable": name,
            "dtype": str(arr.dtype),
            "raw_bytes": arr.nbytes,
            "chain": chain,
            "ratio": arr.nbytes / stored,
            "zlib_ratio": arr.nbytes / zbytes,
            "blosc2_ratio": arr.nbytes / b2_bytes,
            "size_vs_zlib": stored / zbytes,
            "speed_vs_blosc2": statistics.median(pairs),
            "pairs": pairs,
            "speed_vs_blosc2_durable": statistics.median(durable_pairs),
            "speed_vs_blosc2_plan_given": statistics.median(given_pairs),
            "speed_vs_blosc2_no_codec": statistics.median(raw_pairs),
            "import_mb_s": arr.nbytes / 1e6 / statistics.median(times),
            "same_plan_under_load": plan_loaded == plan and stored_loaded == stored,
            "declared_decode_mb_s": declared,
            "measured_decode_mb_s": one.scores[0].measured_decode_mb_s,
        }
        rows.append(row)
        print(
            f"{file[:28]:28} {name[:16]:16} {chain:34} size/zlib {row['size_vs_zlib']:.3f} "
            f"speed/blosc2 {row['speed_vs_blosc2']:.2f} same-under-load {row['same_plan_under_load']}",
            flush=True,
        )
    print(write_results("import", rows, report, fixed_cost_ms=fixed_cost_ms())[-1200:])


def fixed_cost_ms(runs: int = 30) -> float:
    """The median time of a whole default import of a file holding 16 floats: what every
    import pays whatever its size (opening the file, the writer, the durable commit)."""
    src = fresh(WORK / "import_tiny.nc")
    write_nc(src, "x", np.arange(16, dtype="f4"), ("n",))
    return 1e3 * statistics.median(strata_import(src, "x")[0] for _ in range(runs))


def report(results) -> str:
    rows = results["rows"]
    fixed_ms = results.get("fixed_cost_ms", float("nan"))
    lines = [
        *report_header(
            "Default import: size against netCDF4, speed against python-blosc2, reproducibility",
            "`python bench/bench_import.py` (release build: `make build` first)",
            results,
        ),
        "Every numeric variable of at least 1 MB in `../shared/data`, written alone to an "
        "uncompressed NetCDF-4 file. strata: `strata.import_file(copy, store)` with no options "
        "(codec auto, objective balanced), timed end to end (reading the file included). "
        "netCDF4: the same variable with zlib 4 + shuffle and netCDF's default chunking; size = "
        "HDF5's storage size of the variable. python-blosc2: `blosc2.asarray` of the in-memory "
        "array to a file with zstd 5 + shuffle and its own default chunking (both cores). "
        f"Speed = blosc2's time / strata's, median of {TURNS} paired turns (order alternated; "
        "above 1: strata faster); `durable`: blosc2 also fsyncs its file and directory before its "
        "clock stops, as strata's import does for its files and for the directories that name them "
        "(docs/format.md; strata also opens the NetCDF file, which blosc2 is spared). Under load: "
        "the same import again while two processes keep both cores busy; the plan and the stored "
        "bytes must be identical. Decode: the chosen "
        "chain as declared (what the planner ranks by) and as measured by `strata analyze` on one "
        "core (16 sample blocks, 0.2 s). `plan given`: the same import with the chosen chain "
        "given (`codec=...`, no planning), against the same blosc2 write: what a free planner "
        'would leave. `no codec`: the same import with `codec="raw"` (nothing compressed): what the '
        "import's own costs leave (reading the NetCDF file, writing every byte, the durable commit). "
        f"`fixed cost`: the whole import of a file holding one variable of 16 floats, {fixed_ms:.2f} ms "
        "(median of 30).",
        "",
        "| file | variable | type | MB | chain chosen | ratio | netCDF4 zlib ratio | size / netCDF4 "
        "| blosc2 ratio | import MB/s | speed vs blosc2 | durable | plan given | same plan under load "
        "| no codec | decode MB/s declared | measured |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['file']} | {r['variable']} | {r['dtype']} | {r['raw_bytes'] / 1e6:.1f} | `{r['chain']}` "
            f"| {r['ratio']:.3f} | {r['zlib_ratio']:.3f} | {r['size_vs_zlib']:.3f} | {r['blosc2_ratio']:.3f} "
            f"| {r['import_mb_s']:.0f} | {r['speed_vs_blosc2']:.2f} | {r['speed_vs_blosc2_durable']:.2f} "
            f"| {r.get('speed_vs_blosc2_plan_given', float('nan')):.2f} "
            f"| {'yes' if r['same_plan_under_load'] else 'NO'} "
            f"| {r.get('speed_vs_blosc2_no_codec', float('nan')):.2f} "
            f"| {r['declared_decode_mb_s'] or float('nan'):.0f} | {r['measured_decode_mb_s']:.0f} |"
        )
    smaller = sum(r["size_vs_zlib"] <= 1 for r in rows)
    faster = sum(r["speed_vs_blosc2"] >= 1 for r in rows)
    faster_durable = sum(r["speed_vs_blosc2_durable"] >= 1 for r in rows)
    durable = [r["speed_vs_blosc2_durable"] for r in rows]
    same = sum(r["same_plan_under_load"] for r in rows)
    fast_decode = sum(r["measured_decode_mb_s"] >= 1000 for r in rows)
    sizes = [r["size_vs_zlib"] for r in rows]
    speeds = [r["speed_vs_blosc2"] for r in rows]
    given = [r.get("speed_vs_blosc2_plan_given", float("nan")) for r in rows]
    bare = [r.get("speed_vs_blosc2_no_codec", float("nan")) for r in rows]
    lines += [
        "",
        f"- Size at most netCDF4's: {smaller} of {len(rows)} variables (size / netCDF4: median "
        f"{statistics.median(sizes):.3f}, worst {max(sizes):.3f}).",
        f"- Import at least as fast as python-blosc2: {faster} of {len(rows)} (median ratio "
        f"{statistics.median(speeds):.2f}, worst {min(speeds):.2f}); against blosc2 flushing its file "
        f"to disk too: {faster_durable} of {len(rows)} (median {statistics.median(durable):.2f}, worst "
        f"{min(durable):.2f}); with the plan given (no planning): {sum(g >= 1 for g in given)} of "
        f"{len(rows)} (median {statistics.median(given):.2f}, worst {min(given):.2f}); with no codec at all: "
        f"{sum(b >= 1 for b in bare)} of {len(rows)} (median {statistics.median(bare):.2f}, worst {min(bare):.2f}).",
        f"- Same plan and size under load: {same} of {len(rows)}.",
        f"- Chosen chain measured at ≥ 1 GB/s decode on one core: {fast_decode} of {len(rows)}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

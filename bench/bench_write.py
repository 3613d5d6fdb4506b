"""Writing a time series as a simulation produces it, one time step at a time.

The stream: ERSST's sea surface temperature (89 x 180, float32, 64 KB a step), its 684
months repeated with a drift of +0.01 degC per repetition over the ocean (land keeps the
fill value), 16,384 steps = 1.05 GB. Every writer gets the same steps. (Tiling the field
in space instead would repeat each step's values exactly, which compressors with windows
wider than a tile find: a ratio the data does not have.)

Measured, in turns so that paired ratios cancel the machine's drift:

- strata.Writer with layout S, M-S and V-S (the same codec), and S followed by a re-layout
  into V-S (read back, written again): PARLO's question, layout at write time or after;
- peers writing the same steps: netCDF4 (zlib 4 + shuffle, one chunk per step), HDF5 via
  h5py + hdf5plugin Blosc2 (zstd 5 + shuffle, one chunk per step), Zarr v3 through Dask
  (Blosc zstd 5 + shuffle, 16-step chunks), ADIOS2 BP5 (see the note on its operator);
- parallel writers under mpirun (bench/write_mpi.py): 1 rank against 2 ranks, one core
  each, in the dense, hybrid and subfiles placements (time, files, bytes), every store read
  back and compared with the stream.

    python bench/bench_write.py            # about 15 minutes; BENCH_STEPS=512 for a quick run
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import netCDF4
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA, ROOT, WORK, dir_size, fresh, git_rev, machine

import strata

STEPS = int(os.environ.get("BENCH_STEPS", "16384"))
TURNS = int(os.environ.get("BENCH_TURNS", "3"))
CODEC = "shuffle+zstd:3"  # strata's default chain; `auto` is measured too
FILL = np.float32(-999.0)


def months() -> np.ndarray:
    with netCDF4.Dataset(DATA / "ersst_v3b_1960-2016_concat.nc") as nc:
        nc.set_auto_maskandscale(False)
        sst = nc["sst"][:]
    return np.ascontiguousarray(sst)  # (684, 89, 180)


BASE = months()
SEA = BASE != FILL


def steps():
    """The stream, one step at a time: views into one cycle of the base months, refilled in
    place for each repetition (every writer here copies or writes a step before asking for
    the next). A new 44 MB cycle per repetition cost every run ~1 GB of fresh pages to fault
    in, and the noise of that, in every writer's time."""
    cycle = np.full_like(BASE, FILL)
    for t in range(STEPS):
        if t % len(BASE) == 0:
            np.add(BASE, np.float32(0.01 * (t // len(BASE))), out=cycle, where=SEA)
        yield t, cycle[t % len(BASE)]


def step_at(t: int) -> np.ndarray:
    v = BASE[t % len(BASE)]
    return np.where(SEA[t % len(BASE)], v + np.float32(0.01 * (t // len(BASE))), FILL).astype("f4")


RAW = STEPS * BASE[0].nbytes


def synced(fn):
    """Runs a writer and flushes what it wrote to disk (strata syncs its files; the peers
    would leave them in the page cache): every writer pays for durability."""
    t0 = time.perf_counter()
    fn()
    os.sync()
    return time.perf_counter() - t0


# ---- strata -------------------------------------------------------------------------

NY, NX = BASE.shape[1:]
DIMS = {"time": None, "lat": NY, "lon": NX}


def strata_write(path, layout, codec=CODEC, **kw):
    variables = {"time": ("f8", "time"), "sst": ("f4", ("time", "lat", "lon"), {"_FillValue": FILL})}
    opts = {"layout": layout, "codec": codec, **kw}
    if "V" in layout:
        opts.setdefault("binning", "equal-frequency")
    with strata.Writer.create(path, dims=DIMS, variables=variables, **opts) as w:
        for t, step in steps():
            w.append(time=float(t), sst=step)


def strata_relayout(src, path, layout="V-S"):
    """The store written in S laid out again: read back slab by slab, written anew."""
    ds = strata.open(src)
    variables = {"time": ("f8", "time"), "sst": ("f4", ("time", "lat", "lon"), {"_FillValue": FILL})}
    n = ds.manifest["slab_records"]
    with strata.Writer.create(
        path, dims=DIMS, variables=variables, layout=layout, codec=CODEC, binning="equal-frequency"
    ) as w:
        for t0 in range(0, STEPS, n):
            w.append(time=ds["time"][t0 : t0 + n], sst=ds["sst"][t0 : t0 + n])


# ---- peers --------------------------------------------------------------------------


def netcdf_write(path):
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", NY)
        nc.createDimension("lon", NX)
        tv = nc.createVariable("time", "f8", ("time",))
        v = nc.createVariable(
            "sst",
            "f4",
            ("time", "lat", "lon"),
            zlib=True,
            complevel=4,
            shuffle=True,
            chunksizes=(1, NY, NX),
            fill_value=FILL,
        )
        for t, step in steps():
            tv[t] = t
            v[t] = step


def hdf5_write(path):
    import h5py
    import hdf5plugin

    with h5py.File(path, "w") as f:
        d = f.create_dataset(
            "sst",
            shape=(0, NY, NX),
            maxshape=(None, NY, NX),
            chunks=(1, NY, NX),
            dtype="f4",
            **hdf5plugin.Blosc2(cname="zstd", clevel=5, filters=hdf5plugin.Blosc2.SHUFFLE),
        )
        for t, step in steps():
            d.resize(t + 1, axis=0)
            d[t] = step


def zarr_dask_write(path):
    import dask
    import dask.array as da
    import zarr
    from zarr.codecs import BloscCodec, BloscShuffle

    chunk = 16

    def block(block_info=None):
        lo, hi = block_info[None]["array-location"][0]
        return np.stack([step_at(t) for t in range(lo, hi)])

    arr = da.map_blocks(
        block,
        dtype="f4",
        chunks=((chunk,) * (STEPS // chunk) + ((STEPS % chunk,) if STEPS % chunk else ()), (NY,), (NX,)),
    )
    z = zarr.create_array(
        str(path),
        shape=(STEPS, NY, NX),
        chunks=(chunk, NY, NX),
        dtype="f4",
        zarr_format=3,
        compressors=BloscCodec(cname="zstd", clevel=5, shuffle=BloscShuffle.shuffle),
        fill_value=FILL,
    )
    with dask.config.set(scheduler="threads", num_workers=os.cpu_count()):
        da.store(arr, z, lock=False)


def adios2_write(path):
    import adios2

    b = adios2.bindings
    ad = b.ADIOS()
    io = ad.DeclareIO("writer")
    io.SetEngine("BP5")
    var = io.DefineVariable("sst", BASE[0], [NY, NX], [0, 0], [NY, NX], True)
    engine = io.Open(str(path), b.Mode.Write)
    for _, step in steps():
        engine.BeginStep()
        engine.Put(var, step, b.Mode.Sync)
        engine.EndStep()
    engine.Close()


def adios2_blosc_available() -> str:
    import adios2

    try:
        adios2.bindings.ADIOS().DefineOperator("probe", "blosc", {})
        return ""
    except Exception as err:
        return str(err).split(":")[-1].strip().replace("\x1b[0m", "")


# ---- parallel -----------------------------------------------------------------------


def mpi_run(ranks: int, placement: str, out) -> dict:
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        RAYON_NUM_THREADS="1",
        BENCH_STEPS=str(STEPS),
    )
    cmd = [
        "mpirun",
        "--oversubscribe",
        "--bind-to",
        "core",
        "-n",
        str(ranks),
        sys.executable,
        "-m",
        "mpi4py",
        str(ROOT / "bench" / "write_mpi.py"),
        str(out),
        placement,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def same_as_stream(path) -> bool:
    ds = strata.open(path)
    n = 256
    for t0 in range(0, STEPS, n):
        got = ds["sst"][t0 : t0 + n]
        want = np.stack([step_at(t) for t in range(t0, min(STEPS, t0 + n))])
        if got.tobytes() != want.tobytes():
            return False
    return True


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    res = ROOT / "bench" / "results"
    if os.environ.get("BENCH_ONLY") == "parallel":  # the parallel runs again, the rest kept
        out = json.loads((res / "write.json").read_text())
        out["parallel"] = parallel_runs()
        out["parallel_commit"] = git_rev()
        (res / "write.json").write_text(json.dumps(out, indent=1))
        (res / "write.md").write_text(report(out))
        print(report(out))
        return
    out = {"commit": git_rev()}
    gen = synced(lambda: [None for _ in steps()])
    runs = {
        "strata S": lambda p: strata_write(p, "S"),
        "strata M-S": lambda p: strata_write(p, "M-S"),
        "strata V-S": lambda p: strata_write(p, "V-S"),
        "strata S auto": lambda p: strata_write(p, "S", codec="auto"),
        "netCDF4 zlib": netcdf_write,
        "HDF5 Blosc2": hdf5_write,
        "Zarr v3 Dask": zarr_dask_write,
        "ADIOS2 BP5": adios2_write,
    }
    ext = {"netCDF4 zlib": ".nc", "HDF5 Blosc2": ".h5", "Zarr v3 Dask": ".zarr", "ADIOS2 BP5": ".bp"}
    per_turn = {name: [] for name in runs}
    per_turn["strata S then re-layout"] = []
    sizes = {}
    for turn in range(TURNS):
        names = list(runs)
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            path = fresh(WORK / ("write-" + name.replace(" ", "_") + ext.get(name, ".strata")))
            took = synced(lambda p=path, f=runs[name]: f(p))
            per_turn[name].append(took)
            sizes[name] = dir_size(path)
            if name == "strata S":
                relaid = fresh(WORK / "write-relayout.strata")
                per_turn["strata S then re-layout"].append(
                    took + synced(lambda p=path, r=relaid: strata_relayout(p, r))
                )
                sizes["strata S then re-layout"] = dir_size(relaid)
            print(f"turn {turn}: {name}: {took:.2f} s, ratio {RAW / sizes[name]:.2f}", flush=True)
    out["single"] = {
        name: {
            "seconds": statistics.median(ts),
            "best": min(ts),
            "bytes": sizes[name],
            "ratio": RAW / sizes[name],
            "mb_s": RAW / 1e6 / min(ts),
        }
        for name, ts in per_turn.items()
    }

    def paired(a, b):
        return statistics.median(x / y for x, y in zip(per_turn[a], per_turn[b], strict=True))

    out["paired"] = {
        "M-S / S": paired("strata M-S", "strata S"),
        "V-S / S": paired("strata V-S", "strata S"),
        "(S then re-layout) / V-S": paired("strata S then re-layout", "strata V-S"),
        **{
            f"{peer} / strata S": paired(peer, "strata S")
            for peer in ("netCDF4 zlib", "HDF5 Blosc2", "Zarr v3 Dask", "ADIOS2 BP5")
        },
        **{
            f"{peer} / strata S auto": paired(peer, "strata S auto")
            for peer in ("netCDF4 zlib", "HDF5 Blosc2", "Zarr v3 Dask", "ADIOS2 BP5")
        },
    }
    out["adios2_blosc"] = adios2_blosc_available() or "available"
    out["generation_seconds"] = gen

    out["simulation"] = simulation_runs()
    out["parallel"] = parallel_runs()
    out["parallel_commit"] = git_rev()
    (res / "write.json").write_text(json.dumps(out, indent=1))
    (res / "write.md").write_text(report(out))
    print(report(out))
    shutil.rmtree(WORK / "write-relayout.strata", ignore_errors=True)


def simulation_runs() -> dict:
    """A model computing while it writes (a 512 x 1024 f32 diffusion, three stencil passes a
    step, 300 steps = 630 MB): its compute alone, then writing each step with slabs written
    in the model's thread, then on the writer's own thread (the default)."""
    ny, nx, nsteps = 512, 1024, 300

    def model(write: bool, overlap: bool) -> float:
        path = fresh(WORK / "write-sim.strata")
        f = np.sin(np.arange(ny * nx, dtype="f4")).reshape(ny, nx) * 10 + 280
        dims, variables = {"time": None, "y": ny, "x": nx}, {"t": ("f4", ("time", "y", "x"))}
        w = strata.Writer.create(path, dims=dims, variables=variables, overlap=overlap) if write else None
        t0 = time.perf_counter()
        for _ in range(nsteps):
            for _ in range(3):
                f = f + np.float32(0.1) * (
                    np.roll(f, 1, 0) + np.roll(f, -1, 0) + np.roll(f, 1, 1) + np.roll(f, -1, 1) - 4 * f
                )
            if w is not None:
                w.append(t=f)
        if w is not None:
            w.commit()
            os.sync()
        return time.perf_counter() - t0

    runs = {
        "compute alone": (False, False),
        "writing in the model's thread": (True, False),
        "writing on the writer's thread": (True, True),
    }
    times = {k: [] for k in runs}
    for _ in range(TURNS):
        for name, (write, overlap) in runs.items():
            times[name].append(model(write, overlap))
    return {name: statistics.median(ts) for name, ts in times.items()}


def parallel_runs() -> dict:
    """1 against 2 MPI ranks, one core each, in every placement."""
    par = {}
    for ranks, placement in [(1, "dense"), (2, "dense"), (2, "hybrid"), (2, "subfiles")]:
        path = fresh(WORK / f"write-mpi-{ranks}-{placement}.strata")
        times = []
        for _ in range(TURNS):
            fresh(path)
            times.append(mpi_run(ranks, placement, path)["seconds"])
        m = strata.open(path).manifest
        par[f"{ranks} {placement}"] = {
            "seconds": statistics.median(times),
            "times": times,
            "files": len(m["files"]),
            "bytes": dir_size(path),
            "bit_exact": same_as_stream(path),
        }
        print(f"mpi {ranks} {placement}: {times}", flush=True)
    one = par["1 dense"]["times"]
    for r in par.values():
        r["speedup"] = statistics.median(a / b for a, b in zip(one, r["times"], strict=True))
    return par


def report(out) -> str:
    s = out["single"]
    lines = [
        "# Writing a time series one step at a time",
        "",
        f"`python bench/bench_write.py` — commit {out.get('commit', '?')}, {machine()}, {time.strftime('%Y-%m-%d')}.",
        "",
        f"{STEPS} steps of ERSST sst ({NY} x {NX} float32, drift +0.01 per 684-step repetition): "
        f"{RAW / 1e9:.2f} GB raw. Each time includes flushing the output to disk (`os.sync`). "
        f"{TURNS} turns in rotating order; times are medians, ratios are medians of ratios paired by turn. "
        f"Making the steps alone takes {out['generation_seconds']:.2f} s (in every time).",
        "",
        "| writer | median s | MB/s (best) | stored MB | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in s.items():
        lines.append(f"| {name} | {r['seconds']:.2f} | {r['mb_s']:.0f} | {r['bytes'] / 1e6:.1f} | {r['ratio']:.2f} |")
    lines += ["", "| paired ratio | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in out["paired"].items()]
    lines += [
        "",
        f"ADIOS2's Blosc operator: {out['adios2_blosc']} (the adios2 wheels on PyPI, 2.10.0 to 2.12.1, ship "
        "without it), so ADIOS2 BP5 is measured without an operator: its ratio is 1.",
        "",
        "## A model computing while it writes",
        "",
        "A 512 x 1024 float32 diffusion (three stencil passes a step) writing 300 steps (630 MB) through "
        "strata.Writer: slabs written in the model's thread, or on the writer's own thread while the model "
        "computes the next steps (the default).",
        "",
        "| run | median s |",
        "|---|---:|",
        *[f"| {k} | {v:.2f} |" for k, v in out.get("simulation", {}).items()],
        "",
        "## Parallel writers (mpirun, one core per rank: RAYON_NUM_THREADS=1)",
        "",
        f"`BENCH_ONLY=parallel python bench/bench_write.py` reruns this part alone (commit "
        f"{out.get('parallel_commit', '?')}). Each rank computes only its own block of its own steps. "
        f"Speed-ups are medians of ratios paired by turn against 1 rank.",
        "",
        "| ranks, placement | median s | speed-up over 1 rank | files | stored MB | bit-exact |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for k, r in out["parallel"].items():
        lines.append(
            f"| {k} | {r['seconds']:.2f} | {r['speedup']:.2f} | {r['files']} | {r['bytes'] / 1e6:.1f} | "
            f"{'yes' if r['bit_exact'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

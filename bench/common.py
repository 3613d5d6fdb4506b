"""Shared helpers for the benchmarks: datasets, peers' writers and readers, timing."""

from __future__ import annotations

import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
WORK = ROOT / "bench" / "work"


def write_ersst_deflate(path: pathlib.Path, repeats: int = 1) -> None:
    """ERSST ``sst`` as NetCDF-4 model output is usually written: a record per chunk,
    shuffle + deflate level 4, the field ``repeats`` times along time (times continuing).
    Written under a temporary name: an interrupted run leaves no half file to reuse."""
    import netCDF4
    import numpy as np

    with netCDF4.Dataset(DATA / "ersst_v3b_1960-2016_concat.nc") as src:
        src.set_auto_maskandscale(False)
        sst = np.asarray(src["sst"][...])
        lat, lon, tm = src["lat"][...], src["lon"][...], np.asarray(src["time"][...])
    tmp = path.with_suffix(".tmp")
    with netCDF4.Dataset(tmp, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", lat.size)
        nc.createDimension("lon", lon.size)
        nc.createVariable("lat", "f4", ("lat",))[:] = lat
        nc.createVariable("lon", "f4", ("lon",))[:] = lon
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 1960-01-01"
        v = nc.createVariable(
            "sst",
            "f4",
            ("time", "lat", "lon"),
            zlib=True,
            complevel=4,
            shuffle=True,
            chunksizes=(1, lat.size, lon.size),
            fill_value=np.float32(-999),
        )
        n = sst.shape[0]
        for k in range(repeats):
            v[k * n : (k + 1) * n] = sst
            t[k * n : (k + 1) * n] = tm + k * (tm[-1] - tm[0] + 30)
    os.replace(tmp, path)


def dir_size(path: pathlib.Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def fresh(path: pathlib.Path) -> pathlib.Path:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    return path


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def git_rev() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    except OSError:
        return "?"


def random_boxes(shape, fraction: float, n: int, rng) -> list[tuple[slice, ...]]:
    """``n`` random boxes each holding about ``fraction`` of the elements: every axis gets
    the same share ``fraction ** (1/ndim)`` of its length."""
    share = fraction ** (1 / len(shape))
    boxes = []
    for _ in range(n):
        box = []
        for length in shape:
            size = max(1, round(length * share))
            start = int(rng.integers(0, length - size + 1))
            box.append(slice(start, start + size))
        boxes.append(tuple(box))
    return boxes


__all__ = [
    "DATA",
    "WORK",
    "best",
    "dir_size",
    "fresh",
    "git_rev",
    "interleaved",
    "machine",
    "random_boxes",
    "write_results",
]


def write_results(stem: str, rows: list, report, **figures) -> str:
    """Writes ``results/<stem>.json`` (the rows and any other ``figures``, with the machine,
    commit and date) and ``results/<stem>.md`` (``report`` of that); returns the Markdown."""
    import json

    results = {"machine": machine(), "commit": git_rev(), "date": time.strftime("%Y-%m-%d"), "rows": rows, **figures}
    out = WORK.parent / "results"
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    text = report(results)
    (out / f"{stem}.md").write_text(text)
    return text


def report_header(title: str, command: str, results: dict) -> list[str]:
    """The first lines of a results file: the title, the command that made it (with a note
    on what to build first), the machine, and the commit and date of the run."""
    return [
        f"# {title}",
        "",
        f"Command: {command}  ",
        f"Machine: {results['machine']}  ",
        f"Commit: {results['commit']}, {results['date']}",
        "",
    ]


def variable_fields(file: str, name: str, arr) -> dict:
    """The fields that name a benchmarked variable in a results row."""
    return {"file": file, "variable": name, "dtype": str(arr.dtype), "shape": list(arr.shape), "raw_bytes": arr.nbytes}


def best(fn, repeat=5):
    """(the shortest of ``repeat`` timings of ``fn()`` in seconds, its last result)."""
    out, t = None, float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return t, out


def interleaved(runs: dict, short=0.1, max_repeats=25, per_turn: dict | None = None):
    """(best time of each run in seconds, each run's last answer). The runs take turns in a
    rotating order so that each sees the same states of the machine: 15 turns while the
    slowest run is under a second, 7 under 3 s, else 5 (enough for a median of paired
    ratios). Short runs vary most from run to
    run on a shared machine, so within a turn a run under ``short`` seconds is repeated
    until it has taken that long (at most ``max_repeats`` times). ``per_turn``, when given,
    receives each run's best time in every turn (for ratios of runs paired by turn)."""
    times = dict.fromkeys(runs, float("inf"))
    if per_turn is not None:
        per_turn.update({name: [] for name in runs})
    answers = {}
    turn = 0
    while turn < 5 or (turn < 7 and max(times.values()) < 3.0) or (turn < 15 and max(times.values()) < 1.0):
        names = list(runs)
        # Each turn starts with another run: what runs just before (a scan freeing hundreds
        # of megabytes) slows the next one down, so no run always follows the same one.
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            fn = runs[name]
            spent, repeats, best = 0.0, 0, float("inf")
            while repeats == 0 or (spent < short and repeats < max_repeats):
                t0 = time.perf_counter()
                answers[name] = fn()
                took = time.perf_counter() - t0
                best = min(best, took)
                spent += took
                repeats += 1
            times[name] = min(times[name], best)
            if per_turn is not None:
                per_turn[name].append(best)
        turn += 1
    return times, answers


def paired_ratio(per_turn: dict, a: str, b: str) -> float:
    """The median over turns of run ``a``'s time over run ``b``'s in the same turn: the two
    ran moments apart, so the machine's drift (20-40% within minutes on a shared VM) cancels.
    Two identical runs' best times can differ by 10% on such a machine while their paired
    ratio stays within 1-2% of 1."""
    return float(statistics.median(x / y for x, y in zip(per_turn[a], per_turn[b], strict=True)))

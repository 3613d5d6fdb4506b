"""How fast the command line starts: `strata --help`, `strata info` and a count query, end
to end as a shell runs them, against `ncdump -h` on the NetCDF file (what a user types to
see a file's header) and against Python starting and importing NumPy alone.

    python bench/bench_startup.py                          # writes bench/results/startup.md
    python bench/bench_startup.py --baseline ../old/python # also an older checkout, paired

Every command runs once first (Python writes its bytecode cache, as on a user's machine),
then TURNS times in turn with the others; figures are medians. With --baseline, the same
strata commands also run with PYTHONPATH set to another checkout's `python` directory (one
whose extension is built), alternating with this one: the paired ratio says what changed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from common import DATA, WORK, fresh, report_header, write_results

import strata

TURNS = 21
SOURCE = DATA / "ersst_v3b_1960-2016_concat.nc"


def environment(pythonpath: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="another checkout's python/ directory, timed in turn with this one")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    store = fresh(WORK / "startup.strata")
    strata.import_file(SOURCE, store)
    exe = shutil.which("strata") or sys.exit("the strata command is not on PATH: make build first")
    python = sys.executable
    commands = {
        "strata --help": [exe, "--help"],
        "strata info": [exe, "info", str(store)],
        "strata query (count)": [exe, "query", str(store), "sst", "--where", "sst > 28", "--output", "count"],
        "ncdump -h": ["ncdump", "-h", str(SOURCE)],
        "python -c 'import numpy'": [python, "-c", "import numpy"],
    }
    runs = {(name, "this"): environment(None) for name in commands}
    if args.baseline:
        runs |= {(name, "baseline"): environment(args.baseline) for name in commands if name.startswith("strata")}
    for (name, _), env in runs.items():
        timed(commands[name], env)  # bytecode written, files in the page cache
    times: dict = {key: [] for key in runs}
    for turn in range(TURNS):
        keys = list(runs) if turn % 2 == 0 else list(reversed(runs))
        for key in keys:
            times[key].append(timed(commands[key[0]], runs[key]))
    ncdump = times[("ncdump -h", "this")]
    rows = []
    for (name, which), ts in times.items():
        row = {
            "command": name,
            "build": which,
            "median_ms": statistics.median(ts) * 1e3,
            "min_ms": min(ts) * 1e3,
            "vs_ncdump": statistics.median(t / n for t, n in zip(ts, ncdump, strict=True)),
        }
        if which == "this" and (name, "baseline") in times:
            base = times[(name, "baseline")]
            row["baseline_over_this"] = statistics.median(b / t for b, t in zip(base, ts, strict=True))
        rows.append(row)
        print(f"{name:28} {which:8} {row['median_ms']:7.1f} ms  x{row['vs_ncdump']:.2f} of ncdump -h", flush=True)
    print(write_results("startup", rows, report, baseline=args.baseline))


def report(results) -> str:
    lines = [
        *report_header(
            "Command-line start: strata against ncdump -h",
            "`python bench/bench_startup.py --baseline DIR` (release build: `make build` first)",
            results,
        ),
        "Each command end to end as a shell runs it (a new process each time), on ERSST "
        "(`ersst_v3b_1960-2016_concat.nc`, imported with no options for strata). Each ran once first "
        f"(bytecode cache written, files cached), then {TURNS} turns, order alternated; medians. "
        "`/ ncdump`: the paired ratio of its time to `ncdump -h`'s on the same turn (above 1: slower). "
        "`baseline / this`: with `--baseline`, the other checkout's time over this one's, paired by turn "
        f"(above 1: this one starts faster). Baseline: `{results.get('baseline')}`.",
        "",
        "| command | build | median ms | fastest ms | / ncdump -h | baseline / this |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in results["rows"]:
        paired = f"{r['baseline_over_this']:.2f}" if "baseline_over_this" in r else ""
        lines.append(
            f"| {r['command']} | {r['build']} | {r['median_ms']:.1f} | {r['min_ms']:.1f} | {r['vs_ncdump']:.2f} "
            f"| {paired} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

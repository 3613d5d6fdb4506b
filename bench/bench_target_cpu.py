"""What building for x86-64-v3 buys: decode speed of the chains strata plans, one core.

`.cargo/config.toml` builds every crate with `target-cpu=x86-64-v3` (AVX2, BMI1/2, FMA).
This script builds the codec crate's `decode_speed` example twice, once so and once for
baseline x86-64 (`RUSTFLAGS=-Ctarget-cpu=x86-64`, what cargo builds with no config), and
runs both on the same raw arrays in alternating turns: the chain the default import plans
for each variable (bench/results/import.md), beside lz4 and shuffle+zstd:3.

    python bench/bench_target_cpu.py      # about 6 minutes, most of it the two builds
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import netCDF4
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA, ROOT, WORK, git_rev, machine

TURNS = int(os.environ.get("BENCH_TURNS", "5"))
BUILDS = {"x86-64": "-Ctarget-cpu=x86-64", "x86-64-v3": None}  # None: the project's config
# (file, variable, the chain the default import chose for it)
CASES = [
    ("ersst_v3b_1960-2016_concat.nc", "sst", "delta:0+pco:6"),
    ("trefht_B06_8member_ensemble_1890-1999.nc", "TREFHT", "delta:0+delta:-1+delta:-2+pco:6"),
    ("ihesp14.PRECC.12mon.nc", "PRECC", "pco:6"),
    ("MPAS.nc", "surface_pressure", "pco:8"),
    ("fesom_temp_1948.nc", "temp", "pco:8"),
    ("NorKyst-800m_ZDEPTHS_his_00_3Dsubset.nc", "salinity", "xor:-1+bytecols:3"),
    ("sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc", "siconc", "shuffle+zstd:9"),
    ("cth_shock_physics.nc", "Pressure", "shuffle+zstd:9"),
]
EXTRA = ["lz4", "shuffle+zstd:3"]
DTYPES = {"float32": "f32", "float64": "f64", "int16": "i16", "int32": "i32"}


def build(name: str, rustflags: str | None) -> str:
    target = WORK / "target-cpu" / name
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    env.pop("RUSTFLAGS", None)
    if rustflags:
        env["RUSTFLAGS"] = rustflags
    print(f"building decode_speed for {name}", flush=True)
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "strata-codecs", "--example", "decode_speed"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return str(target / "release" / "examples" / "decode_speed")


def raw_array(file: str, var: str):
    """The variable's stored values as a raw file, and a block shape of about 1 MiB along
    its first axis (sub-chunk sized)."""
    with netCDF4.Dataset(DATA / file) as nc:
        v = nc[var]
        v.set_auto_maskandscale(False)
        a = np.ascontiguousarray(v[:])
    path = WORK / "target-cpu" / f"{var}.raw"
    a.tofile(path)
    rest = int(np.prod(a.shape[1:], dtype=np.int64))
    k = max(1, (1 << 20) // (rest * a.itemsize))
    shape = (min(k, a.shape[0]), *a.shape[1:])
    return path, DTYPES[str(a.dtype)], ",".join(map(str, shape)), a.nbytes


def run(binary: str, path, dtype: str, shape: str, chains: list[str]) -> dict[str, dict]:
    out = subprocess.run([binary, str(path), dtype, shape, *chains], capture_output=True, text=True, check=True)
    return {r["chain"]: r for r in map(json.loads, out.stdout.splitlines())}


def main() -> None:
    (WORK / "target-cpu").mkdir(parents=True, exist_ok=True)
    binaries = {name: build(name, flags) for name, flags in BUILDS.items()}
    arrays = {(f, v): raw_array(f, v) for f, v, _ in CASES}
    speeds: dict[tuple, dict[str, list[float]]] = {}
    ratios: dict[tuple, float] = {}
    for turn in range(TURNS):
        order = list(binaries) if turn % 2 == 0 else list(reversed(binaries))
        for f, v, chosen in CASES:
            path, dtype, shape, _ = arrays[(f, v)]
            chains = [chosen, *[c for c in EXTRA if c != chosen]]
            for name in order:
                for c, r in run(binaries[name], path, dtype, shape, chains).items():
                    speeds.setdefault((v, c), {}).setdefault(name, []).append(r["decode_mb_s"])
                    ratios[(v, c)] = r["ratio"]
        print(f"turn {turn + 1}/{TURNS} done", flush=True)

    rows = []
    for f, v, chosen in CASES:
        for c in [chosen, *[c for c in EXTRA if c != chosen]]:
            s = speeds[(v, c)]
            paired = statistics.median(b / a for a, b in zip(s["x86-64"], s["x86-64-v3"], strict=True))
            rows.append(
                {
                    "file": f,
                    "variable": v,
                    "chain": c,
                    "planned": c == chosen,
                    "ratio": ratios[(v, c)],
                    "x86-64 MB/s": statistics.median(s["x86-64"]),
                    "x86-64-v3 MB/s": statistics.median(s["x86-64-v3"]),
                    "v3 / x86-64": paired,
                }
            )
    planned = [r["v3 / x86-64"] for r in rows if r["planned"]]
    pco = [r["v3 / x86-64"] for r in rows if r["planned"] and "pco" in r["chain"]]
    summary = {
        "planned chains: median speed-up": statistics.median(planned),
        "planned pco chains: median speed-up": statistics.median(pco),
    }
    res = ROOT / "bench" / "results"
    (res / "target_cpu.json").write_text(json.dumps({"rows": rows, "summary": summary}, indent=1) + "\n")
    lines = [
        "# Building for x86-64-v3: decode speed of the planned chains",
        "",
        "Command: `python bench/bench_target_cpu.py`  ",
        f"Machine: {machine()}  ",
        f"Commit: {git_rev()}",
        "",
        "The codec crate's `decode_speed` example built twice: with the project's "
        "`.cargo/config.toml` (`target-cpu=x86-64-v3`) and with `RUSTFLAGS=-Ctarget-cpu=x86-64` "
        "(cargo's default). Each decodes the same blocks of about 1 MiB along the first axis, one "
        f"core, best of five passes; {TURNS} turns, the two builds alternating first. MB/s are "
        "medians over turns; the speed-up is the median of ratios paired by turn (above 1: v3 faster).",
        "",
        "| variable | chain | ratio | x86-64 MB/s | x86-64-v3 MB/s | speed-up |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        chain = f"**`{r['chain']}`** (planned)" if r["planned"] else f"`{r['chain']}`"
        lines.append(
            f"| {r['variable']} | {chain} | {r['ratio']:.3f} | {r['x86-64 MB/s']:.0f} | "
            f"{r['x86-64-v3 MB/s']:.0f} | {r['v3 / x86-64']:.2f} |"
        )
    lines += [""] + [f"- {k}: {v:.2f}" for k, v in summary.items()] + [""]
    (res / "target_cpu.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

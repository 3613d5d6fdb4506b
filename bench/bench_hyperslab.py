"""Stored size, ingest speed and random hyperslab read latency: strata against netCDF4,
HDF5+Blosc2, Zarr v3 and python-blosc2 on the same arrays, in one run.

    make bench                         # or: python bench/bench_hyperslab.py [--quick]

Writes bench/results/hyperslab.md and hyperslab.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import netCDF4
import numpy as np
from common import DATA, WORK, dir_size, fresh, git_rev, machine, random_boxes
from peers import PEERS

import strata

# Share of the elements per box, and how many random boxes.
FRACTIONS = {"0.1%": (0.001, 100), "1%": (0.01, 40), "10%": (0.1, 10)}
PASSES = 3
# The regime without caches runs first, and handles are closed in between, so no decoded
# chunk survives from one regime into the other.
REGIMES = (("latency_nocache_s", False, "no caches"), ("latency_s", True, "defaults"))


def load(name: str, var: str) -> np.ndarray:
    with netCDF4.Dataset(DATA / name) as nc:
        v = nc[var]
        v.set_auto_maskandscale(False)
        return np.ascontiguousarray(v[...])


def datasets(quick: bool):
    sst = load("ersst_v3b_1960-2016_concat.nc", "sst")
    yield "ERSST sst", "ersst_v3b_1960-2016_concat.nc: sst (684, 89, 180) f32, 31% NaN", sst
    yield (
        "TREFHT ensemble",
        "trefht_B06_8member_ensemble_1890-1999.nc: TREFHT (8, 110, 64, 128) f32",
        load("trefht_B06_8member_ensemble_1890-1999.nc", "TREFHT"),
    )
    if not quick:
        yield (
            "ERSST sst x4",
            "ERSST sst joined 4 times along time (2736, 89, 180) f32, 175 MB: a larger input built from real data",
            np.concatenate([sst] * 4),
        )


def auto_shapes(arr: np.ndarray):
    """strata's automatic chunk and sub-chunk shapes; every chunked peer gets the same."""
    probe = fresh(WORK / "probe.strata")
    dims = tuple(f"d{i}" for i in range(arr.ndim))
    strata.write_arrays(probe, {"v": (dims, arr)}, record_dim=dims[0])
    var = strata.open(probe)["v"]
    return var.chunks, var.subchunks


def latency(read, boxes, passes: int) -> float:
    """Median over boxes of the best of ``passes`` reads of each box (the VM's noise is one-sided)."""
    best = [float("inf")] * len(boxes)
    for _ in range(passes):
        for i, box in enumerate(boxes):
            t0 = time.perf_counter()
            read(box)
            best[i] = min(best[i], time.perf_counter() - t0)
    return statistics.median(best)


def measure(peer, path, arr, boxes) -> dict:
    row = {}
    for key, cache, _ in REGIMES:
        read = peer.open(path, cache=cache)
        for k, bx in boxes.items():  # correctness check, and warm-up of the page cache
            got = np.asarray(read(bx[0]))
            if got.tobytes() != arr[bx[0]].tobytes():
                sys.exit(f"{peer.name} returned wrong values for {k} box {bx[0]}")
        # With caches on, every box is read once: a repeat would only measure a cache hit.
        row[key] = {k: latency(read, bx, 1 if cache else PASSES) for k, bx in boxes.items()}
        peer.close()
    return row


def run(quick: bool) -> dict:
    WORK.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(42)
    results = {"machine": machine(), "commit": git_rev(), "date": time.strftime("%Y-%m-%d"), "datasets": []}
    for label, description, arr in datasets(quick):
        chunks, blocks = auto_shapes(arr)
        boxes = {k: random_boxes(arr.shape, f, n, rng) for k, (f, n) in FRACTIONS.items()}
        entry = {
            "label": label,
            "description": description,
            "raw_bytes": arr.nbytes,
            "chunks": chunks,
            "subchunks": blocks,
            "peers": [],
        }
        print(f"\n{label}: {arr.shape} {arr.dtype}, chunk {chunks}, sub-chunk {blocks}", flush=True)
        for peer in PEERS:
            path = fresh(WORK / (label.replace(" ", "_") + peer.suffix))
            t0 = time.perf_counter()
            peer.write(path, arr, chunks, blocks)
            ingest = time.perf_counter() - t0
            row = {
                "peer": peer.name,
                "stored_bytes": dir_size(path),
                "ingest_s": ingest,
                "ingest_mb_s": arr.nbytes / 1e6 / ingest,
                **measure(peer, path, arr, boxes),
            }
            entry["peers"].append(row)
            print(
                f"  {peer.name:<28} {row['stored_bytes'] / 1e6:8.1f} MB  ingest {row['ingest_mb_s']:6.1f} MB/s  "
                + "  ".join(f"{k} {v * 1e3:7.3f} ms" for k, v in row["latency_s"].items())
                + "  | no cache: "
                + "  ".join(f"{k} {v * 1e3:7.3f} ms" for k, v in row["latency_nocache_s"].items()),
                flush=True,
            )
        results["datasets"].append(entry)
    return results


def ms(x: float) -> str:
    return f"{x * 1e3:.3f}" if x < 0.01 else f"{x * 1e3:.2f}"


def report(results: dict, command: str) -> str:
    lines = [
        "# Hyperslab benchmark: strata vs netCDF4, HDF5+Blosc2, Zarr v3, python-blosc2",
        "",
        f"Command: `{command}`  ",
        f"Machine: {results['machine']}  ",
        f"Commit: {results['commit']}, {results['date']}",
        "",
        "Same array for every tool, written from memory (ingest = wall time of that write, release build). "
        "Every chunked format uses strata's automatic sub-chunk shape as its chunk, so all decode the same "
        "unit; python-blosc2 uses strata's chunk and sub-chunk as chunks and blocks. Compression: zstd "
        "level 5 + byte shuffle for the Blosc-based peers, zlib 4 + shuffle for netCDF4, shuffle + zstd 3 "
        "for strata. Latency: the median over N random boxes holding the given share of the elements (same "
        "boxes for every tool, in ms); without caches each box is read 3 times and the best counts (the "
        "VM's noise is one-sided), with caches each box is read once, so hits come only from boxes that "
        "overlap earlier ones. Files are in the page cache; every tool's first result is checked against "
        "NumPy; each regime opens the files afresh.",
        "",
        "Two regimes. *Defaults*: each tool as shipped (netCDF-C keeps a 64 MiB cache of decoded chunks "
        "per variable, h5py 1 MiB, strata 64 MiB; Zarr and python-blosc2 keep none), so repeated boxes can "
        "hit caches when boxes overlap. *No caches*: every decoded-chunk cache off, which measures reading and "
        "decoding itself.",
        "",
    ]
    bars = []
    for ds in results["datasets"]:
        lines += [
            f"## {ds['label']}",
            "",
            ds["description"] + f"; chunk {tuple(ds['chunks'])}, sub-chunk {tuple(ds['subchunks'])}",
            "",
            "| tool | stored MB | ratio | ingest MB/s | 0.1% | 1% | 10% | no cache 0.1% | 1% | 10% |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in ds["peers"]:
            lat, cold = p["latency_s"], p["latency_nocache_s"]
            lines.append(
                f"| {p['peer']} | {p['stored_bytes'] / 1e6:.1f} | {ds['raw_bytes'] / p['stored_bytes']:.2f} "
                f"| {p['ingest_mb_s']:.0f} | "
                + " | ".join(ms(lat[k]) for k in FRACTIONS)
                + " | "
                + " | ".join(ms(cold[k]) for k in FRACTIONS)
                + " |"
            )
        s = ds["peers"][0]
        lines += [
            "",
            "Peer / strata (size and latency above 1: strata smaller or faster; ingest: strata's speed-up):",
            "",
            "| tool | size | ingest | 0.1% | 1% | 10% | no cache 0.1% | 1% | 10% |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in ds["peers"][1:]:
            cells = [f"{p['stored_bytes'] / s['stored_bytes']:.2f}", f"{s['ingest_mb_s'] / p['ingest_mb_s']:.1f}"]
            for key, _, _ in REGIMES:
                cells += [f"{p[key][k] / s[key][k]:.2f}" for k in FRACTIONS]
            lines.append(f"| {p['peer']} | " + " | ".join(cells) + " |")
        lines.append("")
        for key, _, label in REGIMES:
            for k in ("0.1%", "1%"):
                fastest = min(p[key][k] for p in ds["peers"][1:])
                bars.append(
                    (
                        f"{ds['label']}, {label}: read {k} no slower than the fastest peer",
                        s[key][k] <= fastest,
                        f"{ms(s[key][k])} ms vs {ms(fastest)} ms",
                    )
                )
        nc = next(p for p in ds["peers"] if p["peer"].startswith("netCDF4"))
        bars.append(
            (
                f"{ds['label']}: ingest at least 3x netCDF4-zlib",
                s["ingest_mb_s"] >= 3 * nc["ingest_mb_s"],
                f"{s['ingest_mb_s'] / nc['ingest_mb_s']:.1f}x",
            )
        )
    lines += ["## Bars (issue #2)", "", "| bar | met | figure |", "|---|---|---|"]
    lines += [f"| {b} | {'yes' if ok else '**no**'} | {fig} |" for b, ok, fig in bars]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="skip the large input")
    args = parser.parse_args()
    results = run(args.quick)
    command = "make bench" + (" (bench/bench_hyperslab.py --quick)" if args.quick else "")
    out = WORK.parent / "results"
    out.mkdir(exist_ok=True)
    (out / "hyperslab.json").write_text(json.dumps(results, indent=1, default=list))
    text = report(results, command)
    (out / "hyperslab.md").write_text(text)
    print("\n" + text[text.index("## Bars") :])


if __name__ == "__main__":
    main()

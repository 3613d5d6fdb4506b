"""The best any plan could do: for every numeric variable of at least 1 MB in
../shared/data, every lossless chain in the analyzer's registry that decodes at the balanced
floor is imported whole (`codec=` given), and the fastest whose stored size is at most
netCDF4 zlib 4 + shuffle's is raced against python-blosc2 (zstd 5 + shuffle), with the
default import and the import with no codec beside it. A chain picked with hindsight, on
the whole variable, is an upper bound on what a planner that sees a sample can pick: where
it loses to blosc2, no planning rule meets the import-speed bar; what is left is the
import's own cost (reading the NetCDF file, writing, the durable commit).

    python bench/bench_import_oracle.py   # writes bench/results/import_oracle.md and .json
"""

from __future__ import annotations

import statistics

from bench_import import blosc2_write, copies, strata_import, variables
from common import paired_ratio, report_header, write_results

import strata

TURNS = 5
# The chains raced against blosc2 on every turn: the fastest few that meet the size bar in
# the first pass (a single import each, so its order is rough).
RACED = 3
# Balanced's decoding floor (strata_codecs::analyzer::BALANCED_MIN_DECODE_MB_S): the bar
# asks for it too. Chains declared to encode under this many MB/s per core are left out:
# they cannot be the fastest, and pcodec level 12 alone would take most of the run.
MIN_DECODE_MB_S = 1000.0
MIN_ENCODE_MB_S = 100.0


def admissible(src: str, name: str) -> list[str]:
    """The registry's chains for the variable's type that are lossless and declared fast
    enough (the analyzer's own list, as `strata analyze` scores it)."""
    (one,) = strata.analyze(src, [name], samples=1, min_seconds=None)
    return [
        s.chain
        for s in one.scores
        if s.lossless and s.decode_mb_s >= MIN_DECODE_MB_S and s.encode_mb_s >= MIN_ENCODE_MB_S
    ]


def race(src, name: str, arr, chains: list[str]) -> dict[str, list[float]]:
    """Each run's time per turn: blosc2's write, the default import, the import with no
    codec and with each of `chains` given."""
    runs = {
        "blosc2": lambda: blosc2_write(arr)[0],
        "default": lambda: strata_import(src, name)[0],
        "raw": lambda: strata_import(src, name, codec="raw")[0],
        **{c: (lambda c=c: strata_import(src, name, codec=c)[0]) for c in chains},
    }
    per_turn = {k: [] for k in runs}
    for turn in range(TURNS):
        names = list(runs)
        # Each turn starts with another run, so none always follows the same one.
        for k in names[turn % len(names) :] + names[: turn % len(names)]:
            per_turn[k].append(runs[k]())
    return per_turn


def vs_blosc2(per_turn: dict[str, list[float]], k: str) -> float:
    """blosc2's time over run `k`'s, median of the turns' pairs."""
    return paired_ratio(per_turn, "blosc2", k)


def main() -> None:
    rows = []
    for file, name, arr, dims in variables():
        src, zbytes = copies(name, arr, dims)
        chains = admissible(str(src), name)
        # First pass: every chain once, for its whole-variable size and a rough time.
        first = {}
        for chain in chains:
            seconds, stored, _ = strata_import(src, name, codec=chain)
            first[chain] = (seconds, stored)
        small = sorted((c for c in chains if first[c][1] <= zbytes), key=lambda c: first[c][0])
        raced = small[:RACED]
        per_turn = race(src, name, arr, raced)
        best = max(raced, key=lambda c: vs_blosc2(per_turn, c), default=None)
        row = {
            "file": file,
            "variable": name,
            "dtype": str(arr.dtype),
            "raw_bytes": arr.nbytes,
            "chains": len(chains),
            "chains_at_most_netcdf4": len(small),
            "best_chain": best,
            "best_size_vs_zlib": first[best][1] / zbytes if best else None,
            "best_vs_blosc2": vs_blosc2(per_turn, best) if best else None,
            "default_vs_blosc2": vs_blosc2(per_turn, "default"),
            "no_codec_vs_blosc2": vs_blosc2(per_turn, "raw"),
            "blosc2_ms": 1e3 * statistics.median(per_turn["blosc2"]),
            "best_ms": 1e3 * statistics.median(per_turn[best]) if best else None,
            "first_pass": {c: {"seconds": s, "size_vs_zlib": b / zbytes} for c, (s, b) in first.items()},
        }
        rows.append(row)
        print(
            f"{name[:20]:20} {len(small):2}/{len(chains)} at most netCDF4; best {best} "
            f"{row['best_vs_blosc2'] or float('nan'):.2f}x blosc2, default {row['default_vs_blosc2']:.2f}x, "
            f"no codec {row['no_codec_vs_blosc2']:.2f}x",
            flush=True,
        )
    print(write_results("import_oracle", rows, report)[-900:])


def report(results) -> str:
    rows = results["rows"]
    lines = [
        *report_header(
            "The import against python-blosc2 with the chain chosen in hindsight",
            "`python bench/bench_import_oracle.py` (release build: `make build` first; about a minute)",
            results,
        ),
        "Every numeric variable of at least 1 MB in `../shared/data`, alone in an uncompressed "
        "NetCDF-4 file (as `bench_import.py` writes it). Every lossless chain of the analyzer's "
        f"registry for the variable's type declared to decode at {MIN_DECODE_MB_S:.0f} MB/s or "
        f"faster and to encode at {MIN_ENCODE_MB_S:.0f} MB/s or faster is imported once with "
        "`codec=` given (no planning); of those whose stored size is at most netCDF4 zlib 4 + "
        f"shuffle's on the whole variable, the {RACED} quickest are raced against python-blosc2 "
        "(`blosc2.asarray` of the in-memory array, zstd 5 + shuffle, both cores), the default "
        f'import and the import with `codec="raw"`, {TURNS} turns, the order rotated each turn. '
        "Speed = blosc2's time / strata's, median of the turns' pairs (above 1: strata faster); "
        "`best` is the raced chain with the highest. That chain is picked with hindsight on the "
        "whole variable, so no planner working from a sample does better: where it is below 1, "
        "the bar that the default import be at least as fast as blosc2 cannot be met by any "
        "choice of chain, only by the import's own costs.",
        "",
        "| file | variable | type | MB | chains | at most netCDF4 | best chain | size / netCDF4 "
        "| blosc2 ms | best ms | best vs blosc2 | default vs blosc2 | no codec vs blosc2 |",
        "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        best = f"`{r['best_chain']}`" if r["best_chain"] else "none"
        nan = float("nan")
        lines.append(
            f"| {r['file']} | {r['variable']} | {r['dtype']} | {r['raw_bytes'] / 1e6:.1f} | {r['chains']} "
            f"| {r['chains_at_most_netcdf4']} | {best} | {r['best_size_vs_zlib'] or nan:.3f} "
            f"| {r['blosc2_ms']:.1f} | {r['best_ms'] or nan:.1f} | {r['best_vs_blosc2'] or nan:.2f} "
            f"| {r['default_vs_blosc2']:.2f} | {r['no_codec_vs_blosc2']:.2f} |"
        )
    best = [r["best_vs_blosc2"] for r in rows if r["best_chain"]]
    none = [r["variable"] for r in rows if not r["best_chain"]]
    default = [r["default_vs_blosc2"] for r in rows]
    bare = [r["no_codec_vs_blosc2"] for r in rows]
    n = len(rows)
    lines += [
        "",
        f"- With the chain chosen in hindsight: at least blosc2's speed on {sum(b >= 1 for b in best)} "
        f"of the {len(best)} variables where a chain given alone stays within netCDF4's size (median "
        f"{statistics.median(best):.2f}, worst {min(best):.2f}). On the other {len(none)} "
        f"({', '.join(none) or 'none'}) only the default import does: its plan also tries the "
        "variable in blocks of another shape, which a chain given alone does not.",
        f"- The default import, in the same turns: {sum(d >= 1 for d in default)} of {n} (median "
        f"{statistics.median(default):.2f}, worst {min(default):.2f}).",
        f"- With no codec at all: {sum(b >= 1 for b in bare)} of {n} (median {statistics.median(bare):.2f}, "
        f"worst {min(bare):.2f}).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

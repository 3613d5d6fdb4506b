"""The default import of two builds side by side: this checkout's strata against another
build's Python package (an earlier commit's, say), each in its own process, paired by
turn, on every numeric variable of at least 1 MB in ../shared/data (the set of
bench_import.py). What a change to planning or writing does to import time and size,
without the machine's drift between two runs of bench_import.py.

    # the other build: a worktree of the commit, built in place, its package directory
    git worktree add /tmp/base HEAD~1 && (cd /tmp/base && make build)
    python bench/bench_import_ab.py /tmp/base/python HEAD~1   # results/import_ab.md, .json
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from bench_import import copies, variables
from common import WORK, report_header, write_results

TURNS = int(os.environ.get("TURNS", 5))

# One import per line of stdin ([source, store, variable]); one line of JSON back:
# [seconds, stored bytes, chain chosen].
WORKER = r"""
import json, shutil, sys, time
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
import strata
print(json.dumps(strata.__file__), flush=True)
for line in sys.stdin:
    src, store, name = json.loads(line)
    shutil.rmtree(store, ignore_errors=True)
    t0 = time.perf_counter()
    strata.import_file(src, store)
    seconds = time.perf_counter() - t0
    ds = strata.open(store)
    plan = ds[name].plan
    print(json.dumps([seconds, ds.stats()[name]["stored_bytes"], plan["chosen"] if plan else None]), flush=True)
"""


class Build:
    def __init__(self, path: str):
        # Started outside the checkout, so that `import strata` finds only what `path` says.
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/"
        )
        self.package = json.loads(self.proc.stdout.readline())

    def run(self, src, store, name):
        self.proc.stdin.write(json.dumps([str(src), str(store), name]) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    if len(sys.argv) not in (2, 3) or not os.path.isdir(sys.argv[1]):
        sys.exit(__doc__)
    label = sys.argv[2] if len(sys.argv) == 3 else sys.argv[1]
    WORK.mkdir(parents=True, exist_ok=True)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
    base, new = Build(sys.argv[1]), Build(os.path.abspath(here))
    rows = []
    try:
        for file, name, arr, dims in variables():
            src, zbytes = copies(name, arr, dims)
            pairs, res = [], {}
            for turn in range(TURNS):
                order = [("base", base), ("new", new)] if turn % 2 else [("new", new), ("base", base)]
                for key, build in order:
                    res[key] = build.run(src, WORK / f"import_ab_{key}.strata", name)
                pairs.append(res["base"][0] / res["new"][0])
            rows.append(
                {
                    "file": file,
                    "variable": name,
                    "raw_bytes": arr.nbytes,
                    "speed_new_over_base": statistics.median(pairs),
                    "pairs": pairs,
                    "base_chain": res["base"][2],
                    "new_chain": res["new"][2],
                    "base_size_vs_zlib": res["base"][1] / zbytes,
                    "new_size_vs_zlib": res["new"][1] / zbytes,
                }
            )
            print(f"{name[:24]:24} new/base speed {rows[-1]['speed_new_over_base']:.2f}", flush=True)
    finally:
        base.close()
        new.close()
    print(write_results("import_ab", rows, report, base=label, new=new.package)[-600:])


def report(results) -> str:
    rows = results["rows"]
    lines = [
        *report_header(
            "Default import, two builds paired by turn",
            "`python bench/bench_import_ab.py BASE/python LABEL` (both built with `make build`)",
            results,
        ),
        f"Base: {results['base']}; new: this checkout. Each variable of bench_import.py imported "
        f"by both builds in turn ({TURNS} turns, order alternated, each build in its own process); "
        "speed = base's time / new's (above 1: the new build is faster), median of the turns. "
        "Size: stored bytes over netCDF4's zlib 4 + shuffle.",
        "",
        "| file | variable | MB | speed new/base | base chain | size / netCDF4 | new chain | size / netCDF4 |",
        "|---|---|---:|---:|---|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['file']} | {r['variable']} | {r['raw_bytes'] / 1e6:.1f} | {r['speed_new_over_base']:.2f} "
            f"| `{r['base_chain']}` | {r['base_size_vs_zlib']:.3f} | `{r['new_chain']}` | {r['new_size_vs_zlib']:.3f} |"
        )
    speeds = [r["speed_new_over_base"] for r in rows]
    changed = [r for r in rows if r["new_chain"] != r["base_chain"]]
    same = [r["speed_new_over_base"] for r in rows if r["new_chain"] == r["base_chain"]]
    lines += [
        "",
        f"- Speed new/base: median {statistics.median(speeds):.2f}, from {min(speeds):.2f} to {max(speeds):.2f}; "
        f"faster on {sum(s > 1 for s in speeds)} of {len(rows)}.",
        f"- Chain changed on {len(changed)} of {len(rows)}"
        + (
            f" (speed there {min(r['speed_new_over_base'] for r in changed):.2f}-"
            f"{max(r['speed_new_over_base'] for r in changed):.2f})"
            if changed
            else ""
        )
        + (f"; the same chain on the others, speed {min(same):.2f}-{max(same):.2f}" if same else "")
        + ".",
        f"- Larger than netCDF4: base {sum(r['base_size_vs_zlib'] > 1 for r in rows)}, "
        f"new {sum(r['new_size_vs_zlib'] > 1 for r in rows)}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""Adds one `make fuzz` run to the record: per target, the executions libFuzzer reports
("Done N runs in S second(s)") and whether it found a crash, with the totals over every
recorded run (the corpus carries over, so runs add up).

    python fuzz/record.py LOG_DIR RECORD.md SECONDS TARGET...
"""

import datetime as dt
import json
import pathlib
import re
import subprocess
import sys


def main() -> int:
    logs, record, seconds, targets = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4:]
    state_file = record.with_suffix(".json")
    state = json.loads(state_file.read_text()) if state_file.exists() else {"runs": []}
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    run = {"date": dt.date.today().isoformat(), "commit": rev, "seconds": int(seconds), "targets": {}}
    for t in targets:
        text = (logs / f"{t}.log").read_text(errors="replace") if (logs / f"{t}.log").exists() else ""
        done = re.findall(r"^Done (\d+) runs in (\d+) second", text, re.M)
        crashed = bool(re.search(r"^(==\d+==ERROR|SUMMARY: libFuzzer)|panicked at", text, re.M))
        # A crash stops libFuzzer before its "Done" line: the last status line counts then.
        status = re.findall(r"^#(\d+)\s", text, re.M)
        runs = int(done[-1][0]) if done else int(status[-1]) if status else 0
        run["targets"][t] = {"runs": runs, "crashed": crashed}
    state["runs"].append(run)
    state_file.write_text(json.dumps(state, indent=1) + "\n")
    write(state, record)
    return 0


def write(state: dict, record: pathlib.Path) -> None:
    """The record as a table: every target any run fuzzed, a column per run."""
    targets = list(dict.fromkeys(t for r in state["runs"] for t in r["targets"]))
    totals = {t: sum(r["targets"].get(t, {}).get("runs", 0) for r in state["runs"]) for t in targets}
    crashes = {t: sum(r["targets"].get(t, {}).get("crashed", False) for r in state["runs"]) for t in targets}
    lines = [
        "# Fuzzing record (`make fuzz`)",
        "",
        "Each `make fuzz FUZZ_SECONDS=S` run adds a column (`FUZZ_TARGETS=...` runs some targets only; the",
        "others show 0); the corpus in `fuzz/corpus` carries over between runs, so executions add up. A crash",
        "stops `make fuzz` and is counted here.",
        "",
        "| target | "
        + " | ".join(f"{r['date']} {r['commit']} ({r['seconds']} s)" for r in state["runs"])
        + " | total | crashes |",
        "|---|" + "---|" * (len(state["runs"]) + 2),
    ]
    for t in targets:
        cells = [f"{r['targets'].get(t, {}).get('runs', 0):,}" for r in state["runs"]]
        lines.append(f"| {t} | " + " | ".join(cells) + f" | {totals[t]:,} | {crashes[t]} |")
    record.write_text("\n".join(lines) + "\n")
    print(record.read_text())


if __name__ == "__main__":
    sys.exit(main())

"""Every single-bit flip and every truncation of every file of a small store, each read back.

    python tests/crash/corrupt.py            # make corrupt: every bit of every file
    python tests/crash/corrupt.py --step 7   # every 7th byte (its bits all flipped)

The store has what a real one has: two versions (an import and an append), level V bins
with their index, byte groups (level M), attributes with a NaN, a fill value. For each file
(data, index, manifests, HEAD) and each damage, the whole store is read (every variable,
every version) and must either fail with a typed error (CorruptionError,
CompatibilityError, NotFoundError) or give exactly the original values and attributes;
when it gives them, `verify` must still name the damaged file, or the damage must be
harmless by design (counted apart, and listed): `HEAD`'s version is only where the search
for the newest manifest starts, so a flip that lowers it finds the same version. A panic or
any other exception, or a wrong value, is a failure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import strata
from strata import _core

# What a damaged store may answer with: the typed errors a caller can act on.
TYPED = (strata.CorruptionError, strata.CompatibilityError, strata.NotFoundError)


def make_store(path: Path) -> None:
    rng = np.random.default_rng(0)
    t, y, x = 8, 12, 10
    sst = (rng.normal(15, 8, (t, y, x))).astype("f4")
    sst[:, 0, :3] = -999.0  # fill
    attrs = {"_FillValue": np.float32(-999.0), "units": "degC", "valid_max": np.float32("nan")}
    variables = {
        "time": (("time",), np.arange(t, dtype="f8"), {"units": "days since 2000-01-01"}),
        "sst": (("time", "lat", "lon"), sst, attrs),
    }
    strata.write_arrays(path, variables, record_dim="time", slab_records=4, layout="V-M-S", binning="equal-frequency")
    more = sst[:4] + np.float32(1)
    with strata.Writer.append_to(path) as w:
        w.append(time=np.arange(t, t + 4, dtype="f8"), sst=more)


def read_everything(path: Path):
    out = []
    ds = strata.open(path)
    for v in range(1, ds.version + 1):
        dv = strata.open(path, version=v)
        out.append(({n: np.asarray(dv[n][...]).tobytes() for n in dv.variables}, repr(dv.attrs), repr(dv["sst"].attrs)))
    return out


def outcome(path: Path, want) -> str:
    try:
        got = read_everything(path)
    except TYPED:
        return "error"
    return "same" if got == want else "WRONG"


def damages(data: bytes, step: int):
    """(what, damaged bytes): every bit of every `step`-th byte, then every truncation."""
    for pos in range(0, len(data), step):
        for bit in range(8):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            yield f"bit {bit} of byte {pos}", bytes(bad)
    for cut in range(0, len(data), step):
        yield f"cut to {cut} bytes", data[:cut]


def run(step: int = 1, quiet: bool = False) -> dict:
    counts = {"tried": 0, "error": 0, "same_verify_caught": 0, "harmless": 0, "WRONG": 0, "OTHER": 0}
    failures, harmless = [], {}
    with tempfile.TemporaryDirectory(prefix="strata-corrupt-") as tmp:
        store = Path(tmp) / "s.strata"
        make_store(store)
        want = read_everything(store)
        files = [store / "HEAD", *sorted((store / "manifests").iterdir())]
        files += [*sorted((store / "index").iterdir()), *sorted((store / "data").iterdir())]
        t0 = time.perf_counter()
        for f in files:
            data = f.read_bytes()
            for what, bad in damages(data, step):
                f.write_bytes(bad)
                counts["tried"] += 1
                try:
                    got = outcome(store, want)
                except BaseException as e:  # a panic arrives as pyo3's PanicException
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    got = "OTHER"
                    failures.append(f"{f.relative_to(store)}: {what}: {type(e).__name__}: {e}")
                if got == "same":
                    # Read back unchanged: verify must still see the damage, or it is
                    # harmless (verify agrees the store is whole).
                    damaged = any(_core.verify(str(store), v)[4] for v in range(1, len(want) + 1))
                    got = "same_verify_caught" if damaged else "harmless"
                    if not damaged:
                        harmless.setdefault(str(f.relative_to(store)), []).append(what)
                elif got == "WRONG":
                    failures.append(f"{f.relative_to(store)}: {what}: wrong values")
                counts[got] += 1
            f.write_bytes(data)
            if not quiet:
                print(f"  {f.relative_to(store)} ({len(data)} bytes) done, {counts}", file=sys.stderr)
        counts["seconds"] = round(time.perf_counter() - t0, 1)
        counts["files"] = len(files)
        assert read_everything(store) == want, "the store did not come back whole"
    counts["failures"] = failures[:20]
    counts["harmless_where"] = {f: (len(w), w[:3]) for f, w in harmless.items()}
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", type=int, default=1, help="damage every STEP-th byte (default: every byte)")
    args = p.parse_args()
    counts = run(max(1, args.step))
    print(f"corrupt: {counts}")
    if counts["WRONG"] or counts["OTHER"]:
        sys.exit("corrupt: a damaged store gave wrong values or an untyped error")


if __name__ == "__main__":
    main()

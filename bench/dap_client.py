"""The DAP2 client side of `bench_server.py`'s pydap comparison, in a process of its own:
netCDF4-python and urllib as a user runs them, without strata loaded (strata's extension
tunes the C allocator of any process that imports it, which would speed up the client's
own work for both servers alike and so favour the faster one).

Reads a JSON list of requests on stdin — `{"url", "box": [[start, stop], ...], "ce"}` — and
the source NetCDF file's path as its argument; runs them in order and writes, per request,
the seconds netCDF4 took to open the dataset and read the box, whether the values equal the
file's, and the seconds of the raw `.dods` response alone."""

import json
import sys
import time
import urllib.request

import netCDF4
import numpy as np


def main() -> None:
    requests = json.load(sys.stdin)
    with netCDF4.Dataset(sys.argv[1]) as nc:
        nc.set_auto_mask(False)
        sst = nc["sst"][:]
    out = []
    for r in requests:
        key = tuple(slice(a, b) for a, b in r["box"])
        row = {}
        t0 = time.perf_counter()
        try:
            with netCDF4.Dataset(r["url"]) as nc:
                nc.set_auto_mask(False)
                got = nc["sst"][key]
            row["error"] = None if np.array_equal(got, sst[key]) else "values differ from the file's"
        except (OSError, RuntimeError) as e:
            row["error"] = str(e)
        row["s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with urllib.request.urlopen(f"{r['url']}.dods?{r['ce']}", timeout=600) as resp:
            resp.read()
        row["dods_s"] = time.perf_counter() - t0
        out.append(row)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

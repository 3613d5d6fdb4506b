"""One rank of bench_write.py's parallel runs: writes its block of the stream (placement
dense or hybrid: a band of latitudes; subfiles: a range of steps) and prints, on rank 0, the
seconds from the first step to the commit as JSON.

    mpirun -n 2 python -m mpi4py bench/write_mpi.py OUT.strata PLACEMENT
"""

import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import bench_write as bw

import strata.parallel

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out, placement = sys.argv[1], sys.argv[2]
variables = {"time": ("f8", "time"), "sst": ("f4", ("time", "lat", "lon"), {"_FillValue": bw.FILL})}
if placement == "subfiles":
    per = bw.STEPS // size // 1024 * 1024
    cuts = [per * r for r in range(size)] + [bw.STEPS]
    block = {"time": (cuts[rank], cuts[rank + 1])}
    rows, t0, t1 = (0, bw.NY), cuts[rank], cuts[rank + 1]
else:
    # Bands of latitude meeting at multiples of 11 rows (chunks are cut to fit the bands).
    rows = (bw.NY * rank // size // 11 * 11, bw.NY if rank == size - 1 else bw.NY * (rank + 1) // size // 11 * 11)
    block = {"lat": rows} if size > 1 else {}
    t0, t1 = 0, bw.STEPS
comm.Barrier()
start = time.perf_counter()
w = strata.parallel.ParallelWriter(
    comm, out, bw.DIMS, variables, block, placement=placement, codec=bw.CODEC, slab_records=1024
)
holds_time = placement == "subfiles" or rank == 0
# Each rank makes only its own block of its own steps, as a model computes only its part.
base, sea = bw.BASE[:, rows[0] : rows[1]], bw.SEA[:, rows[0] : rows[1]]
cycle, cycle_of = None, None
for t in range(t0, t1):
    if cycle_of != t // len(base):
        cycle_of = t // len(base)
        cycle = np.where(sea, base + np.float32(0.01 * cycle_of), bw.FILL).astype("f4")
    arrays = {"sst": cycle[t % len(base)]}
    if holds_time:
        arrays["time"] = float(t)
    w.append(arrays)
w.commit()
comm.Barrier()
if rank == 0:
    os.sync()
    print(json.dumps({"seconds": time.perf_counter() - start}))

"""Writes ERSST's sea surface temperature with one MPI rank per block, as a simulation code
would write its output. Usage:

    mpirun -n N python -m mpi4py mpi_write.py SOURCE.nc OUT.strata PLACEMENT
"""

import sys

import netCDF4
import numpy as np
from mpi4py import MPI

import strata.parallel

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
src, out, placement = sys.argv[1:4]

with netCDF4.Dataset(src) as nc:
    nc.set_auto_maskandscale(False)
    sst, lat, lon, time = (nc[name] for name in ("sst", "lat", "lon", "time"))
    steps, ny, nx = sst.shape
    dims = {"time": None, "lat": ny, "lon": nx}
    variables = {
        "time": ("i8", "time", {"units": time.units, "calendar": time.calendar}),
        "lat": ("f4", "lat", {"units": lat.units}),
        "lon": ("f4", "lon", {"units": lon.units}),
        "sst": ("f4", ("time", "lat", "lon"), {"units": sst.units, "_FillValue": sst._FillValue}),
    }
    if placement == "subfiles":
        # Ranks hold ranges of whole years.
        years = steps // 12
        cuts = [12 * (years * r // size) for r in range(size)] + [steps]
        block = {"time": (cuts[rank], cuts[rank + 1])}
        t0, t1 = block["time"]
        (y0, y1), (x0, x1) = (0, ny), (0, nx)
    else:
        rows = 2 if size >= 4 else 1
        cols = size // rows
        r, c = divmod(rank, cols)
        # Rows meet at latitude row 45 (blocks meet where chunks can: see strata.parallel).
        y0, y1 = [(0, 45), (45, ny)][r] if rows > 1 else (0, ny)
        x0, x1 = nx * c // cols, nx * (c + 1) // cols
        block = {"lat": (y0, y1), "lon": (x0, x1)}
        t0, t1 = 0, steps
    w = strata.parallel.ParallelWriter(
        comm, out, dims, variables, block, placement=placement, codec="auto", attrs={"title": "ERSST by blocks"}
    )
    first = placement == "subfiles" and t0 == 0
    if first or (placement != "subfiles" and x0 == 0):
        w.write("lat", lat[y0:y1])
    if first or (placement != "subfiles" and y0 == 0):
        w.write("lon", lon[x0:x1])
    holds_time = placement == "subfiles" or (x0 == 0 and y0 == 0)
    for t in range(t0, t1):
        arrays = {"sst": sst[t, y0:y1, x0:x1]}
        if holds_time:
            arrays["time"] = np.int64(time[t])
        w.append(arrays)
    version = w.commit()
if rank == 0:
    print(f"committed version {version} with {size} writers ({placement})")

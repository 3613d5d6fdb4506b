"""A small simulation writing its output with netCDF4-python, as such programs are written.
The tests run it unchanged: once on netCDF4 (a NetCDF file), once through strata.netcdf
(a strata store), and compare. Usage: heat_netcdf4.py OUT [STEPS]"""

import sys

import netCDF4
import numpy as np

out = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 48
ny, nx = 96, 192

ds = netCDF4.Dataset(out, "w", format="NETCDF4")
ds.title = "2-D heat diffusion"
ds.institution = "strata tests"
ds.createDimension("time", None)
ds.createDimension("lat", ny)
ds.createDimension("lon", nx)
time = ds.createVariable("time", "f8", ("time",))
time.units = "hours since 2020-01-01 00:00:00"
time.calendar = "standard"
lat = ds.createVariable("lat", "f4", ("lat",))
lat.units = "degrees_north"
lon = ds.createVariable("lon", "f4", ("lon",))
lon.units = "degrees_east"
temp = ds.createVariable("temp", "f4", ("time", "lat", "lon"), zlib=True, complevel=4, fill_value=-999.0)
temp.units = "K"
temp.long_name = "temperature"
flux = ds.createVariable("flux", "i2", ("time", "lat", "lon"), zlib=True)
flux.scale_factor = 0.01
flux.add_offset = 0.0
land = ds.createVariable("land", "i1", ("lat", "lon"))
station = ds.createVariable("station_temp", "f8", ("time",))

lat[:] = np.linspace(-89.0, 89.0, ny)
lon[:] = np.arange(nx) * 360.0 / nx
is_land = np.zeros((ny, nx), dtype=bool)
is_land[40:60, 100:140] = True
land[:] = 0
land[40:60, 100:140] = 1  # written in pieces

y, x = np.mgrid[0:ny, 0:nx]
field = 280.0 + 20.0 * np.exp(-((y - ny / 2) ** 2 + (x - nx / 3) ** 2) / 200.0)
for t in range(steps):
    lap = np.roll(field, 1, 0) + np.roll(field, -1, 0) + np.roll(field, 1, 1) + np.roll(field, -1, 1) - 4 * field
    field = field + 0.2 * lap
    time[t] = t * 6.0
    out_field = np.ma.masked_where(is_land, field)  # no temperature over land
    temp[t, :, :] = out_field
    flux[t] = 0.2 * lap
    if t % 2 == 0:
        station[t] = field[48, 96]  # odd steps stay unwritten
ds.history = f"{steps} steps"
ds.close()
print(f"wrote {steps} steps to {out}")

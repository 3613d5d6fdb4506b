"""Writes the golden format-v1 stores under tests/golden/v1/ and their expected values.

Run only when a new format version is introduced (then write v2/ beside v1/); the v1
stores must stay readable forever, so this script never overwrites an existing store.

    python tests/golden/make_golden.py
"""

import pathlib
import shutil
import sys
import tempfile

import netCDF4
import numpy as np

import strata

HERE = pathlib.Path(__file__).parent / "v1"


def golden_values():
    """Deterministic content, recomputed by the test: no randomness, no external data."""
    t, y, x = np.meshgrid(np.arange(9), np.arange(13), np.arange(17), indexing="ij")
    field = (np.sin(y / 3.0) * 10 + np.cos(x / 5.0) * 5 + t * 0.5).astype("f4")
    field[(t + y + x) % 11 == 0] = np.nan
    packed = ((y * 17 + x) * 3 - 200).astype("i2")[0]
    return {
        "time": np.arange(9, dtype="f8") * 30.0,
        "lat": np.linspace(-60, 60, 13).astype("f4"),
        "lon": np.linspace(0, 320, 17).astype("f8"),
        "temp": field,
        "depth": packed,
        "label": np.frombuffer(b"golden-v1", dtype="S1"),
    }


def write_source(path):
    v = golden_values()
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 13)
        nc.createDimension("lon", 17)
        nc.createDimension("nchar", 9)
        nc.title = "strata golden store, format v1"
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t.calendar = "noleap"
        t[:] = v["time"]
        nc.createVariable("lat", "f4", ("lat",))[:] = v["lat"]
        nc.createVariable("lon", "f8", ("lon",))[:] = v["lon"]
        temp = nc.createVariable("temp", "f4", ("time", "lat", "lon"), fill_value=np.float32(np.nan))
        temp.units = "K"
        temp[:] = v["temp"]
        depth = nc.createVariable("depth", "i2", ("lat", "lon"), fill_value=np.int16(-32767))
        depth.scale_factor = np.float32(0.5)
        depth.add_offset = np.float32(100.0)
        depth.set_auto_maskandscale(False)  # store the packed integers as given
        depth[:] = v["depth"]
        nc.createVariable("label", "S1", ("nchar",))[:] = v["label"]


def main():
    HERE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "golden.nc"
        write_source(src)
        for name, kwargs in {
            "default.strata": {},
            "small-chunks.strata": {"chunks": "time=2,lat=5,lon=4", "subchunks": "lat=2,lon=3", "slab_records": 4},
            "raw-codec.strata": {"codec": "raw"},
        }.items():
            out = HERE / name
            if out.exists():
                print(f"keeping existing {out}")
                continue
            staging = pathlib.Path(tmp) / name
            strata.import_file(src, staging, **kwargs)
            if name == "small-chunks.strata":
                more = pathlib.Path(tmp) / "more.nc"
                shutil.copy(src, more)
                strata.append_file(more, staging)
            shutil.copytree(staging, out)
            print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())

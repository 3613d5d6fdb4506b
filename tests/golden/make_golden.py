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


# One store per layout level, binning rule and codec the format defines: every variable
# written with the store's options. Lossy codecs' decoded values are kept beside the stores
# (expected/<store>.<var>.le, little-endian) so that a decoder change that moves a value
# is caught, not only one that breaks the error bound.
FEATURES = {
    "layout-M-S.strata": {"layout": "M-S"},
    "layout-V-M-S-equal-frequency.strata": {"layout": "V-M-S", "bins": 4, "binning": "equal-frequency"},
    "layout-S-V-equal-width.strata": {"layout": "S-V", "bins": 5, "binning": "equal-width"},
    "layout-V-S-given-bins.strata": {"layout": "V-S", "binning": "0,5,10"},
    # Level V's positions in frames read on demand (index sections 4 and 5), as large slabs
    # are written: here frames of about 200 bytes, through a layout file.
    "layout-V-S-position-frames.strata": {"layout": "V-S", "bins": 3, "config": "index_frame_bytes = 200\n"},
    "codec-pco.strata": {"codec": "pco:8"},
    "codec-fpc.strata": {"codec": "fpc"},
    "codec-bytecols.strata": {"codec": "bytecols:3"},
    "codec-delta-xor.strata": {"codec": "delta:0+xor:-1+shuffle+zstd:3"},
    "codec-lz4.strata": {"codec": "shuffle+lz4"},
    "codec-sz.strata": {"codec": "sz:abs=0.01"},
    "codec-zfp.strata": {"codec": "zfp:abs=0.01"},
    "codec-bitround.strata": {"codec": "bitround:12+zstd:3"},
}
LOSSY = ("codec-sz.strata", "codec-zfp.strata", "codec-bitround.strata")


def feature_values():
    """The fields of the feature stores: temp (f4, with NaNs) and height (f8)."""
    temp = golden_values()["temp"]
    return {"temp": temp, "height": (temp.astype("f8") * 2.0 + 1000.0)}


def write_features(tmp: pathlib.Path):
    v = feature_values()
    (HERE / "expected").mkdir(exist_ok=True)
    for name, options in FEATURES.items():
        out = HERE / name
        if out.exists():
            print(f"keeping existing {out}")
            continue
        staging = tmp / name
        options = dict(options)
        if "config" in options:
            (tmp / "config.toml").write_text(options["config"])
            options["config"] = tmp / "config.toml"
        strata.write_arrays(
            staging,
            {n: (("time", "lat", "lon"), a) for n, a in v.items()},
            record_dim="time",
            attrs={"title": f"strata golden store, format v1: {name[:-7]}"},
            subchunks="time=2,lat=5,lon=6",
            slab_records=4,
            **options,
        )
        if name in LOSSY:
            ds = strata.open(staging)
            for var in v:
                np.ascontiguousarray(ds[var][...]).astype(ds[var][...].dtype.newbyteorder("<")).tofile(
                    HERE / "expected" / f"{name[:-7]}.{var}.le"
                )
        shutil.copytree(staging, out)
        print(f"wrote {out}")


IN_PLACE = HERE / "in-place"


def write_in_place_source(path):
    """A NetCDF-4 file whose chunks a store indexes in place: the golden values with temp
    chunked through fletcher32, shuffle and deflate (records 7..8 written only in their
    first chunk: the others read as the fill), depth big-endian, coordinates contiguous."""
    v = golden_values()
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 13)
        nc.createDimension("lon", 17)
        nc.title = "strata golden store, format v1, indexed in place"
        nc.createVariable("time", "f8", ("time",))[:] = v["time"]
        nc.createVariable("lat", "f4", ("lat",))[:] = v["lat"]
        temp = nc.createVariable(
            "temp",
            "f4",
            ("time", "lat", "lon"),
            zlib=True,
            shuffle=True,
            fletcher32=True,
            chunksizes=(2, 5, 6),
            fill_value=np.float32(-99),
        )
        temp[0:7] = v["temp"][0:7]
        temp[7:9, 0:5, 0:6] = v["temp"][7:9, 0:5, 0:6]
        depth = nc.createVariable("depth", ">i2", ("lat", "lon"), endian="big")
        depth[:] = v["depth"]


def in_place_values():
    """What the golden in-place file holds (temp's unwritten chunks read as -99)."""
    v = golden_values()
    temp = np.full_like(v["temp"], -99)
    temp[0:7] = v["temp"][0:7]
    temp[7:9, 0:5, 0:6] = v["temp"][7:9, 0:5, 0:6]
    return {"time": v["time"], "lat": v["lat"], "temp": temp, "depth": v["depth"]}


def write_in_place():
    if IN_PLACE.exists():
        print(f"keeping existing {IN_PLACE}")
        return
    IN_PLACE.mkdir()
    write_in_place_source(IN_PLACE / "source.nc")
    strata.index_file(IN_PLACE / "source.nc", IN_PLACE / "source.nc.strata")
    strata.index_file(IN_PLACE / "source.nc", IN_PLACE / "binned.strata", binning="0,5,10")
    print(f"wrote {IN_PLACE}")


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
        write_features(pathlib.Path(tmp))
    write_in_place()


if __name__ == "__main__":
    sys.exit(main())

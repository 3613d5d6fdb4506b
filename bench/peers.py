"""The tools strata is measured against, each written and read the way its users would,
with the same chunk shape for every chunked format (see bench/README.md)."""

from __future__ import annotations

import pathlib

import numpy as np

import strata


class Peer:
    name = ""
    suffix = ""
    _keep = None

    def close(self) -> None:
        """Closes what ``open`` opened, so the next open starts with cold caches."""
        if self._keep is not None and hasattr(self._keep, "close"):
            self._keep.close()
        self._keep = None

    def write(self, path: pathlib.Path, arr: np.ndarray, chunks, blocks) -> None:
        raise NotImplementedError

    def open(self, path: pathlib.Path, cache: bool = True):
        """Returns a callable reading a box (tuple of slices) into a NumPy array. With
        ``cache=False`` any cache of decoded chunks is turned off (zarr and python-blosc2
        have none)."""
        raise NotImplementedError


class Strata(Peer):
    name = "strata"
    suffix = ".strata"

    def write(self, path, arr, chunks, blocks):
        dims = tuple(f"d{i}" for i in range(arr.ndim))
        strata.write_arrays(
            path,
            {"v": (dims, arr)},
            record_dim=dims[0],
            chunks=dict(zip(dims, chunks, strict=True)),
            subchunks=dict(zip(dims, blocks, strict=True)),
        )

    def open(self, path, cache=True):
        var = strata.open(path, cache_bytes=None if cache else 0)["v"]
        return lambda box: var[box]


class NetCDF4Zlib(Peer):
    name = "netCDF4 zlib4+shuffle"
    suffix = ".nc"

    def write(self, path, arr, chunks, blocks):
        import netCDF4

        with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
            dims = []
            for i, n in enumerate(arr.shape):
                nc.createDimension(f"d{i}", n)
                dims.append(f"d{i}")
            v = nc.createVariable("v", arr.dtype, dims, zlib=True, complevel=4, shuffle=True, chunksizes=blocks)
            v.set_auto_maskandscale(False)
            v[...] = arr

    def open(self, path, cache=True):
        import netCDF4

        nc = netCDF4.Dataset(path)
        v = nc["v"]
        v.set_auto_maskandscale(False)
        if not cache:
            v.set_var_chunk_cache(size=0)
        self._keep = nc
        return lambda box: v[box]


class HDF5Blosc2(Peer):
    name = "HDF5+Blosc2 zstd+shuffle"
    suffix = ".h5"

    def write(self, path, arr, chunks, blocks):
        import h5py
        import hdf5plugin

        with h5py.File(path, "w") as f:
            f.create_dataset(
                "v",
                data=arr,
                chunks=blocks,
                **hdf5plugin.Blosc2(cname="zstd", clevel=5, filters=hdf5plugin.Blosc2.SHUFFLE),
            )

    def open(self, path, cache=True):
        import h5py
        import hdf5plugin  # noqa: F401  (registers the filter)

        f = h5py.File(path, "r") if cache else h5py.File(path, "r", rdcc_nbytes=0)
        self._keep = f
        d = f["v"]
        return lambda box: d[box]


class ZarrV3(Peer):
    name = "Zarr v3 Blosc zstd+shuffle"
    suffix = ".zarr"

    def write(self, path, arr, chunks, blocks):
        import zarr
        from zarr.codecs import BloscCodec

        z = zarr.create_array(
            store=str(path),
            shape=arr.shape,
            dtype=arr.dtype,
            chunks=blocks,
            zarr_format=3,
            compressors=BloscCodec(cname="zstd", clevel=5, shuffle="shuffle"),
        )
        z[...] = arr

    def open(self, path, cache=True):
        import zarr

        z = zarr.open_array(str(path), mode="r")
        return lambda box: z[box]


class Blosc2NDArray(Peer):
    name = "python-blosc2 NDArray"
    suffix = ".b2nd"

    def write(self, path, arr, chunks, blocks):
        import blosc2

        blosc2.asarray(
            arr,
            chunks=chunks,
            blocks=blocks,
            urlpath=str(path),
            mode="w",
            cparams=blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=5, filters=[blosc2.Filter.SHUFFLE]),
        )

    def open(self, path, cache=True):
        import blosc2

        a = blosc2.open(str(path), mode="r")
        return lambda box: a[box]


PEERS = [Strata(), NetCDF4Zlib(), HDF5Blosc2(), ZarrV3(), Blosc2NDArray()]

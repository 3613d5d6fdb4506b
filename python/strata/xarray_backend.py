"""xarray backend: ``xr.open_dataset("run.strata", engine="strata")``.

Variables are lazy: xarray asks for outer-indexed selections, and only the sub-chunks those
touch are read and decoded. CF decoding (masking, scaling, times) is xarray's own.
"""

from __future__ import annotations

import os

import numpy as np
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from .dataset import Dataset, Variable, is_store


class StrataBackendArray(BackendArray):
    def __init__(self, variable: Variable):
        self._variable = variable
        self.shape = variable.shape
        self.dtype = variable.dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw_indexing_method
        )

    def _raw_indexing_method(self, key: tuple) -> np.ndarray:
        return self._variable._read_outer(key)


def _is_store(path) -> bool:
    return is_store(path)


class StrataBackendEntrypoint(BackendEntrypoint):
    description = "Open strata stores in xarray"
    url = "https://example.invalid/strata"
    open_dataset_parameters = (
        "filename_or_obj",
        "drop_variables",
        "version",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "use_cftime",
        "decode_timedelta",
    )

    def open_dataset(
        self,
        filename_or_obj,
        *,
        drop_variables=None,
        version=None,
        cache_bytes=None,
        mask_and_scale=True,
        decode_times=True,
        concat_characters=True,
        decode_coords=True,
        use_cftime=None,
        decode_timedelta=None,
    ):
        import xarray as xr

        ds = Dataset(os.fspath(filename_or_obj), version, cache_bytes=cache_bytes)
        drop = set([drop_variables] if isinstance(drop_variables, str) else drop_variables or [])
        variables = {}
        for name, var in ds.variables.items():
            if name in drop:
                continue
            if var.dtype == np.dtype("O"):
                data = var.values
            else:
                data = indexing.LazilyIndexedArray(StrataBackendArray(var))
            encoding = {
                "dtype": var.dtype,
                "chunksizes": var.chunks,
                "preferred_chunks": dict(zip(var.dims, var.chunks, strict=True)) if var.chunks else {},
            }
            variables[name] = xr.Variable(var.dims, data, attrs=dict(var.attrs), encoding=encoding)
        raw = xr.Dataset(variables, attrs=dict(ds.attrs))
        raw.encoding["unlimited_dims"] = set(ds.unlimited_dims)
        decoded = xr.decode_cf(
            raw,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )
        decoded.set_close(None)
        return decoded

    def guess_can_open(self, filename_or_obj) -> bool:
        return str(filename_or_obj).rstrip("/").endswith(".strata") or _is_store(filename_or_obj)


def _register_accessor() -> None:
    from ._dask import register_accessor

    register_accessor()


# xarray imports this module when it lists its backends: ds.strata.to_store is there from then on.
_register_accessor()

"""A store's schema (`Dataset.schema`) says what its manifest says, as typed objects."""

import os

import numpy as np

import strata


def test_schema_agrees_with_the_stored_manifest(tmp_path):
    rng = np.random.default_rng(7)
    field = rng.normal(size=(12, 9, 8)).astype("f4")
    strata.write_arrays(
        tmp_path / "s",
        {
            "temp": (("time", "lat", "lon"), field, {"units": "K", "valid_range": np.array([1, 2], dtype="i2")}),
            "lat": (("lat",), np.linspace(-40, 40, 9)),
            "time": (("time",), np.arange(12, dtype="i8"), {"units": "days since 2000-01-01"}),
        },
        record_dim="time",
        layout="V-M-S",
        bins=8,
        codec="shuffle+zstd:5",
        attrs={"title": "t", "nan": np.float32(np.nan)},
    )
    ds = strata.open(tmp_path / "s")
    schema, m = ds.schema, ds.manifest
    assert (schema.version, schema.format_version, schema.record_dim) == (m["version"], 1, "time")
    assert schema.slab_records == m["slab_records"] and schema.slabs == len(m["slabs"])
    assert [(d.name, d.size, d.unlimited) for d in schema.dims] == [
        (d["name"], d["size"], d.get("unlimited", False)) for d in m["dims"]
    ]
    assert schema.files == len(m["files"])
    assert schema.file_bytes == sum(os.path.getsize(tmp_path / "s" / f["path"]) for f in m["files"])
    bins = m["layout"]["bins"]
    assert schema.layout.startswith(f"V-M-S, {bins['count']} {bins['method']} bins, byte groups f32=")
    assert [(a.name, a.type_name) for a in schema.attrs] == [(a["name"], a["type"]) for a in m["attrs"]]
    assert np.isnan(ds.attrs["nan"]) and ds.attrs["nan"].dtype == np.float32
    for info, stored in zip(schema.variables, m["variables"], strict=True):
        assert (info.name, info.dtype, info.dims) == (stored["name"], stored["dtype"], stored["dims"])
        assert info.codecs == stored.get("codecs", [])
        assert info.chunk == stored.get("chunking", {}).get("chunk")
    temp = ds["temp"]
    assert temp.chains == ["shuffle+zstd:5"]
    assert temp.codecs == [[{"name": "shuffle"}, {"name": "zstd", "configuration": {"level": 5}}]]
    assert temp.attrs["valid_range"].dtype == np.int16 and temp.attrs["valid_range"].tolist() == [1, 2]
    assert temp.attrs["units"] == "K"

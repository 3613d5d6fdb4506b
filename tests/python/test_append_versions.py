"""Appends make new versions; older versions stay readable (time travel)."""

import numpy as np
import pytest

import strata
from conftest import assert_bit_equal, make_nc, raw_source
from strata.cli import main


def test_append_then_read_old_and_new_versions(tmp_path):
    a = make_nc(tmp_path / "a.nc", times=range(0, 12), seed=1)
    b = make_nc(tmp_path / "b.nc", times=range(12, 30), seed=2)
    store = tmp_path / "run.strata"
    r1 = strata.import_file(a, store, slab_records=5)
    r2 = strata.append_file(b, store)
    assert (r1.version, r2.version) == (1, 2)
    assert r2.records == 18
    with raw_source(a) as sa, raw_source(b) as sb:
        full = np.concatenate([sa["temp"][...], sb["temp"][...]])
        times = np.concatenate([sa["time"][...], sb["time"][...]])
        part = sa["temp"][...]
    new = strata.open(store)
    old = strata.open(store, version=1)
    assert new.dims["time"] == 30 and old.dims["time"] == 12
    assert_bit_equal(new["temp"][...], full)
    assert_bit_equal(new["time"][...], times)
    assert_bit_equal(old["temp"][...], part)
    assert_bit_equal(new["temp"].sel(time=slice("2000-01-11", "2000-01-14")), full[10:14])


def test_append_rejects_incompatible_files(tmp_path):
    store = tmp_path / "run.strata"
    strata.import_file(make_nc(tmp_path / "a.nc"), store)
    with pytest.raises(strata.CompatibilityError, match="dimension 'lat' has length 5"):
        strata.append_file(make_nc(tmp_path / "b.nc", nlat=5), store)
    with pytest.raises(strata.NotFoundError):
        strata.append_file(tmp_path / "missing.nc", store)
    assert strata.open(store).version == 1, "failed appends leave the store unchanged"


def test_log_lists_versions(tmp_path, capsys):
    store = tmp_path / "run.strata"
    strata.import_file(make_nc(tmp_path / "a.nc"), store)
    strata.append_file(make_nc(tmp_path / "b.nc", times=range(10, 13)), store)
    assert main(["log", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("version 2") and "13 records" in out[0] and "append b.nc" in out[0]
    assert out[1].startswith("version 1") and "import a.nc" in out[1]

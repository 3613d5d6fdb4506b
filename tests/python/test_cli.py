"""The command line: import, info, query, append, log, help and errors."""

import os
import subprocess
import sys

import netCDF4
import numpy as np
import pytest
import xarray as xr

import strata
from conftest import assert_bit_equal, make_nc, raw_source
from strata.cli import main


@pytest.fixture
def store(tmp_path):
    nc = make_nc(tmp_path / "s.nc", times=range(15), extra_attrs={"scale_factor": np.float32(0.5)})
    out = tmp_path / "s.strata"
    assert main(["import", "-q", str(nc), str(out), "--chunks", "time=4", "--codec", "shuffle+zstd:5"]) == 0
    return nc, out


def test_import_report_and_info(store, tmp_path, capsys):
    nc, out = store
    capsys.readouterr()
    assert main(["import", "-q", str(nc), str(tmp_path / "again.strata")]) == 0
    text = capsys.readouterr().out
    assert "imported" in text and "(version 1)" in text and "ratio" in text and "MB/s" in text
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "time = UNLIMITED ; // (15 currently)" in info
    assert "f32 temp(time, lat, lon) ;" in info
    assert 'temp:units = "degC" ;' in info
    assert "shuffle+zstd:5" in info
    assert "4x17x23" in info


def test_import_shows_progress_unless_quiet(tmp_path):
    nc = make_nc(tmp_path / "p.nc", times=range(6))
    # In a process of its own: tests turn tqdm off (conftest), and tqdm reads that once.
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    run = [sys.executable, "-m", "strata.cli", "import"]
    loud = subprocess.run([*run, str(nc), str(tmp_path / "loud.strata")], capture_output=True, text=True, env=env)
    assert loud.returncode == 0, loud.stderr
    assert "import p.nc:" in loud.stderr and "B/s" in loud.stderr, loud.stderr
    quiet = subprocess.run([*run, "-q", str(nc), str(tmp_path / "q.strata")], capture_output=True, text=True, env=env)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_work_without_a_progress_bar_does_not_import_one(tmp_path):
    # Importing tqdm added 24 ms to a new process's first import of a small file.
    nc = make_nc(tmp_path / "q.nc", times=range(6))
    code = (
        "import sys, strata\n"
        f"strata.import_file({str(nc)!r}, {str(tmp_path / 'q.strata')!r})\n"
        f"strata.export_file({str(tmp_path / 'q.strata')!r}, {str(tmp_path / 'back.nc')!r})\n"
        "assert not [m for m in sys.modules if m.startswith('tqdm')], 'tqdm was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_query_prints_and_writes_nc_and_npy(store, tmp_path, capsys):
    nc, out = store
    with raw_source(nc) as src:
        full = src["temp"][...]
    assert main(["query", str(out), "temp", "--isel", "time=2:9:3", "--sel", "lat=-30:30"]) == 0
    assert "shape=(3, 7, 23)" in capsys.readouterr().out
    npy = tmp_path / "q.npy"
    assert main(["query", str(out), "temp", "--isel", "time=1", "--isel", "lon=::2", "-o", str(npy)]) == 0
    assert_bit_equal(np.load(npy), full[1, :, ::2])
    ncout = tmp_path / "q.nc"
    assert main(["query", str(out), "temp", "--sel", "time=2000-01-03:2000-01-05", "-o", str(ncout)]) == 0
    assert main(["query", str(out), "temp", "--sel", "time=2000:2000", "--isel", "lat=0", "--isel", "lon=0"]) == 0
    assert "shape=(15,)" in capsys.readouterr().out, "a bare year selects the whole year"
    with xr.open_dataset(ncout, mask_and_scale=False) as q:
        assert_bit_equal(q["temp"].values, full[2:5])
        assert q["temp"].attrs["units"] == "degC"
        assert q.sizes["time"] == 3 and "lat" in q.coords


def test_append_and_log(store, tmp_path, capsys):
    _, out = store
    more = make_nc(tmp_path / "more.nc", times=range(15, 20))
    assert main(["append", "-q", str(out), str(more)]) == 0
    assert strata.open(out).dims["time"] == 20
    capsys.readouterr()
    assert main(["info", str(out), "--at", "1"]) == 0
    assert "(15 currently)" in capsys.readouterr().out
    assert main(["query", str(out), "temp", "--at", "1", "--isel", "time=15"]) == 2
    assert "out of range" in capsys.readouterr().err
    assert main(["log", str(out)]) == 0
    assert capsys.readouterr().out.count("version ") >= 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["query", "{store}", "nope"], "no variable 'nope'"),
        (["query", "{store}", "temp", "--isel", "time=99"], "out of range"),
        (["query", "{store}", "temp", "--isel", "time"], "expects DIM=RANGE"),
        (["query", "{store}", "temp", "--isel", "time=a:b"], "START:STOP"),
        (["query", "{store}", "temp", "--sel", "lat=1.2345"], "not a value of coordinate"),
        (["query", "{store}", "temp", "--sel", "time=2000-13"], "is not a date or a range of dates"),
        (["query", "{store}", "temp", "--sel", "lat=north"], "is not a number or a range of numbers"),
        (["query", "{store}", "temp", "-o", "x.csv"], "must end in .nc or .npy"),
        (["info", "/nonexistent/x.strata"], "not a strata store"),
        (["import", "-q", "/nonexistent.nc", "{tmp}/x.strata"], "no such file"),
        (["import", "-q", "{nc}", "{store}"], "already holds a strata store"),
        (["import", "-q", "{nc}", "{tmp}/y.strata", "--codec", "lzma"], "unknown backend codec 'lzma'"),
        (["import", "-q", "{nc}", "{tmp}/z.strata", "--chunks", "depth=3"], "unknown dimension 'depth'"),
    ],
)
def test_bad_input_gives_a_clear_error(store, tmp_path, capsys, argv, message):
    nc, out = store
    argv = [a.format(store=out, tmp=tmp_path, nc=nc) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


def test_entry_point_help_and_version():
    exe = [sys.executable, "-m", "strata.cli"]
    out = subprocess.run([*exe, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"strata {strata.__version__}"
    for cmd in ["import", "info", "query", "append", "log"]:
        text = subprocess.run([*exe, cmd, "--help"], capture_output=True, text=True, check=True).stdout
        assert "usage: strata " + cmd in text
        out = subprocess.run([*exe, cmd, "--version"], capture_output=True, text=True, check=True).stdout
        assert out.strip() == f"strata {strata.__version__}"


def test_output_into_a_closed_pipe_stops_quietly(store):
    """`strata query ... | head`: when the reader leaves, the command stops with SIGPIPE's
    status (141, as a shell reports `cat` killed by it) and prints no error or traceback."""
    _, out = store
    cmd = [sys.executable, "-m", "strata.cli", "query", str(out), "temp", "--where", "temp > -100"]
    cmd += ["--output", "points", "--max-print", "100000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(100)  # far less than the answer (about 250 KB, more than a pipe holds)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "Broken pipe" not in err and "Exception ignored" not in err, err


@pytest.mark.parametrize(
    "options, message",
    [
        (["--port", "99999"], "port 99999 is not 0-65535"),
        (["--port", "-1"], "port -1 is not 0-65535"),
        (["--max-requests", "0"], "max requests 0"),
        (["--max-seconds", "1e30"], "max seconds"),
        (["--max-seconds", "nan"], "max seconds NaN"),
        (["--max-seconds", "-3"], "max seconds -3"),
    ],
)
def test_serve_options_out_of_range_are_clear_errors(tmp_path, capsys, options, message):
    """Numbers a server cannot use are refused before it starts (a port past 65535 was a
    Python OverflowError traceback, a year-long bound a panic)."""
    assert main(["serve", str(tmp_path), *options]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["query", "{store}", "temp", "--at", "99999999999999999999999"], "no version 99999999999999999999999"),
        (["verify", "{store}", "--at", "99999999999999999999999"], "no version 99999999999999999999999"),
        (["verify", "{store}", "--at", "-1"], "a store version is a positive integer, not -1"),
        (["export", "{store}", "{tmp}/e.nc", "--complevel", "99"], "complevel is zlib's level, 0 to 9, not 99"),
        (["index", "{nc}", "--bins", "-3"], "bin count must be 1 to 4096, not -3"),
        (["index", "{nc}", "--bins", "99999999999"], "bin count must be 1 to 4096, not 99999999999"),
        (["analyze", "{nc}", "--samples", "-4"], "samples must be at least 1 (got -4)"),
    ],
)
def test_numbers_out_of_range_are_clear_errors(store, tmp_path, capsys, args, message):
    """Integers beyond what the engine takes (a version past 2^64, a negative bin count)
    are refused with the option's own words, not a Python OverflowError traceback."""
    nc, out = store
    argv = [a.format(store=out, tmp=tmp_path, nc=nc) for a in args]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "Overflow" not in err, err


def test_garbage_input_file_is_a_compatibility_error(tmp_path):
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"this is not netcdf" * 10)
    with pytest.raises(strata.CompatibilityError, match="not a NetCDF or HDF5 file"):
        strata.import_file(bad, tmp_path / "bad.strata")
    assert not (tmp_path / "bad.strata" / "HEAD").exists()


def test_info_value_range_excludes_fill_values(tmp_path, capsys):
    nc = make_nc(tmp_path / "f.nc", times=range(3))
    with netCDF4.Dataset(nc, "a") as ds:
        ds["temp"][0, 0, 0] = -999.0  # the variable's _FillValue
        ds["temp"].set_auto_maskandscale(False)
        ds["temp"][1, 0, 0] = -999.0
    out = tmp_path / "f.strata"
    strata.import_file(nc, out)
    stats = strata.open(out).stats()["temp"]
    with raw_source(nc) as src:
        raw = src["temp"][...]
    valid = raw[(raw != -999.0) & ~np.isnan(raw)]
    assert stats["count"] == valid.size
    assert stats["min"] == float(valid.min()) and stats["max"] == float(valid.max())
    assert main(["info", str(out)]) == 0
    assert "-999" not in capsys.readouterr().out.split("storage")[1]

"""The examples of docs/query.md run as written, in a directory holding the stores they
name (ERSST and CanESM5's sea ice, each imported with no options), and print what their
comments say; the counts they promise are NumPy's over xarray's reading of the files."""

import contextlib
import io
import os
import pathlib
import re
import shlex

import numpy as np
import pytest
import xarray as xr

from conftest import DATA, needs_data
from strata.cli import main

DOC = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "query.md").read_text()
PYTHON = re.findall(r"```python\n(.*?)```", DOC, re.S)
SHELL = [line for b in re.findall(r"```sh\n(.*?)```", DOC, re.S) for line in b.splitlines() if line.strip()]
ERSST = "ersst_v3b_1960-2016_concat.nc"
SICONC = "sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc"

pytestmark = needs_data


@pytest.fixture
def stores(tmp_path, imported, monkeypatch):
    """A directory where the examples' store names mean the stores they describe."""
    os.symlink(imported(ERSST), tmp_path / "ersst.strata")
    os.symlink(imported(SICONC), tmp_path / "siconc.strata")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def promised(code: str) -> list[str]:
    return re.findall(r"^print\(.*?\)\s*#\s*(.*)$", code, re.M)


def test_the_examples_are_found():
    assert len(PYTHON) >= 6 and sum(len(promised(b)) for b in PYTHON) >= 10
    assert any("siconc" in line for line in SHELL) and any(line.startswith("strata explain") for line in SHELL)
    assert any("EXPLAIN" in line for line in SHELL)


def test_python_examples_print_what_their_comments_say(stores):
    # In order and in one namespace, as a reader pastes them into one session.
    namespace: dict = {}
    for code in PYTHON:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
        printed, comments = out.getvalue().splitlines(), promised(code)
        if not comments:
            continue  # what it prints is the reader's own (timings)
        assert len(printed) == len(comments), (printed, comments)
        for line, comment in zip(printed, comments, strict=True):
            # The value leads the comment; an explanation may follow it after a colon.
            assert comment == line or comment.startswith(line + ":"), f"printed {line!r}, the comment says {comment!r}"
    assert (stores / "hot.csv").stat().st_size > 0


def test_shell_examples_run(stores, capsys):
    for line in SHELL:
        args = shlex.split(line, comments=True)
        assert args[0] == "strata", line
        assert main(args[1:]) == 0, line
        out = capsys.readouterr().out
        if "--output count" in line and "siconc" in line:
            assert "39507" in out, out
        if "EXPLAIN" in line:
            # The plans as lines, the scan as the page shows it.
            assert "\nphysical_plan:\n" in out and "StrataScan: region=[time 0:684, lat 50:89, lon 0:180]" in out, out


def test_the_promised_counts_are_numpys():
    with xr.open_dataset(DATA / ERSST) as ds:
        sst = ds["sst"].load()
        assert int((sst > 28).sum()) == 889367
        assert int((sst.sel(time=slice("2015", "2016")) > 28).sum()) == 40260
        tropics = sst.sel(time=slice("2000-01-01", None)).where(abs(sst["lat"]) <= 10)
        assert int((tropics > 28).sum()) == 184967
        assert sst.size == 10957680
        assert sst.sel(time=slice("2000-01", "2000-06"), lat=slice(-10, 10)).shape == (6, 11, 180)
    with xr.open_dataset(DATA / SICONC) as ds:
        ice = ds["siconc"].load()
        assert int(((ice > 50) & (ds["latitude"] >= 60)).sum()) == 39507
        assert np.isfinite(ice.values).any()

"""The examples of docs/server.md run as written against `strata serve` on the stores they
name (ERSST as `ersst`, CanESM5's sea ice as `ocean/sic`), their address the test
server's: the Python clients (netCDF4 and pydap over DAP2, strata.remote) and the
command lines (curl, ncdump, strata fetch)."""

import json
import os
import pathlib
import re
import subprocess
import sys

import netCDF4
import pytest

import strata
from conftest import DATA, needs_data, start_server

DOC = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
PYTHON = re.findall(r"```python\n(.*?)```", DOC, re.S)
# The blocks that start servers or import files of their own are the setup this test does.
SHELL = [b for b in re.findall(r"```sh\n(.*?)```", DOC, re.S) if "strata serve" not in b and "strata index" not in b]
ADDRESS = "http://127.0.0.1:8470"

pytestmark = needs_data


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    strata.import_file(DATA / "ersst_v3b_1960-2016_concat.nc", root / "ersst")
    (root / "ocean").mkdir()
    strata.import_file(DATA / "sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc", root / "ocean" / "sic")
    proc, base = start_server(root, root.parent / "server.log")
    yield base
    proc.terminate()
    proc.wait(timeout=30)


def test_the_examples_are_found():
    assert len(PYTHON) >= 5 and len(SHELL) >= 6
    assert all(ADDRESS in b for b in PYTHON + SHELL)


def test_python_examples(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for code in PYTHON:
        exec(code.replace(ADDRESS, server), namespace)
    # What the examples' comments say they get: the hyperslab, masked where the constraint
    # fails, masked outside the area, and the files fetched.
    assert namespace["sst"].shape == (12, 70, 90)
    warm = namespace["warm"]
    assert warm.shape == (12, 89, 180) and 0 < warm.count() < warm.size and warm.compressed().min() > 25
    arctic = namespace["arctic"]
    assert 0 < arctic.count() < arctic.size
    with netCDF4.Dataset("sst.nc") as nc:
        assert nc["sst"].shape == (240, 89, 180)
    assert pathlib.Path("warm.parquet").stat().st_size > 0


def test_shell_examples(server, tmp_path):
    # `strata` as the tests' interpreter runs it (the venv's script may not be on PATH).
    prelude = f'set -euo pipefail\nstrata() {{ "{sys.executable}" -m strata.cli "$@"; }}\n'
    outputs = []
    for block in SHELL:
        r = subprocess.run(
            ["bash", "-c", prelude + block.replace(ADDRESS, server)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TQDM_DISABLE": "1"},
        )
        assert r.returncode == 0, (block, r.stderr[-2000:])
        outputs.append(r.stdout)
    # The count the first curl's comment shows.
    first = next(o for b, o in zip(SHELL, outputs, strict=True) if "api/query/ersst?where" in b)
    # (curl adds no newline: the next command's output follows the JSON on its line.)
    assert json.JSONDecoder().raw_decode(first)[0]["count"] == int(re.search(r'"count":(\d+)', DOC).group(1))
    for name, shape in (("tropics-1999.nc", (6, 11, 180)), ("sst2000.nc", (12, 89, 180))):
        with netCDF4.Dataset(tmp_path / name) as nc:
            assert nc["sst"].shape == shape, name
    assert (tmp_path / "warm.parquet").stat().st_size > 0

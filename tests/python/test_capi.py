"""The C API: a C program, a Fortran program (ISO_C_BINDING) and MPI ranks in C write
stores through libstrata; what they wrote reads back equal to the values they computed."""

import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import strata

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "crates" / "strata-capi" / "include"
LIB = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", pathlib.Path.home() / ".cache/strata/target")) / "release"
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def libstrata():
    if not (LIB / "libstrata.so").exists():
        pytest.fail(f"{LIB / 'libstrata.so'} is missing: `make capi` builds it (cargo build --release -p strata-capi)")
    return LIB


def build(compiler, source, out, lib, *extra):
    cmd = [compiler, "-O1", str(source), f"-I{INCLUDE}", f"-L{lib}", "-lstrata", f"-Wl,-rpath,{lib}", "-o", str(out)]
    # In the output's directory: gfortran writes its module file (strata.mod) where it runs.
    result = subprocess.run([*cmd, *extra], capture_output=True, text=True, cwd=pathlib.Path(out).parent)
    assert result.returncode == 0, result.stderr
    return out


def heat_reference(steps, ny=96, nx=192):
    """The C example's field, computed the same way in NumPy."""
    j, i = np.mgrid[0:ny, 0:nx]
    field = 280.0 + 20.0 * np.exp(-((j - ny / 2.0) ** 2 + (i - nx / 3.0) ** 2) / 200.0)
    out = []
    for _ in range(steps):
        lap = np.roll(field, -1, 0) + np.roll(field, 1, 0) + np.roll(field, -1, 1) + np.roll(field, 1, 1) - 4 * field
        field = field + 0.2 * lap
        out.append(field.astype("f4"))
    return np.stack(out)


def test_c_program_writes_reads_and_queries(tmp_path, libstrata):
    exe = build("gcc", ROOT / "examples/c/heat.c", tmp_path / "heat", libstrata, "-lm")
    result = subprocess.run([exe, tmp_path / "s", "25"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "last step read back equal" in result.stdout
    assert "status 3: no variable 'nope'" in result.stdout
    ds = strata.open(tmp_path / "s")
    want = heat_reference(25)
    got = ds["temp"][:]
    # The same operations in the same order, in C and in NumPy: bit for bit.
    assert got.tobytes() == want.tobytes()
    hot = int(result.stdout.split("read back equal, ")[1].split()[0])
    assert hot == int((got > 290).sum())  # the C query's count, against NumPy on the stored values
    assert ds.manifest["layout"]["order"] == ["V", "S"]  # from the config text the program passed
    assert ds["temp"].attrs["missing_value"] == -999.0 and ds.attrs["title"] == "2-D heat diffusion from C"
    np.testing.assert_array_equal(ds["time"][:], 6.0 * np.arange(25))
    # The fixed field the program wrote in three blocks of its chunks, last first.
    j, i = np.mgrid[0:96, 0:192]
    np.testing.assert_array_equal(ds["depth"][:], (1000.0 + 10.0 * j + i).astype("f4"))
    assert ds["depth"].chunks == (32, 192)
    assert "depth fits in blocks of 96 x 192" in result.stdout


@pytest.mark.skipif(shutil.which("gfortran") is None, reason="gfortran is not installed")
def test_fortran_program_writes_through_iso_c_binding(tmp_path, libstrata):
    exe = build("gfortran", ROOT / "examples/fortran/heat.f90", tmp_path / "heat_f", libstrata)
    result = subprocess.run([exe, tmp_path / "s"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fortran wrote version 1 with 24 steps" in result.stdout
    t, j, i = np.meshgrid(np.arange(24), np.arange(1, 49), np.arange(1, 97), indexing="ij")
    want = (270.0 + ((i * 7 + j * 3 + t) % 41) * 0.5).astype("f4")
    ds = strata.open(tmp_path / "s")
    assert ds["temp"][:].tobytes() == want.tobytes()
    assert ds["temp"].attrs["units"] == "K"


@pytest.mark.skipif(shutil.which("mpicc") is None, reason="Open MPI's mpicc is not installed")
@pytest.mark.parametrize(("ranks", "placement"), [(2, "dense"), (4, "hybrid")])
def test_mpi_ranks_in_c_write_one_store(tmp_path, libstrata, ranks, placement):
    exe = build("mpicc", ROOT / "examples/c/mpi_blocks.c", tmp_path / "mpi_blocks", libstrata)
    env = dict(os.environ, **MPI_ENV)
    cmd = ["mpirun", "--oversubscribe", "-n", str(ranks), exe, tmp_path / "s", placement]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"committed version 1 with {ranks} ranks ({placement})" in result.stdout
    t, j, i = np.meshgrid(np.arange(30), np.arange(64), np.arange(128), indexing="ij")
    ds = strata.open(tmp_path / "s")
    assert ds["field"][:].tobytes() == (((t * 31 + j * 7 + i) % 101) * 0.25).astype("f4").tobytes()
    np.testing.assert_array_equal(ds["x"][:], 0.5 * np.arange(128))
    assert strata._core.verify(str(tmp_path / "s"), None, True)[4] == []


def test_header_declares_every_exported_function(libstrata):
    header = (INCLUDE / "strata.h").read_text()
    symbols = subprocess.run(["nm", "-D", "--defined-only", libstrata / "libstrata.so"], capture_output=True, text=True)
    exported = {line.split()[-1] for line in symbols.stdout.splitlines() if " T strata_" in line}
    assert exported and all(f" {name}(" in header or f"*{name}(" in header for name in exported), exported

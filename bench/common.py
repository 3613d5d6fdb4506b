"""Shared helpers for the benchmarks: datasets, peers' writers and readers, timing."""

from __future__ import annotations

import os
import pathlib
import platform
import shutil
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
WORK = ROOT / "bench" / "work"


def dir_size(path: pathlib.Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def fresh(path: pathlib.Path) -> pathlib.Path:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    return path


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def git_rev() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    except OSError:
        return "?"


def random_boxes(shape, fraction: float, n: int, rng) -> list[tuple[slice, ...]]:
    """``n`` random boxes each holding about ``fraction`` of the elements: every axis gets
    the same share ``fraction ** (1/ndim)`` of its length."""
    share = fraction ** (1 / len(shape))
    boxes = []
    for _ in range(n):
        box = []
        for length in shape:
            size = max(1, round(length * share))
            start = int(rng.integers(0, length - size + 1))
            box.append(slice(start, start + size))
        boxes.append(tuple(box))
    return boxes


__all__ = ["DATA", "WORK", "dir_size", "fresh", "git_rev", "machine", "random_boxes"]


def best(fn, repeat=5):
    """(the shortest of ``repeat`` timings of ``fn()`` in seconds, its last result)."""
    out, t = None, float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return t, out

"""Refuse a CPU the extension was not built for, before loading it.

The Rust crates are built for x86-64-v3 (see `.cargo/config.toml`); on an older x86-64 CPU
the extension would die on its first AVX2 instruction (SIGILL, no traceback). Importing
this module (`strata/__init__.py` does so first) reads the CPU's flags and raises an
ImportError that says what to do instead.
"""

from __future__ import annotations

import os
import platform

# What target-cpu=x86-64-v3 lets the compiler use, as Linux's /proc/cpuinfo names it
# (LZCNT is "abm").
X86_64_V3 = ("avx", "avx2", "bmi1", "bmi2", "fma", "f16c", "movbe", "abm")

SKIP = "STRATA_SKIP_CPU_CHECK"


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The first processor's flags, or None where the file is not there to read."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def missing_features(flags: set[str] | None, machine: str) -> list[str]:
    """The x86-64-v3 features `flags` lacks (none off x86-64, or when flags are unknown)."""
    if machine.lower() not in ("x86_64", "amd64") or flags is None:
        return []
    return [f for f in X86_64_V3 if f not in flags]


def check() -> None:
    if os.environ.get(SKIP):
        return
    missing = missing_features(cpu_flags(), platform.machine())
    if missing:
        raise ImportError(
            "strata's extension is built for x86-64-v3 CPUs (AVX2, BMI1/2, FMA; Intel Haswell, "
            f"AMD Zen or later) and this CPU lacks {', '.join(missing)}. Rebuild it for this CPU: "
            f"RUSTFLAGS=-Ctarget-cpu=x86-64 make build, then set {SKIP}=1."
        )


check()

"""Attributes to and from the manifest's typed JSON form (docs/format.md, "Attributes")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import CompatibilityError

NUMERIC_TYPES = {
    "i1": "i8",
    "u1": "u8",
    "i2": "i16",
    "u2": "u16",
    "i4": "i32",
    "u4": "u32",
    "i8": "i64",
    "u8": "u64",
    "f4": "f32",
    "f8": "f64",
}
_NUMPY = {v: k for k, v in NUMERIC_TYPES.items()}


def _floats_json(flat: np.ndarray, type_name: str) -> list:
    """Finite floats as JSON numbers; NaN (with its exact bit pattern) and infinities as text."""
    width, fdt, udt = (8, "<f4", "<u4") if type_name == "f32" else (16, "<f8", "<u8")
    floats = flat.astype(fdt)
    out: list = []
    for f, bits in zip(floats, floats.view(udt), strict=True):
        if math.isnan(f):
            out.append(f"NaN:0x{int(bits):0{width}x}")
        elif math.isinf(f):
            out.append("Infinity" if f > 0 else "-Infinity")
        else:
            out.append(float(f))
    return out


def encode(name: str, value: Any) -> dict:
    """One attribute as ``{"name", "type", "value"}``."""
    if isinstance(value, str):
        return {"name": name, "type": "string", "value": value}
    if isinstance(value, bytes):
        return {"name": name, "type": "string", "value": value.decode("utf-8", "replace")}
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return {"name": name, "type": "strings", "value": list(value)}
    arr = np.asarray(value)
    if arr.dtype.kind in "US":
        return {"name": name, "type": "strings", "value": [str(v) for v in arr.ravel()]}
    if arr.dtype.kind == "b":
        arr = arr.astype("i1")
    key = arr.dtype.newbyteorder("=").str[1:] if arr.dtype.byteorder in "<>" else arr.dtype.str[1:]
    type_name = NUMERIC_TYPES.get(key)
    if type_name is None:
        raise CompatibilityError(f"attribute '{name}' has unsupported type {arr.dtype}")
    flat = arr.ravel()
    if type_name in ("f32", "f64"):
        values = _floats_json(flat, type_name)
    else:
        values = [int(v) for v in flat]
    return {"name": name, "type": type_name, "value": values}


def _float_value(v: Any, type_name: str) -> Any:
    if not isinstance(v, str):
        return v
    if v == "Infinity":
        return math.inf
    if v == "-Infinity":
        return -math.inf
    bits = int(v.split("0x", 1)[1], 16) if v.startswith("NaN:0x") else None
    if bits is None:
        return math.nan
    return np.array([bits], dtype="u4" if type_name == "f32" else "u8").view("f4" if type_name == "f32" else "f8")[0]


def decode(attr: dict) -> Any:
    """The Python value of a manifest attribute: str, list of str, or NumPy scalar/array."""
    t, v = attr["type"], attr["value"]
    if t in ("string", "strings"):
        return v
    dtype = np.dtype(_NUMPY[t]).newbyteorder("<")
    if t in ("f32", "f64"):
        arr = np.empty(len(v), dtype=dtype)
        for i, x in enumerate(v):
            arr[i] = _float_value(x, t)
    else:
        arr = np.array(v, dtype=dtype)
    arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr[0] if len(arr) == 1 else arr


def decode_all(attrs: list[dict]) -> dict[str, Any]:
    return {a["name"]: decode(a) for a in attrs}


def encode_all(attrs: dict[str, Any]) -> list[dict]:
    return [encode(k, v) for k, v in attrs.items()]

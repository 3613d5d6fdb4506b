"""How long a NetCDF classic file (CDF-1, CDF-2, CDF-5) must be, from its header.

The NetCDF library reads a truncated classic file without complaint and returns whatever
the missing bytes decode to; the header says where every variable's data starts and how
many records there are, so a file shorter than that is refused before anything is read.
"""

from __future__ import annotations

import struct

# nc_type -> bytes per element (NC_BYTE ... NC_UINT64).
_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}
_STREAMING = 0xFFFFFFFF


class _Header:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 4
        self.version = data[3]
        self.wide = self.version == 5  # CDF-5: 8-byte counts and sizes

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("the header ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def count(self) -> int:
        return struct.unpack(">Q", self.take(8))[0] if self.wide else self.u32()

    def offset(self) -> int:
        return struct.unpack(">Q", self.take(8))[0] if self.version in (2, 5) else self.u32()

    def name(self) -> None:
        n = self.count()
        self.take((n + 3) // 4 * 4)

    def attributes(self) -> None:
        tag, n = self.u32(), self.count()
        if tag == 0 and n == 0:
            return
        for _ in range(n):
            self.name()
            nc_type, nelems = self.u32(), self.count()
            self.take((nelems * _SIZES.get(nc_type, 1) + 3) // 4 * 4)


def is_classic(header: bytes) -> bool:
    """Whether ``header`` (at least its first 8 bytes) starts a NetCDF classic file: CDF-1,
    CDF-2 (64-bit offsets) or CDF-5."""
    return header[:3] == b"CDF" and len(header) >= 8 and header[3] in (1, 2, 5)


def required_length(header: bytes) -> int | None:
    """Bytes a classic file with this header must hold at least; None when ``header`` is
    not a classic header or the record count is not written yet (a file being streamed)."""
    if not is_classic(header):
        return None
    h = _Header(header)
    numrecs = h.count()
    if numrecs == _STREAMING:
        return None
    dims = []
    tag, n = h.u32(), h.count()
    if not (tag == 0 and n == 0):
        for _ in range(n):
            h.name()
            dims.append(h.count())
    h.attributes()
    tag, n = h.u32(), h.count()
    variables = []
    if not (tag == 0 and n == 0):
        for _ in range(n):
            h.name()
            ids = [h.count() for _ in range(h.count())]
            h.attributes()
            nc_type, vsize, begin = h.u32(), h.count(), h.offset()
            record = bool(ids) and dims[ids[0]] == 0
            elements = 1
            for i in ids[1:] if record else ids:
                elements *= dims[i]
            variables.append((record, begin, vsize, elements * _SIZES.get(nc_type, 1)))
    need = h.pos
    record_vars = [v for v in variables if v[0]]
    # One record variable alone is not padded; otherwise each record is the sum of vsizes.
    recsize = record_vars[0][3] if len(record_vars) == 1 else sum(v[2] for v in record_vars)
    for record, begin, _, nbytes in variables:
        if record:
            if numrecs:
                need = max(need, begin + (numrecs - 1) * recsize + nbytes)
        else:
            need = max(need, begin + nbytes)
    return need


# How much of a classic file is read to find the length its header describes.
HEADER_READ = 1 << 20


def truncation(head: bytes, size: int) -> str | None:
    """Why a file of ``size`` bytes starting with ``head`` (its first ``HEADER_READ`` bytes,
    or all of it) is a truncated classic file, or None (also for other formats)."""
    if not is_classic(head[:8]):
        return None
    try:
        need = required_length(head[:HEADER_READ])
    except (ValueError, IndexError, struct.error) as err:
        return f"its NetCDF classic header is damaged ({err})"
    if need is not None and size < need:
        return f"it holds {size} bytes but its header describes {need}: the file is truncated"
    return None

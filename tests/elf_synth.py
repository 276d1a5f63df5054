"""A minimal 64-bit little-endian ELF file with a .dynamic section naming the given DT_NEEDED
libraries: what `readelf -d` shows of a real extension (e.g. PyPI's torchao 0.17.0
_C_cutlass_90a.abi3.so NEEDs libcudart.so.13, read 2026-12-03 from
torchao-0.17.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl, sha256 87a418ce...),
without committing a binary."""

from __future__ import annotations

import struct


def elf_needing(*libs: str) -> bytes:
    dynstr = b"\0" + b"".join(lib.encode() + b"\0" for lib in libs)
    offsets, pos = [], 1
    for lib in libs:
        offsets.append(pos)
        pos += len(lib) + 1
    dynamic = b"".join(struct.pack("<qQ", 1, off) for off in offsets) + struct.pack("<qQ", 0, 0)
    shstr = b"\0.dynstr\0.dynamic\0"
    head = 64
    dynstr_off = head
    dynamic_off = dynstr_off + len(dynstr)
    shstr_off = dynamic_off + len(dynamic)
    shoff = shstr_off + len(shstr)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 4, 3)
    sections = [
        struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, dynstr_off, len(dynstr), 0, 0, 1, 0),
        struct.pack("<IIQQQQIIQQ", 9, 6, 0, 0, dynamic_off, len(dynamic), 1, 0, 8, 16),
        struct.pack("<IIQQQQIIQQ", 18, 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0),
    ]
    return header + dynstr + dynamic + shstr + b"".join(sections)

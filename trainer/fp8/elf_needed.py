"""The shared libraries an ELF file names as DT_NEEDED, read from its dynamic section (pure
Python: the trainer cannot count on readelf in an image). What decides whether torchao's
MXFP8 CUDA extension loads is the CUDA runtime it links (libcudart.so.N), not its file name."""

from __future__ import annotations

import struct
from pathlib import Path

_SHT_DYNAMIC = 6
_DT_NEEDED = 1


def needed(path: Path) -> list[str]:
    """DT_NEEDED names of a 64-bit little-endian ELF file; [] when it is not one."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    out: list[str] = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != _SHT_DYNAMIC:
            continue
        strtab = sections[link][4]
        for pos in range(offset, offset + size, entsize or 16):
            tag, value = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == _DT_NEEDED:
                end = data.index(b"\0", strtab + value)
                out.append(data[strtab + value : end].decode())
    return out

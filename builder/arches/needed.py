"""The shared libraries an ELF file NEEDs (its DT_NEEDED entries), read from its bytes without
readelf: which CUDA runtime (libcudart.so.12, libcudart.so.13) a wheel's extension loads."""

from __future__ import annotations

import re
import struct

ELF_MAGIC = b"\x7fELF"
SHT_DYNAMIC = 6
DT_NULL = 0
DT_NEEDED = 1
CUDART = re.compile(r"libcudart\.so\.(\d+)")


class ElfError(ValueError):
    """Not an ELF file this reader takes (64-bit little-endian), or a malformed one."""


def needed(data: bytes) -> tuple[str, ...]:
    """The DT_NEEDED names of a 64-bit little-endian ELF file, in file order."""
    if data[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)  # fmt: skip
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
        ]
        out: list[str] = []
        for sec in sections:
            if sec[1] != SHT_DYNAMIC:
                continue
            offset, size, link = sec[4], sec[5], sec[6]
            strtab_off = sections[link][4]
            for pos in range(offset, offset + size, 16):
                tag, val = struct.unpack_from("<qQ", data, pos)
                if tag == DT_NULL:
                    break
                if tag == DT_NEEDED:
                    start = strtab_off + val
                    end = data.index(b"\0", start)
                    out.append(data[start:end].decode("utf-8", "replace"))
        return tuple(out)
    except (struct.error, IndexError, ValueError) as exc:
        raise ElfError(f"malformed ELF file: {exc}") from None


def cudart_major(names: tuple[str, ...]) -> int | None:
    """The CUDA major of the libcudart.so.N among `names`, None when none is needed."""
    for name in names:
        m = CUDART.fullmatch(name)
        if m:
            return int(m[1])
    return None

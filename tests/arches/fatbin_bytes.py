"""Hand-made CUDA binaries: fatbin entries, containers and minimal ELF64 files around them.

They complement the real binaries (nvcc output, PyPI wheels): these can be damaged on purpose.
"""

from __future__ import annotations

import struct

from builder.arches.fatbin import KIND_ELF, KIND_PTX, MAGIC

SASS = KIND_ELF
PTX = KIND_PTX


def entry(
    kind: int,
    arch: int,
    *,
    flags: int = 0x11,
    payload: bytes = b"\xaa" * 24,
    header_size: int = 64,
    compressed_size: int = 0,
    decompressed_size: int = 0,
    version: tuple[int, int] = (1, 8),
    declared_size: int | None = None,
) -> bytes:
    size = len(payload) if declared_size is None else declared_size
    head = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind,
        0x0101,
        header_size,
        size,
        compressed_size,
        0,
        version[1],
        version[0],
        arch,
        0,
        0,
        flags,
        0,
        decompressed_size,
    )
    return head + b"\0" * (header_size - 64) + payload


def container(*entries: bytes, version: int = 1, declared_size: int | None = None) -> bytes:
    body = b"".join(entries)
    size = len(body) if declared_size is None else declared_size
    return struct.pack("<IHHQ", MAGIC, version, 16, size) + body


def elf64(
    sections: dict[str, bytes], *, ei_class: int = 2, ei_data: int = 1, nobits: tuple[str, ...] = ()
) -> bytes:
    """A relocatable ELF64 with the given sections (plus the null and name-table sections)."""
    names = ["", *sections, ".shstrtab"]
    strtab = b"\0".join(n.encode() for n in names) + b"\0"
    offsets = {}
    pos = 0
    for n in names:
        offsets[n] = pos
        pos += len(n.encode()) + 1
    blob = bytearray(b"\0" * 64)
    placed: list[tuple[str, int, int, int]] = []  # name, type, offset, size
    for name, data in sections.items():
        while len(blob) % 8:
            blob.append(0)
        typ = 8 if name in nobits else 1
        placed.append((name, typ, len(blob), len(data)))
        if typ == 1:
            blob += data
    placed.append((".shstrtab", 3, len(blob), len(strtab)))
    blob += strtab
    while len(blob) % 8:
        blob.append(0)
    shoff = len(blob)
    blob += b"\0" * 64  # the null section
    for name, typ, off, size in placed:
        blob += struct.pack("<IIQQQQIIQQ", offsets[name], typ, 0, 0, off, size, 0, 0, 8, 0)
    ident = b"\x7fELF" + bytes([ei_class, ei_data, 1]) + b"\0" * 9
    header = struct.pack(
        "<16sHHIQQQIHHHHHH",
        ident,
        1,
        62,
        1,
        0,
        0,
        shoff,
        0,
        64,
        0,
        0,
        64,
        len(placed) + 1,
        len(placed),
    )
    blob[:64] = header
    return bytes(blob)

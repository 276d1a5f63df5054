"""List the SASS and PTX targets compiled into CUDA binaries, without a GPU or a CUDA toolkit.

A CUDA host binary (a shared library such as libtorch_cuda.so, an object file, an executable)
keeps its device code in the ELF section `.nv_fatbin` (`__nv_relfatbin` in relocatable objects
built with -rdc). Some libraries carry both (libnccl, libnvshmem_host, libtorch_nvshmem: the
relocatable inputs of their device link come first in the file); the reader takes `.nv_fatbin`,
the code the CUDA runtime loads, and `__nv_relfatbin` only where `.nv_fatbin` is absent.
The section holds one or more fatbin containers back to back; each container holds entries,
one per target: a cubin (SASS for one sm_XY), PTX (compute_XY, JIT-compiled by the driver for
newer GPUs) or LTO IR. Every entry starts with a header that is never compressed, so
the targets can be listed by reading headers alone: this reader seeks from header to header and
never reads (or decompresses) a payload, so a 1 GB library costs a few thousand small reads.

Layout (little-endian, packed; as read by RWTH-ACS/cricket's cpu/cpu-elf2.c,
https://github.com/RWTH-ACS/cricket/blob/5d55bd58/cpu/cpu-elf2.c; checked here against nvcc 13.0
output and NVIDIA's cuobjdump on real libraries):

    container   u32 magic = 0xBA55ED50, u16 version = 1, u16 header_size (16), u64 size
    entry       @0 u16 kind (1 PTX, 2 ELF/cubin, 8 LTO IR)   @2 u16 version
                @4 u32 header_size (64..120; the payload follows it)
                @8 u64 size (padded payload; the next entry is at entry + header_size + size)
                @16 u32 compressed_size   @24 u16 minor, u16 major   @28 u32 arch (e.g. 100)
                @32 u32 name_offset, u32 name_len   @40 u64 flags   @56 u64 decompressed_size
    flags       0x1 64-bit, 0x2 debug, 0x10 Linux, 0x2000 LZ4-compressed, 0x8000 Zstd-compressed,
                0x100000 arch-specific target (sm_90a), 0x200000 family target (sm_100f)

This module imports only the standard library: `trainimg arches IMAGE` and `trainimg verify`
run it, as a script, with the image's own Python inside the container, so a 1 GB library is
read in place instead of being copied out. That is also why it is one file of ~490 lines,
over 400 lines: builder/arches/scan.py passes this file's text to `python -c`, so the ELF
section finder, the container walk and the scan report must travel together.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

MAGIC = 0xBA55ED50
LEGACY_MAGIC = 0x1EE55A01  # pre-CUDA-4 fatbins; a different format, not read here
SECTIONS = (".nv_fatbin", "__nv_relfatbin")

KIND_PTX = 1
KIND_ELF = 2
KIND_LTOIR = 8
KIND_NAMES = {KIND_PTX: "ptx", KIND_ELF: "sass", KIND_LTOIR: "ltoir"}

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_LINUX = 0x10
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_ELF64_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_ELF64_SECTION = struct.Struct("<IIQQQQIIQQ")
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
_CHUNK = 1 << 16


class FatbinError(Exception):
    """A file that cannot be listed; `path` names it and the message says why."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


class NotElfError(FatbinError):
    """Neither an ELF64 little-endian file nor a raw fatbin."""


class NoDeviceCode(FatbinError):
    """A valid ELF file without a .nv_fatbin section: it carries no CUDA kernels."""


class CorruptFatbin(FatbinError):
    """The section is there but its containers or entries do not add up (truncated, damaged)."""


@dataclass(frozen=True)
class FatbinEntry:
    """One compiled target inside a fatbin container."""

    kind: str  # sass | ptx | ltoir | unknown-<n>
    arch: int  # SM number: 90, 100, 120
    flags: int
    container: int  # index of its container in the library, from 0
    offset: int  # absolute file offset of the entry header
    header_size: int
    size: int
    compressed_size: int
    decompressed_size: int
    version: tuple[int, int]  # cubin ELF ABI / PTX ISA version as (major, minor)

    @property
    def suffix(self) -> str:
        if self.flags & FLAG_ARCH_SPECIFIC:
            return "a"
        if self.flags & FLAG_FAMILY:
            return "f"
        return ""

    @property
    def name(self) -> str:
        """sm_100 / sm_90a for SASS, compute_120 for PTX, lto_90 for LTO IR."""
        prefix = {"sass": "sm", "ptx": "compute", "ltoir": "lto"}.get(self.kind, self.kind)
        return f"{prefix}_{self.arch}{self.suffix}"

    @property
    def compression(self) -> str | None:
        if self.flags & FLAG_ZSTD:
            return "zstd"
        if self.flags & FLAG_LZ4:
            return "lz4"
        return None

    @property
    def debug(self) -> bool:
        return bool(self.flags & FLAG_DEBUG)


def arch_key(name: str) -> tuple[int, int, str]:
    """Sort key: sm_70 < sm_90 < sm_90a < sm_100 < compute_120."""
    body = name.split("_", 1)[-1]
    digits = body.rstrip("abcdefghijklmnopqrstuvwxyz")
    return (int(digits) if digits.isdigit() else 0, 0 if name.startswith("sm_") else 1, body)


@dataclass(frozen=True)
class LibraryScan:
    """What one binary carries: its containers and every entry header, in file order."""

    path: str
    section: str
    containers: int
    entries: tuple[FatbinEntry, ...]

    def names(self, kind: str) -> list[str]:
        return sorted({e.name for e in self.entries if e.kind == kind}, key=arch_key)

    @property
    def sass(self) -> list[str]:
        return self.names("sass")

    @property
    def ptx(self) -> list[str]:
        return self.names("ptx")

    @property
    def ltoir(self) -> list[str]:
        return self.names("ltoir")

    def container_counts(self) -> dict[str, int]:
        """Target name -> number of containers that carry it."""
        seen: dict[str, set[int]] = {}
        for e in self.entries:
            seen.setdefault(e.name, set()).add(e.container)
        return {n: len(c) for n, c in sorted(seen.items(), key=lambda kv: arch_key(kv[0]))}

    @property
    def with_code(self) -> int:
        """Containers that hold at least one entry."""
        return len({e.container for e in self.entries})

    def in_every_container(self, kind: str) -> list[str]:
        """Targets of `kind` that every non-empty container carries: the library's build arches
        (for torch, exactly TORCH_CUDA_ARCH_LIST); the rest are kernels built for one arch."""
        n = self.with_code
        return [
            name
            for name, c in self.container_counts().items()
            if c == n and name in self.names(kind)
        ]

    @property
    def compressed(self) -> int:
        return sum(1 for e in self.entries if e.compression)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "section": self.section,
            "containers": self.containers,
            "entries": len(self.entries),
            "sass": self.sass,
            "ptx": self.ptx,
            "ltoir": self.ltoir,
            "sass_in_every_container": self.in_every_container("sass"),
            "ptx_in_every_container": self.in_every_container("ptx"),
            "container_counts": self.container_counts(),
            "compressed_entries": self.compressed,
            "compression": sorted({e.compression for e in self.entries if e.compression}),
            "per_container": [
                sorted({e.name for e in self.entries if e.container == i}, key=arch_key)
                for i in range(self.containers)
            ],
        }


def _read_exact(f: BinaryIO, offset: int, size: int, path: str, what: str) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise CorruptFatbin(
            path,
            f"truncated: {what} at offset {offset} needs {size} bytes, "
            f"the file has {len(data)} there",
        )
    return data


def _file_size(f: BinaryIO) -> int:
    f.seek(0, os.SEEK_END)
    return f.tell()


def find_section(f: BinaryIO, path: str) -> tuple[str, int, int] | None:
    """(name, offset, size) of the device-code section of an ELF64 file; None when absent.

    A raw fatbin (the output of `nvcc -fatbin`) is its own section. Raises NotElfError for
    anything else.
    """
    size = _file_size(f)
    f.seek(0)
    ident = f.read(16)
    if len(ident) >= 4 and struct.unpack_from("<I", ident)[0] == MAGIC:
        return ("fatbin", 0, size)
    if ident[:4] != b"\x7fELF":
        raise NotElfError(path, "not an ELF file (no \\x7fELF magic) and not a raw fatbin")
    if len(ident) < 16:
        raise NotElfError(path, "truncated ELF header")
    if ident[4] != 2:
        raise NotElfError(path, f"ELF class {ident[4]} is not ELF64: CUDA host binaries are 64-bit")
    if ident[5] != 1:
        raise NotElfError(path, "big-endian ELF: CUDA host binaries are little-endian")
    if size < _ELF64_HEADER.size:
        raise NotElfError(path, "truncated ELF header")
    f.seek(0)
    hdr = _ELF64_HEADER.unpack(f.read(_ELF64_HEADER.size))
    shoff, shentsize, shnum, shstrndx = hdr[6], hdr[11], hdr[12], hdr[13]
    if shoff == 0:
        return None  # no section headers at all (stripped to the bone): nothing to find
    if shentsize != _ELF64_SECTION.size:
        raise CorruptFatbin(path, f"ELF section header size {shentsize}, expected 64")
    if shnum == 0 or shstrndx == SHN_XINDEX:  # extended numbering lives in section 0
        first = _ELF64_SECTION.unpack(_read_exact(f, shoff, 64, path, "section header 0"))
        shnum = shnum or first[5]
        shstrndx = first[6] if shstrndx == SHN_XINDEX else shstrndx
    if shoff + shnum * shentsize > size:
        raise CorruptFatbin(
            path,
            f"truncated: {shnum} section headers at offset {shoff} "
            f"run past the end of the file ({size} bytes)",
        )
    table = _read_exact(f, shoff, shnum * shentsize, path, "section header table")
    sections = [_ELF64_SECTION.unpack_from(table, i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        raise CorruptFatbin(path, f"section name table index {shstrndx} >= {shnum} sections")
    names_sh = sections[shstrndx]
    if names_sh[4] + names_sh[5] > size:
        raise CorruptFatbin(path, "truncated: the section name table runs past the end")
    names = _read_exact(f, names_sh[4], names_sh[5], path, "section name table")
    found: dict[str, tuple[int, int, int]] = {}
    for sh in sections:
        name = names[sh[0] :].split(b"\0", 1)[0].decode("ascii", "replace")
        if name in SECTIONS and name not in found:
            found[name] = (sh[1], sh[4], sh[5])
    # The first section in SECTIONS order that the file has: `.nv_fatbin` (what the CUDA
    # runtime loads) even where a library also keeps its relocatable link inputs
    # (`__nv_relfatbin`) ahead of it, as libnccl and libnvshmem do; those only when it is absent.
    for name in SECTIONS:
        if name not in found:
            continue
        kind, offset, length = found[name]
        if kind == SHT_NOBITS:
            return None
        if offset + length > size:
            raise CorruptFatbin(
                path,
                f"truncated: section {name} ({length} bytes at offset "
                f"{offset}) runs past the end of the file ({size} bytes)",
            )
        return (name, offset, length)
    return None


def _skip_padding(f: BinaryIO, offset: int, end: int) -> int:
    """The first non-zero byte at or after `offset` (containers may be padded); `end` if none."""
    while offset < end:
        f.seek(offset)
        chunk = f.read(min(_CHUNK, end - offset))
        if not chunk:
            return end
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return offset + len(chunk) - len(stripped)
        offset += len(chunk)
    return end


def _walk(f: BinaryIO, path: str, start: int, end: int) -> tuple[list[FatbinEntry], int]:
    """Walk the containers in [start, end): every entry header, and the number of containers."""
    entries: list[FatbinEntry] = []
    offset, index = start, 0
    while True:
        offset = _skip_padding(f, offset, end)
        if offset >= end:
            return entries, index
        body, cend = _container(f, path, offset, end, index)
        entries += _container_entries(f, path, index, body, cend)
        offset, index = cend, index + 1


def _container(f: BinaryIO, path: str, offset: int, end: int, index: int) -> tuple[int, int]:
    """Container `index`'s header at `offset`, checked: where its entries start and end."""
    if end - offset < _CONTAINER.size:
        raise CorruptFatbin(
            path,
            f"truncated: {end - offset} stray bytes at offset {offset} "
            "where a fatbin container header was expected",
        )
    magic, version, hsize, size = _CONTAINER.unpack(
        _read_exact(f, offset, _CONTAINER.size, path, "container header")
    )
    if magic != MAGIC:
        legacy = " (a legacy pre-CUDA-4 fatbin)" if magic == LEGACY_MAGIC else ""
        raise CorruptFatbin(
            path,
            f"no fatbin container magic 0x{MAGIC:08X} at offset "
            f"{offset}: found 0x{magic:08X}{legacy}",
        )
    if version != 1 or hsize < _CONTAINER.size:
        raise CorruptFatbin(
            path,
            f"container at offset {offset}: unsupported version {version} / header size {hsize}",
        )
    body, cend = offset + hsize, offset + hsize + size
    if cend > end:
        raise CorruptFatbin(
            path,
            f"truncated: container {index} at offset {offset} declares "
            f"{size} bytes but the section ends {end - body} bytes later",
        )
    return body, cend


def _container_entries(
    f: BinaryIO, path: str, index: int, body: int, cend: int
) -> list[FatbinEntry]:
    """The entry headers of container `index`, whose entries lie in [body, cend)."""
    entries: list[FatbinEntry] = []
    e = body
    while e < cend:
        if cend - e < _ENTRY.size:
            raise CorruptFatbin(
                path,
                f"truncated entry header at offset {e} in container "
                f"{index}: {cend - e} bytes left, 64 needed",
            )
        (
            kind,
            _ver,
            ehsize,
            esize,
            csize,
            _unk,
            minor,
            major,
            arch,
            _noff,
            _nlen,
            flags,
            _res,
            dsize,
        ) = _ENTRY.unpack(_read_exact(f, e, _ENTRY.size, path, "entry header"))
        if ehsize < _ENTRY.size or e + ehsize + esize > cend:
            raise CorruptFatbin(
                path,
                f"entry at offset {e} in container {index} (header "
                f"{ehsize}, payload {esize} bytes) runs past its "
                f"container's end at {cend}",
            )
        entries.append(
            FatbinEntry(
                kind=KIND_NAMES.get(kind, f"unknown-{kind}"),
                arch=arch,
                flags=flags,
                container=index,
                offset=e,
                header_size=ehsize,
                size=esize,
                compressed_size=csize,
                decompressed_size=dsize,
                version=(major, minor),
            )
        )
        e += ehsize + esize
    return entries


def scan_file(path: str | os.PathLike[str]) -> LibraryScan:
    """Every entry header of one binary. Raises NotElfError, NoDeviceCode or CorruptFatbin."""
    p = os.fspath(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below; the handle is seek-heavy
    except OSError as exc:
        raise FatbinError(p, f"cannot open: {exc.strerror or exc}") from None
    with f:
        found = find_section(f, p)
        if found is None:
            raise NoDeviceCode(p, "no .nv_fatbin section: the file contains no CUDA device code")
        section, start, size = found
        entries, containers = _walk(f, p, start, start + size)
    if not entries:
        raise NoDeviceCode(p, f"section {section} holds no fatbin entries")
    return LibraryScan(p, section, containers, tuple(entries))


def _looks_like_library(name: str) -> bool:
    return name.endswith((".so", ".cubin", ".fatbin")) or ".so." in name


def candidate_files(root: str | os.PathLike[str]) -> Iterator[str]:
    """Shared libraries under `root` (not following symlinks, each real file once)."""
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(os.fspath(root)):
        dirnames.sort()
        for name in sorted(filenames):
            if not _looks_like_library(name):
                continue
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if os.path.islink(full) or (st.st_dev, st.st_ino) in seen or st.st_size < 16:
                continue
            seen.add((st.st_dev, st.st_ino))
            yield full


@dataclass
class ScanResult:
    """Libraries with device code; files looked at without any; files that could not be read."""

    libraries: list[LibraryScan] = field(default_factory=list)
    without_device_code: int = 0
    errors: list[FatbinError] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "libraries": [lib.to_dict() for lib in self.libraries],
            "without_device_code": self.without_device_code,
            "errors": [
                {"path": e.path, "error": e.message, "type": type(e).__name__} for e in self.errors
            ],
        }


def scan_paths(paths: Iterable[str | os.PathLike[str]]) -> ScanResult:
    """Scan files and directories. A file named explicitly must hold device code (else an
    error is recorded); in a directory, libraries without device code are only counted."""
    result = ScanResult()
    for path in paths:
        p = os.fspath(path)
        if os.path.isdir(p):
            for candidate in candidate_files(p):
                try:
                    result.libraries.append(scan_file(candidate))
                except (NotElfError, NoDeviceCode):
                    result.without_device_code += 1
                except FatbinError as exc:
                    result.errors.append(exc)
        elif os.path.exists(p):
            try:
                result.libraries.append(scan_file(p))
            except FatbinError as exc:
                result.errors.append(exc)
        else:
            result.errors.append(FatbinError(p, "no such file or directory"))
    return result


def main(argv: list[str] | None = None) -> int:
    """`python3 fatbin.py [--skip-missing] PATH...`: the scan as JSON on stdout.

    This is how images are scanned: the file is run by the image's own Python, so nothing but
    the JSON leaves the container. --skip-missing ignores paths that do not exist (the default
    search roots of an image).
    """
    args = sys.argv[1:] if argv is None else list(argv)
    skip_missing = "--skip-missing" in args
    paths = [a for a in args if a != "--skip-missing"]
    if skip_missing:
        paths = [p for p in paths if os.path.exists(p)]
    if not paths and not skip_missing:
        print("usage: fatbin.py [--skip-missing] PATH... (files or directories)", file=sys.stderr)
        return 2
    result = scan_paths(paths)
    json.dump(result.to_dict(), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The DT_NEEDED reader against readelf's view of a system library and a synthesized one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from builder.arches.needed import ElfError, cudart_major, needed
from tests.elf_synth import elf_needing

LIBZ = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")


@pytest.mark.skipif(not LIBZ.exists() or not shutil.which("readelf"), reason="no libz/readelf")
def test_needed_agrees_with_readelf() -> None:
    out = subprocess.run(["readelf", "-d", str(LIBZ)], capture_output=True, text=True).stdout
    want = tuple(
        line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line
    )
    assert needed(LIBZ.read_bytes()) == want and want


def test_the_cuda_runtime_an_extension_needs() -> None:
    names = needed(elf_needing("libc10.so", "libcudart.so.13", "libc.so.6"))
    assert names == ("libc10.so", "libcudart.so.13", "libc.so.6")
    assert cudart_major(names) == 13
    assert cudart_major(("libc.so.6",)) is None


def test_what_is_not_elf_is_refused() -> None:
    with pytest.raises(ElfError, match="not an ELF"):
        needed(b"PK\x03\x04")
    with pytest.raises(ElfError, match="malformed"):
        needed(elf_needing("libz.so.1")[:80])

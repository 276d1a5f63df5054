"""The fatbin reader on hand-made bytes: layouts, flags, and damaged input."""

from __future__ import annotations

import builtins
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.arches import fatbin
from builder.arches.fatbin import CorruptFatbin, NoDeviceCode, NotElfError, scan_file, scan_paths
from tests.quick_mode import examples

from .fatbin_bytes import PTX, SASS, container, elf64, entry


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def two_containers() -> bytes:
    first = container(
        entry(SASS, 90),
        entry(SASS, 100, flags=0x2011, compressed_size=20, decompressed_size=99),
        entry(PTX, 120, flags=0x8011, header_size=80, version=(9, 0)),
    )
    second = container(entry(SASS, 90), entry(SASS, 90, flags=0x100011), entry(SASS, 100))
    # zero padding between containers, as a linker may align them
    return first + b"\0" * 8 + second


def test_lists_every_entry_across_containers(tmp_path: Path) -> None:
    lib = write(tmp_path, "libk.so", elf64({".text": b"\x90" * 40, ".nv_fatbin": two_containers()}))
    scan = scan_file(lib)
    assert scan.section == ".nv_fatbin"
    assert scan.containers == 2
    assert [e.name for e in scan.entries] == [
        "sm_90",
        "sm_100",
        "compute_120",
        "sm_90",
        "sm_90a",
        "sm_100",
    ]
    assert [e.container for e in scan.entries] == [0, 0, 0, 1, 1, 1]
    assert scan.sass == ["sm_90", "sm_90a", "sm_100"]
    assert scan.ptx == ["compute_120"]
    assert scan.in_every_container("sass") == ["sm_90", "sm_100"]
    assert scan.in_every_container("ptx") == []
    assert scan.container_counts() == {"sm_90": 2, "sm_90a": 1, "sm_100": 2, "compute_120": 1}


def test_flags_compression_and_versions(tmp_path: Path) -> None:
    lib = write(tmp_path, "libk.so", elf64({".nv_fatbin": two_containers()}))
    first = scan_file(lib).entries[:3]
    assert [e.compression for e in first] == [None, "lz4", "zstd"]
    assert first[1].compressed_size == 20 and first[1].decompressed_size == 99
    assert first[2].kind == "ptx" and first[2].version == (9, 0) and first[2].header_size == 80
    assert scan_file(lib).compressed == 2
    d = scan_file(lib).to_dict()
    assert d["compression"] == ["lz4", "zstd"]
    assert d["per_container"] == [["sm_90", "sm_100", "compute_120"], ["sm_90", "sm_90a", "sm_100"]]


def test_family_ltoir_debug_and_unknown_kinds(tmp_path: Path) -> None:
    data = container(
        entry(SASS, 100, flags=0x1200011, header_size=112),
        entry(PTX, 120, flags=0x208011),
        entry(8, 90, flags=0x18011, header_size=120),
        entry(SASS, 75, flags=0x13, header_size=72),
        entry(5, 80),
    )
    scan = scan_file(write(tmp_path, "k.o", elf64({"__nv_relfatbin": data})))
    assert scan.section == "__nv_relfatbin"
    assert [e.name for e in scan.entries] == [
        "sm_100f",
        "compute_120f",
        "lto_90",
        "sm_75",
        "unknown-5_80",
    ]
    assert [e.debug for e in scan.entries] == [False, False, False, True, False]
    assert scan.ltoir == ["lto_90"]


def test_raw_fatbin_file(tmp_path: Path) -> None:
    scan = scan_file(write(tmp_path, "k.fatbin", two_containers()))
    assert scan.section == "fatbin" and scan.containers == 2 and len(scan.entries) == 6


def test_not_elf(tmp_path: Path) -> None:
    with pytest.raises(NotElfError, match="not an ELF file"):
        scan_file(write(tmp_path, "notes.txt", b"hello, this is text and not a library"))


def test_elf32_and_big_endian_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotElfError, match="not ELF64"):
        scan_file(write(tmp_path, "a.so", elf64({".nv_fatbin": two_containers()}, ei_class=1)))
    with pytest.raises(NotElfError, match="big-endian"):
        scan_file(write(tmp_path, "b.so", elf64({".nv_fatbin": two_containers()}, ei_data=2)))


def test_no_device_code(tmp_path: Path) -> None:
    with pytest.raises(NoDeviceCode, match=r"no \.nv_fatbin section"):
        scan_file(write(tmp_path, "libc.so", elf64({".text": b"\x90" * 64})))
    with pytest.raises(NoDeviceCode):
        scan_file(write(tmp_path, "libn.so", elf64({".nv_fatbin": b""}, nobits=(".nv_fatbin",))))
    with pytest.raises(NoDeviceCode, match="holds no fatbin entries"):
        scan_file(write(tmp_path, "libz.so", elf64({".nv_fatbin": b"\0" * 32})))


def test_truncated_file(tmp_path: Path) -> None:
    whole = elf64({".nv_fatbin": two_containers()})
    with pytest.raises(CorruptFatbin, match="truncated"):
        scan_file(write(tmp_path, "cut.so", whole[: len(whole) - 100]))
    with pytest.raises(NotElfError, match="truncated ELF header"):
        scan_file(write(tmp_path, "tiny.so", whole[:20]))


def test_container_larger_than_its_section(tmp_path: Path) -> None:
    data = container(entry(SASS, 90), declared_size=10_000)
    with pytest.raises(CorruptFatbin, match=r"container 0 at offset \d+ declares 10000 bytes"):
        scan_file(write(tmp_path, "big.so", elf64({".nv_fatbin": data})))


def test_entry_running_past_its_container(tmp_path: Path) -> None:
    data = container(entry(SASS, 90, declared_size=5_000))
    with pytest.raises(CorruptFatbin, match="runs past its container"):
        scan_file(write(tmp_path, "e.so", elf64({".nv_fatbin": data})))
    short = container(entry(SASS, 90, header_size=40)[:40])
    with pytest.raises(CorruptFatbin, match=r"truncated entry header|runs past"):
        scan_file(write(tmp_path, "s.so", elf64({".nv_fatbin": short})))


def test_garbage_between_containers(tmp_path: Path) -> None:
    data = container(entry(SASS, 90)) + b"\x01\x02\x03\x04" * 8
    with pytest.raises(CorruptFatbin, match="no fatbin container magic 0xBA55ED50 at offset"):
        scan_file(write(tmp_path, "g.so", elf64({".nv_fatbin": data})))
    legacy = (0x1EE55A01).to_bytes(4, "little") + b"\0" * 60
    with pytest.raises(CorruptFatbin, match="legacy pre-CUDA-4"):
        scan_file(write(tmp_path, "l.so", elf64({".nv_fatbin": legacy})))


def test_unsupported_container_version(tmp_path: Path) -> None:
    with pytest.raises(CorruptFatbin, match="unsupported version 2"):
        scan_file(
            write(tmp_path, "v.so", elf64({".nv_fatbin": container(entry(SASS, 90), version=2)}))
        )


class _CountingFile(io.FileIO):
    read_bytes = 0

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        _CountingFile.read_bytes += len(data)
        return data


def test_payloads_are_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library with 64 MiB of kernels costs kilobytes of reads: headers only."""
    payload = b"\x5a" * (16 << 20)
    data = container(*(entry(SASS, a, payload=payload) for a in (80, 90, 100, 120)))
    lib = write(tmp_path, "libhuge.so", elf64({".nv_fatbin": data}))
    assert lib.stat().st_size > 64 << 20
    real_open = builtins.open

    def counting_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if mode == "rb":
            return _CountingFile(file, "r")
        return real_open(file, mode, *args, **kwargs)

    _CountingFile.read_bytes = 0
    monkeypatch.setattr(fatbin, "open", counting_open, raising=False)
    scan = scan_file(lib)
    assert scan.sass == ["sm_80", "sm_90", "sm_100", "sm_120"]
    assert 0 < _CountingFile.read_bytes < 256 << 10, _CountingFile.read_bytes


def test_scan_paths_directory(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    write(lib, "libk.so.1", elf64({".nv_fatbin": two_containers()}))
    os.symlink("libk.so.1", lib / "libk.so")  # the same library twice: listed once
    write(lib, "libplain.so", elf64({".text": b"\x90" * 32}))
    write(lib, "README.so.txt", b"not an elf but named like one")
    write(lib, "data.bin", b"ignored: not named like a library")
    write(lib, "libbad.so", elf64({".nv_fatbin": container(entry(SASS, 90), declared_size=999)}))
    result = scan_paths([lib])
    assert [Path(x.path).name for x in result.libraries] == ["libk.so.1"]
    assert result.without_device_code == 2
    assert [Path(e.path).name for e in result.errors] == ["libbad.so"]


def test_scan_paths_explicit_file_without_code_is_an_error(tmp_path: Path) -> None:
    plain = write(tmp_path, "libplain.so", elf64({".text": b"\x90" * 32}))
    result = scan_paths([plain, tmp_path / "missing.so"])
    assert [type(e).__name__ for e in result.errors] == ["NoDeviceCode", "FatbinError"]
    assert "no such file" in result.errors[1].message


def test_main_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "libk.so", elf64({".nv_fatbin": two_containers()}))
    assert fatbin.main(["--skip-missing", str(tmp_path), str(tmp_path / "nope")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["errors"] == []
    assert out["libraries"][0]["sass_in_every_container"] == ["sm_90", "sm_100"]
    assert fatbin.main([]) == 2


_VALID = elf64({".text": b"\x90" * 16, ".nv_fatbin": two_containers()})


@settings(
    max_examples=examples(full=300, quick=40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    edits=st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), max_size=8),
    cut=st.integers(0, len(_VALID)),
)
def test_damaged_input_raises_only_fatbin_errors(
    tmp_path: Path, edits: list[tuple[int, int]], cut: int
) -> None:
    """Any corruption of a valid library (bytes changed, tail cut) is either still readable or a
    FatbinError naming the file: never a struct.error, IndexError or an endless loop."""
    data = bytearray(_VALID)
    for pos, value in edits:
        data[pos] = value
    lib = write(tmp_path, "fuzz.so", bytes(data[:cut] if cut else data))
    try:
        scan = scan_file(lib)
    except fatbin.FatbinError as exc:
        assert exc.path == str(lib) and exc.message
    else:
        assert all(e.size >= 0 and e.container < scan.containers for e in scan.entries)


def test_executable_fatbin_wins_over_relocatable_link_inputs(tmp_path: Path) -> None:
    """libnccl, libnvshmem_host and libtorch_nvshmem keep their device link's relocatable inputs
    (`__nv_relfatbin`, here sm_90 only) ahead of `.nv_fatbin` (what the CUDA runtime loads, here
    sm_90 and sm_100): the reader lists `.nv_fatbin`, wherever it lies in the file."""
    relocatable = container(entry(SASS, 90), entry(PTX, 90))
    executable = container(entry(SASS, 90), entry(SASS, 100), entry(SASS, 120))
    both = elf64({"__nv_relfatbin": relocatable, ".nv_fatbin": executable})
    scan = scan_file(write(tmp_path, "libnvshmem_host.so.3", both))
    assert scan.section == ".nv_fatbin"
    assert scan.sass == ["sm_90", "sm_100", "sm_120"] and scan.ptx == []
    # only the relocatable inputs: those are what there is to list
    alone = scan_file(write(tmp_path, "k.o", elf64({"__nv_relfatbin": relocatable})))
    assert alone.section == "__nv_relfatbin" and alone.sass == ["sm_90"]
    # an empty (NOBITS) .nv_fatbin is no device code, even beside relocatable inputs
    nobits = elf64({"__nv_relfatbin": relocatable, ".nv_fatbin": b""}, nobits=(".nv_fatbin",))
    with pytest.raises(NoDeviceCode):
        scan_file(write(tmp_path, "libempty.so", nobits))

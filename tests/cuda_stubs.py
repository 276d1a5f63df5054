"""Stand-in CUDA runtime libraries, so a cu128 torch wheel imports on a machine without CUDA.

`torch._C._cuda_getArchFlags()` returns a string fixed when torch was compiled; it needs no GPU,
but `import torch` of a CUDA wheel needs the libraries libtorch_cuda.so links against
(libcudart, libcublas, libcudnn, ... about 3 GB of nvidia-* wheels). Those libraries play no
part in the arch flags, so the test links the wheel against stubs instead: for every library
torch needs and does not ship, a tiny shared object with the same SONAME that defines every
symbol torch imports from it (same symbol versions), each a function returning 0. Loading runs
the CUDA registration constructors (__cudaRegisterFatBinary & co.), which return 0 here; nothing
else is called before the test asks for the arch flags. Built with gcc and binutils' nm/readelf.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

# What the system provides; everything else a torch library needs and torch does not ship is
# stubbed.
_SYSTEM = ("libc.", "libm.", "libdl.", "librt.", "libpthread.", "libstdc++", "libgcc_s", "ld-linux")
TOOLS = ("gcc", "nm", "readelf")


class StubError(RuntimeError):
    pass


def _run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise StubError(f"{' '.join(cmd[:3])} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def _elfs(torch_dir: Path) -> list[Path]:
    return sorted(torch_dir.glob("lib/*.so*")) + sorted(torch_dir.glob("_C*.so"))


def _system_defines(names: set[str]) -> set[str]:
    libs = [ctypes.CDLL(None)]
    for n in ("libstdc++.so.6", "libgcc_s.so.1", "libm.so.6", "librt.so.1", "libpthread.so.0"):
        try:
            libs.append(ctypes.CDLL(n))
        except OSError:
            continue
    out = set()
    for name in names:
        for lib in libs:
            if hasattr(lib, name):
                out.add(name)
                break
    return out


def plan(torch_dir: Path) -> dict[str, dict[str, str | None]]:
    """library SONAME -> {symbol: version or None}, for every library to stub."""
    elfs = _elfs(torch_dir)
    shipped = {p.name for p in elfs}
    defined: set[str] = set()
    undefined: list[tuple[str, str]] = []
    version_file: dict[str, str] = {}
    needed: set[str] = set()
    for elf in elfs:
        for line in _run("nm", "-D", "--with-symbol-versions", str(elf)).splitlines():
            parts = line.split()
            if len(parts) == 3:
                defined.add(parts[2].split("@", 1)[0])
            elif len(parts) == 2 and parts[0] == "U":  # strong undefined (weak ones are "w")
                name, _, version = parts[1].partition("@")
                undefined.append((name, version.lstrip("@")))
        current = None
        for line in _run("readelf", "-V", "-W", str(elf)).splitlines():
            if m := re.search(r"File: (\S+)", line):
                current = m.group(1)
            elif (m := re.search(r"Name: (\S+)\s+Flags", line)) and current:
                version_file[m.group(1)] = current
        for line in _run("readelf", "-d", "-W", str(elf)).splitlines():
            if m := re.search(r"\(NEEDED\).*\[(.+)\]", line):
                needed.add(m.group(1))
    missing = {n for n in needed if n not in shipped and not n.startswith(_SYSTEM)}
    unversioned = {n for n, v in undefined if not v and n not in defined}
    provided = _system_defines(unversioned)
    stubs: dict[str, dict[str, str | None]] = {lib: {} for lib in missing}
    catch_all = "libcudart.so.12" if "libcudart.so.12" in missing else min(missing, default="")
    for name, version in undefined:
        if name in defined:
            continue
        if version:
            lib = version_file.get(version)
            if lib in missing:
                stubs[lib][name] = version
        elif name not in provided and catch_all:
            stubs[catch_all][name] = None
    return stubs


def build(torch_dir: Path, out_root: Path) -> Path:
    """Build (once, cached by the wheel's library set) and return the stub directory."""
    missing_tools = [t for t in TOOLS if shutil.which(t) is None]
    if missing_tools:
        raise StubError(f"{', '.join(missing_tools)} not installed (apt-get install gcc binutils)")
    libs = _elfs(torch_dir)
    key = hashlib.sha256("|".join(f"{p.name}:{p.stat().st_size}" for p in libs).encode())
    out = out_root / f"cuda-stubs-{key.hexdigest()[:12]}"
    if (out / ".complete").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    for lib, symbols in plan(torch_dir).items():
        by_version: dict[str, list[str]] = defaultdict(list)
        for sym, version in symbols.items():
            by_version[version or lib].append(sym)
        asm = [".text"]
        for sym in symbols:
            asm += [
                f".globl {sym}",
                f".type {sym},@function",
                f"{sym}:",
                "  xor %eax,%eax",
                "  ret",
            ]
        (out / f"{lib}.s").write_text("\n".join(asm) + "\n")
        script = "".join(f"{v} {{ global: {'; '.join(s)}; }};\n" for v, s in by_version.items())
        (out / f"{lib}.map").write_text(script or f"{lib} {{ local: *; }};\n")
        _run(
            "gcc",
            "-shared",
            "-nostdlib",
            "-o",
            str(out / lib),
            str(out / f"{lib}.s"),
            f"-Wl,-soname,{lib}",
            f"-Wl,--version-script={out / (lib + '.map')}",
        )
    (out / ".complete").write_text("ok\n")
    return out

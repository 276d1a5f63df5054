"""Wheels made in the test (PEP 427: a zip with a .dist-info holding METADATA, WHEEL and a
RECORD of sha256 digests), among them hostile ones: a new name that writes a locked package's
file, a .pth, a console script over an existing name, one that cannot import."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Mapping
from pathlib import Path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes],
    *,
    console_scripts: Mapping[str, str] | None = None,
) -> Path:
    """A py3-none-any wheel of `files` (path inside site-packages -> bytes)."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    members[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: trainimg-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if console_scripts:
        lines = "".join(f"{k} = {v}\n" for k, v in console_scripts.items())
        members[f"{info}/entry_points.txt"] = f"[console_scripts]\n{lines}".encode()
    record = "".join(f"{p},sha256={_digest(b)},{len(b)}\n" for p, b in sorted(members.items()))
    record += f"{info}/RECORD,,\n"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, b in sorted(members.items()):
            zf.writestr(zipfile.ZipInfo(p, (2020, 1, 1, 0, 0, 0)), b)
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", (2020, 1, 1, 0, 0, 0)), record)
    return path

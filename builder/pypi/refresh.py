"""`trainimg facts refresh`: the torch facts data file (builder/facts/data/torch_pypi.json) as
PyPI's own metadata says it today, and the reviewable diff against the committed one.

What a release is: the CPython tags of its manylinux_2_28_x86_64 wheels (file names, PEP 691)
and the CUDA build its METADATA pins (PEP 658: nvidia-cuda-runtime-cu12==12.8.90 -> cu128,
cuda-toolkit[...]==13.0.2 -> cu130). A release whose wheels have no .metadata file keeps what the
committed file says of it (a new one is listed with an unknown build): no wheel is downloaded.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.pypi.index import Index, IndexFile

WHEEL = re.compile(
    r"torch-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-cp(?P<major>\d)(?P<minor>\d+)-"
    r"cp\d+-manylinux_2_28_x86_64\.whl"
)
# The Requires-Dist lines that say which CUDA the wheel is built for.
CU12_RUNTIME = re.compile(
    r"^Requires-Dist:\s*nvidia-cuda-runtime-cu(\d+)==((\d+)\.(\d+)[0-9.]*)", re.M
)
CUDA_TOOLKIT = re.compile(r"^Requires-Dist:\s*cuda-toolkit(?:\[[^\]]*\])?==(\d+)\.(\d+)\.(\d+)",
                          re.M)  # fmt: skip
METADATA_PYTHON = "3.12"  # the wheel whose METADATA is read (every tag's pins are the same)


def cuda_build(metadata: str) -> tuple[str, str] | None:
    """(cuXY, the pin it was read from) of a torch METADATA, None for a CPU-only one."""
    m = CUDA_TOOLKIT.search(metadata)
    if m:
        return f"cu{m[1]}{m[2]}", f"cuda-toolkit=={m[1]}.{m[2]}.{m[3]}"
    m = CU12_RUNTIME.search(metadata)
    if m:
        return f"cu{m[3]}{m[4]}", f"nvidia-cuda-runtime-cu{m[1]}=={m[2]}"
    return None


def _build_tag(f: IndexFile) -> int:
    """A wheel's build tag (PEP 427: a re-upload, torch-2.10.0-3-...); 0 for none."""
    m = WHEEL.fullmatch(f.filename)
    digits = re.match(r"\d+", (m["build"] or "") if m else "")
    return int(digits[0]) if digits else 0


def _releases(files: list[IndexFile]) -> dict[Version, dict[str, list[IndexFile]]]:
    """version -> Python tag -> its wheels (re-uploaded build tags included, newest last)."""
    out: dict[Version, dict[str, list[IndexFile]]] = {}
    for f in files:
        m = WHEEL.fullmatch(f.filename)
        if m is None or f.yanked:
            continue
        try:
            ver = Version(m["version"])
        except InvalidVersion:
            continue
        if ver.is_prerelease or ver.local:
            continue
        py = f"{m['major']}.{m['minor']}"
        out.setdefault(ver, {}).setdefault(py, []).append(f)
    for tags in out.values():
        for wheels in tags.values():
            wheels.sort(key=_build_tag)
    return out


def refreshed(
    current: Mapping[str, Any], index: Index, today: dt.date, since: Version
) -> dict[str, Any]:
    """The torch facts file as the index says it on `today`, for releases >= `since`; the
    releases before `since` are kept as the committed file has them."""
    old: Mapping[str, Any] = current.get("releases", {})
    out: dict[str, Any] = {k: v for k, v in old.items() if Version(k) < since}
    for ver, tags in sorted(_releases(index.files("torch")).items()):
        if ver < since:
            continue
        python = sorted(tags, key=lambda p: tuple(int(x) for x in p.split(".")))
        pick = tags.get(METADATA_PYTHON) or tags[python[-1]]
        meta = index.metadata(pick[-1])
        prev = old.get(str(ver))
        row: dict[str, Any]
        if meta is not None:
            got = cuda_build(meta)
            row = {"cuda": got[0] if got else None, "cuda_pin": got[1] if got else None,
                   "python": python, "read": today.isoformat()}  # fmt: skip
        elif prev is not None:
            row = {**prev, "python": python}
        else:
            row = {"cuda": None, "cuda_pin": None, "python": python, "read": today.isoformat(),
                   "note": "no PEP 658 .metadata on the index: the build is unknown"}  # fmt: skip
        if len(pick) > 1:
            row["note"] = f"re-uploaded: {', '.join(f.filename for f in pick)}"
        out[str(ver)] = row
    return {**current, "read": today.isoformat(), "releases": out}


def facts_text(doc: Mapping[str, Any]) -> str:
    """The facts file's one text: header keys, then one release per line (a diff shows one
    line per release that changed)."""
    head = {k: v for k, v in doc.items() if k != "releases"}
    lines = ["{"]
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    rows = list(doc.get("releases", {}).items())
    lines.append('  "releases": {')
    for i, (ver, row) in enumerate(rows):
        comma = "," if i < len(rows) - 1 else ""
        lines.append(f"    {json.dumps(ver)}: {json.dumps(row)}{comma}")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def diff(old_text: str, new_text: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
        )
    )

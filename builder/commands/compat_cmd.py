"""`trainimg compat`: will this image run on that driver and GPU? No host needed: the same
requirement evaluator and rules as `trainimg preflight` (docs/preflight.md).

Exit codes: 0 ok, 3 runs only with caveats (forward/minor-version compatibility, unknown, a
branch near or past its end of life), 1 broken, 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import subprocess
from typing import Any

from builder.build import lock as lockfile
from builder.commands.common import driver_argument, shared_options, workspace
from builder.commands.json_out import (
    JsonKind,
    add_json_option,
    document,
    taken_positional,
    text_wanted,
    write_json,
)
from builder.errors import TrainimgError
from builder.host.parsers import podman_inspect
from builder.preflight import compat
from builder.preflight import images as img
from builder.workspace import DEFAULT_MATRIX

COMPAT_JSON = JsonKind("trainimg.compat", 1)  # docs/json.md, docs/schemas/


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compat",
        parents=[shared_options()],
        description=(
            "Judge one image against a driver and a GPU without a host: its NVIDIA_REQUIRE_* "
            "with libnvidia-container's semantics, forward and minor-version compatibility, "
            "the GPU's first and last branch and its kernel-module needs, the compiled arch "
            "list, and the branch's end of life (as of --today). IMAGE is a matrix cell name, "
            "a tag of images/lock.json, or a local podman image. "
            "Exit 0: runs; 3: runs with caveats; 1: broken; 2: bad input."
        ),
    )
    p.add_argument("image", nargs="?", metavar="IMAGE|CELL", help="what to judge")
    p.add_argument(
        "--require",
        metavar="STRING",
        default=None,
        help="judge this NVIDIA_REQUIRE_CUDA value instead of an image",
    )
    # preflight's names for the same two things; compat's own kept (one vocabulary, no break)
    p.add_argument(
        "--target-driver",
        "--driver",
        dest="driver",
        type=driver_argument,
        required=True,
        metavar="VERSION",
        help="the driver to judge, e.g. 570.124.06 (as preflight --target-driver)",
    )
    p.add_argument(
        "--target-module",
        "--module",
        dest="module",
        choices=compat.MODULES,
        default=None,
        help="the kernel-module flavour (default: open from R560 and where the GPU needs it; "
        "as preflight --target-module)",
    )
    p.add_argument(
        "--gpu",
        default=None,
        help="a GPU: a key of builder/facts/gpus.py (h100, b200) or an NVML name "
        "('NVIDIA A100-SXM4-80GB')",
    )
    p.add_argument("--cc", default=None, help="a compute capability instead, e.g. 9.0")
    p.add_argument("--brand", default=None, help="the NVML brand, e.g. GeForce, NVIDIA, Tesla")
    add_json_option(p, COMPAT_JSON)
    p.set_defaults(func=run)


def _image(args: argparse.Namespace) -> img.ImageRecord:
    if args.require is None:
        taken_positional(args, "image", "IMAGE|CELL")
    if (args.image is None) == (args.require is None):
        raise TrainimgError("compat: give IMAGE|CELL or --require STRING (one of them)")
    if args.require is not None:
        return img.ImageRecord(
            "--require", "argument", (args.require,), "argument", None, None, None
        )
    name = args.image
    try:
        ws = workspace(args, strict=False)
        cells = img.from_workspace(ws)
        lock_path = ws.root / lockfile.DEFAULT_PATH
        lock, _ = img.from_lock(lock_path) if lock_path.is_file() else ([], [])
    except TrainimgError:
        if args.matrix != DEFAULT_MATRIX:
            raise  # a matrix named on purpose must load: a cell is not an image reference
        cells, lock = [], []
    for rec in img.merge(cells, lock):
        if name in (rec.cell, rec.name):
            return rec
    local = _local_image(name)
    if local is not None:
        return local
    known = ", ".join(r.name for r in cells[:6]) + (", ..." if len(cells) > 6 else "")
    raise TrainimgError(
        f"compat: {name!r} is not a matrix cell ({known or 'no matrix'}) nor a local image"
    )


def _local_image(name: str) -> img.ImageRecord | None:
    """A local image's environment and labels (`podman image inspect`, read-only)."""
    podman = shutil.which("podman")
    if podman is None:
        return None
    proc = subprocess.run(
        [podman, "image", "inspect", "--", name], capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        return None
    records, _ = img.from_local(podman_inspect(proc.stdout))
    return records[0] if records else None


def run(args: argparse.Namespace) -> int:
    image = _image(args)
    gpu = compat.describe_gpu(args.gpu, args.cc, args.brand)
    result = compat.answer(image, args.driver, gpu, args.module, args.today or dt.date.today())
    if args.json is not None:
        write_json(args.json, answer_document(result))
    if text_wanted(args):
        print(compat.render_answer(result))
    return result.exit_code


def answer_document(result: compat.Answer) -> dict[str, Any]:
    """compat's JSON (schema 1): the answer, its verdict's findings paired code with message."""
    body = result.as_json()
    verdict = result.verdict
    body["verdict"] = {
        "status": verdict.status,
        "severity": str(verdict.severity),
        "kind": str(result.kind),  # breaks / risk / info (docs/preflight.md)
        "findings": verdict.findings_json(),
    }
    return document(COMPAT_JSON, body)

"""`trainimg arches PATH|IMAGE|CELL [--gpu GPU]`: the SASS and PTX targets of every CUDA library.

Answers "will this run on B200 / RTX 5090?" before a job starts. A library built with one arch
list (libtorch_cuda) runs natively on a GPU when every one of its kernel modules carries SASS for
it (builder.facts.gpus: sm_XY runs on X.Z with Z >= Y), by JIT when some module has only PTX for
it, and not at all when some module has neither; a library that picks per-architecture kernels
at run time (cuBLAS, cuDNN, ...) needs code for it in at least one module
(builder/facts/kernel_dispatch.py). A path is scanned here; an image is scanned from inside a
short container by its own Python (builder/arches/scan.py says why).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from builder.arches import coverage as arches
from builder.arches.fatbin import scan_paths
from builder.arches.scan import IMAGE_ROOTS, scan_image
from builder.commands.common import add_engine_options, shared_options
from builder.commands.json_out import JsonKind, add_json_option, document, text_wanted, write_json
from builder.engines import discover
from builder.errors import TrainimgError
from builder.facts import kernel_dispatch
from builder.verify.target import resolve_image

ARCHES_JSON = JsonKind("trainimg.arches", 1)  # docs/json.md, docs/schemas/


def register(sub: Any) -> None:
    p = sub.add_parser(
        "arches",
        parents=[shared_options()],
        description=(
            "List the compiled GPU targets (SASS sm_XY, PTX compute_XY) of every CUDA library "
            "in a file, a directory (e.g. a site-packages) or an image, without a GPU or a CUDA "
            "toolkit. With --gpu, say whether each library runs on that GPU: natively, only "
            "after a PTX JIT compile, or not at all. Exit code 1 when a --gpu is not covered."
        ),
    )
    p.add_argument(
        "target",
        metavar="PATH|IMAGE|CELL",
        help="a file or directory here, else an image reference or a matrix cell",
    )
    p.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="GPU",
        help="b200, rtx5090, ... (see builder/facts/gpus.py), sm_120 or 12.0; repeat",
    )
    p.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help=f"where to look inside an image (default: {' '.join(IMAGE_ROOTS)})",
    )
    add_engine_options(p)
    add_json_option(p, ARCHES_JSON)
    p.add_argument(
        "--all",
        action="store_true",
        help="also list the targets of every kernel module (long for libtorch_cuda)",
    )
    p.set_defaults(func=run)


def scan_target(args: argparse.Namespace) -> tuple[str, str, dict[str, Any]]:
    """(kind, what, scan dict) for a path here or an image."""
    if os.path.exists(args.target):
        return "path", os.path.abspath(args.target), scan_paths([args.target]).to_dict()
    image = resolve_image(args.target, args.matrix)
    with discover.engine_session(args.engine, args.url) as engine:
        return "image", image, scan_image(engine, image, args.root or IMAGE_ROOTS)


def judge_gpus(scan: dict[str, Any], gpu_args: list[str]) -> list[dict[str, Any]]:
    out = []
    for text in gpu_args:
        name, cc = arches.parse_gpu(text)
        covs = [arches.library_coverage(lib, cc) for lib in scan["libraries"]]
        out.append(
            {
                "gpu": text,
                "name": name,
                "cc": list(cc),
                "verdict": arches.overall(covs) if covs else "no-device-code",
                "documented": [os.path.basename(p) for p in arches.documented_only(covs)],
                "libraries": [
                    {
                        "path": c.path,
                        "verdict": c.verdict,
                        "rule": c.rule,
                        "modules": c.modules,
                        "native": c.native,
                        "jit": c.jit,
                        "missing": c.missing,
                        "sass": list(c.sass),
                        "ptx": list(c.ptx),
                        "explain": c.explain(),
                    }
                    for c in covs
                ],
            }
        )
    return out


_RULE = {
    kernel_dispatch.UNIFORM: "one arch list: every module must cover the GPU",
    kernel_dispatch.PER_ARCH: "per-architecture kernel sets chosen at run time",
    kernel_dispatch.OPAQUE: "kernels outside .nv_fatbin: NVIDIA's documented support",
    kernel_dispatch.OPTIONAL: "optional ops, not on the trainer's path: shown, never decides",
}
_VERDICT = {
    "yes": "runs natively: every library has SASS for it where its kernel choice needs it",
    "documented": "runs natively where the scan can tell; the rest only as NVIDIA documents it "
    "(their kernels are outside what the scan reads)",
    "jit": "runs, but some kernels only after a PTX JIT compile at first use",
    "no": "does NOT run: some library has no code for it where its kernel choice needs it "
    "('no kernel image is available for execution on the device')",
    "no-device-code": "no CUDA device code found at all (a CPU build?)",
}


def _text(
    kind: str, what: str, scan: dict[str, Any], gpus: list[dict[str, Any]], full: bool
) -> str:
    lines = []
    for lib in scan["libraries"]:
        every = lib["sass_in_every_container"]
        some = [
            f"{n} ({c})"
            for n, c in lib["container_counts"].items()
            if n.startswith("sm_") and n not in every
        ]
        ptx = [
            f"{n} ({c}/{lib['containers']})"
            for n, c in lib["container_counts"].items()
            if n.startswith("compute_")
        ]
        comp = "/".join(lib["compression"]) or "none"
        lines += [
            lib["path"],
            f"  {lib['containers']} kernel modules, {lib['entries']} targets "
            f"({lib['compressed_entries']} compressed: {comp})",
            f"  SASS in every module : {' '.join(every) or '-'}",
        ]
        if some:
            lines.append(f"  SASS in some modules : {' '.join(some)}")
        lines.append(f"  PTX                  : {' '.join(ptx) or 'none'}")
        if lib["ltoir"]:
            lines.append(f"  LTO IR               : {' '.join(lib['ltoir'])}")
        rule = kernel_dispatch.rule_for(lib["path"])
        lines.append(f"  kernel choice        : {_RULE[rule.kind]} ({rule.source})")
        for g in gpus:
            for c in g["libraries"]:
                if c["path"] == lib["path"]:
                    lines.append(f"  {g['name']}: {c['explain']}")
        if full:
            for i, targets in enumerate(lib.get("per_container", [])):
                lines.append(f"    module {i}: {' '.join(targets)}")
    for err in scan["errors"]:
        lines.append(f"error: {err['path']}: {err['error']}")
    n = len(scan["libraries"])
    lines.append(
        f"{what}: {n} {'library' if n == 1 else 'libraries'} with CUDA device code, "
        f"{scan['without_device_code']} without"
    )
    for g in gpus:
        line = f"{g['name']}: {_VERDICT[g['verdict']]}"
        if g["documented"]:
            line += f"; judged from NVIDIA's documentation only: {', '.join(g['documented'])}"
        lines.append(line)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    for text in args.gpu:
        arches.parse_gpu(text)  # refuse an unknown GPU before any scan
    kind, what, scan = scan_target(args)
    if kind == "path" and not scan["libraries"] and scan["errors"] and os.path.isfile(args.target):
        raise TrainimgError(scan["errors"][0]["path"] + ": " + scan["errors"][0]["error"])
    gpus = judge_gpus(scan, args.gpu)
    if text_wanted(args):  # before the JSON drops what --all did not ask for
        print(_text(kind, what, scan, gpus, args.all))
    if args.json is not None:
        if not args.all:
            for lib in scan["libraries"]:
                lib.pop("per_container", None)
        body = {"target": what, "target_kind": kind, **scan, "gpus": gpus}
        write_json(args.json, document(ARCHES_JSON, body))
    failed = bool(scan["errors"]) or any(g["verdict"] in ("no", "no-device-code") for g in gpus)
    return 1 if failed else 0

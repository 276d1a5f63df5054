"""`trainimg verify IMAGE|CELL`: prove from inside a running container that an image does what
its labels and the matrix say (builder/verify; docs/verify.md).

Exit codes: 0 every check passed or was skipped with a reason; 1 a check failed; 2 the image or
the engine could not be used; 130 interrupted (the container is removed first).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from builder.arches.scan import IMAGE_ROOTS
from builder.commands.common import add_engine_options, add_quiet_option, shared_options
from builder.commands.json_out import STDOUT, JsonKind, add_json_option, document, write_json
from builder.engines import discover
from builder.errors import TrainimgError
from builder.progress import Progress
from builder.verify.live import stderr_beside_capture
from builder.verify.report import Report
from builder.verify.runner import DEFAULT_STEPS, suite_checks, supply_context, verify
from builder.verify.target import load_workspace, resolve_image

VERIFY_JSON = JsonKind("trainimg.verify", 1)  # docs/json.md, docs/schemas/


def register(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        parents=[shared_options()],
        description=(
            "Start IMAGE (or the image of matrix CELL) with `sleep infinity`, run the testinfra "
            "suite against it through podman:// or docker://, and remove the container whatever "
            "happens. A check that cannot apply here (no GPU, a CPU cell) is skipped with the "
            "reason, never passed. Exit 0 only when no check failed."
        ),
        epilog="checks:\n"
        + "\n".join(f"  {c.id:<24}{c.summary}" for c in suite_checks())
        + "\n\nexit codes: 0 passed (or skipped with a reason), 1 a check failed, "
        "2 unusable image or engine, 130 interrupted",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="IMAGE|CELL")
    add_engine_options(p)
    p.add_argument(
        "--gpus",
        choices=("auto", "all", "none", "on", "off"),
        default="auto",
        help="GPUs for the check container: auto (all when the host has a CDI spec / an NVIDIA "
        "device, else none), all, none - the words of `trainimg run --gpus`; on and off are "
        "the old spellings of all and none",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help=f"training steps per precision preset (default {DEFAULT_STEPS})",
    )
    p.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help=f"where to scan for CUDA libraries (default: {' '.join(IMAGE_ROOTS)})",
    )
    p.add_argument(
        "--only",
        metavar="EXPR",
        help="run only the checks this pytest -k expression selects, e.g. 'labels or user'",
    )
    p.add_argument("--junitxml", metavar="FILE", help="also write a JUnit XML report")
    p.add_argument("--lock", metavar="FILE", help="the lock file (default: images/lock.json)")
    p.add_argument(
        "--sbom", metavar="FILE", help="a CycloneDX SBOM of the image (`trainimg sbom`) to check"
    )
    add_json_option(p, VERIFY_JSON)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.steps < 2:
        raise TrainimgError(f"--steps {args.steps}: need at least 2 steps to see the loss fall")
    image = resolve_image(args.target, args.matrix)
    ws = load_workspace(args.matrix)
    with discover.engine_session(args.engine, args.url) as engine:
        supply = None
        if args.lock or args.sbom:
            image_id = engine.inspect_image(image).id
            supply = supply_context(
                image_id,
                ws,
                Path(args.lock) if args.lock else None,
                Path(args.sbom) if args.sbom else None,
            )
        report = verify(
            engine,
            image,
            workspace=ws,
            gpus=args.gpus,
            steps=args.steps,
            junitxml=args.junitxml,
            only=args.only,
            roots=args.root or IMAGE_ROOTS,
            supply=supply,
            progress=Progress(stderr_beside_capture(), quiet=args.quiet),
        )
    if args.json is not None:
        write_json(args.json, report_document(report))
    # the text always: on stderr when the JSON has stdout (a long run's report is worth keeping)
    print(report.text(), file=sys.stderr if args.json == STDOUT else sys.stdout)
    return 0 if report.ok else 1


def report_document(report: Report) -> dict[str, Any]:
    """verify's JSON (schema 1): the report under the envelope every command's JSON has."""
    return document(VERIFY_JSON, report.to_dict())

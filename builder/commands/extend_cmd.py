"""`trainimg extend CELL -r requirements.txt [--copy SRC:DEST] [--name NAME]`: a child image of a
built cell with extra wheels, refused before any build when a requirement would replace a
package the cell locked, proven against its parent after the build (builder/extend/).

The proof after the build: the fingerprint (torch's build and kernels), the file level (every
file of the parent's venv and trainer unchanged by sha256, no new .pth, no new file in a locked
package's directory: builder/extend/files.py) and a smoke import of every added distribution
(builder/extend/imports.py); all are reported together.

Exit codes: 0 built, proven and verified; 1 the build failed, the proof failed (the child is
discarded, nothing recorded) or verify failed; 2 bad input (unknown or unbuilt cell, a
requirement that replaces a locked package, wheels that miss their --hash, a bad --copy or one
into a locked tree); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from builder.commands.common import (
    add_engine_options,
    lock_file,
    shared_options,
    wheelhouse_default,
    workspace,
)
from builder.engines.base import BuildFailed
from builder.engines.discover import engine_session
from builder.engines.roles import ContainerRunner
from builder.errors import TrainimgError
from builder.extend import build as extension
from builder.extend import files, fingerprint, imports
from builder.extend.containerfile import parse_copy
from builder.spec.layout import venv_site_packages
from builder.verify.runner import DEFAULT_STEPS, supply_context, verify


class ExtendFailed(TrainimgError):
    exit_code = 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "extend",
        parents=[shared_options()],
        description=(
            "Build an image FROM the recorded image of CELL (by id) with the wheels of "
            "REQUIREMENTS added, air-gapped from a hash-locked wheelhouse of its own and "
            "constrained by the cell's lock. A requirement that would replace a locked package "
            "(torch, triton, nvidia-*, numpy, ...) is refused before anything is built. The "
            "child is then compared with its parent (torch build and libraries, SASS, nvidia-* "
            "wheels, NCCL/cuDNN, torchao's operators) and file by file (every file of the venv "
            "and the trainer unchanged by sha256; no new .pth, no new file in a locked package's "
            "directory), every added distribution is smoke-imported, then the child is "
            "verified, tagged <repo>:NAME and recorded in the lock with its parent. Lines may "
            "carry --hash=sha256:HEX (pip-compile --generate-hashes); environment markers are "
            "evaluated for the cell. Exit codes: 0 done, 1 build, proof or verify failed, 2 bad "
            "input."
        ),
    )
    p.add_argument("cell", metavar="CELL", help="the matrix cell whose built image to extend")
    p.add_argument("-r", "--requirement", required=True, metavar="FILE", help="requirements file")
    p.add_argument(
        "--copy",
        action="append",
        default=[],
        metavar="SRC:DEST",
        help="copy a file or directory into the image, owned by the trainer user (repeatable; "
        "never into or above /opt/venv or /opt/trainimg)",
    )
    p.add_argument("--name", help="the child's name and tag (default: CELL-ext)")
    p.add_argument(
        "--wheelhouse",
        default=wheelhouse_default(),
        help="the cell's wheelhouse, whose lock the child keeps (default: $TRAINIMG_WHEELHOUSE, "
        "else `wheelhouse` in the config file, else .cache/wheelhouse)",
    )
    p.add_argument(
        "--extra-wheelhouse",
        metavar="DIR",
        help="where the extra wheels and their lock go (default: WHEELHOUSE-NAME beside it)",
    )
    p.add_argument("--find-links", action="append", default=[], metavar="DIR")
    p.add_argument("--offline", action="store_true", help="download nothing: wheels must be there")
    p.add_argument(
        "--pip-config",
        action="store_true",
        help="let pip download read your pip configuration and PIP_* variables (default: "
        "ignored, PIP_CONFIG_FILE=/dev/null)",
    )
    p.add_argument("--repository", help="image repository (default: project.repository)")
    p.add_argument("--lock", help="the lock file (default: images/lock.json)")
    p.add_argument("--no-verify", action="store_true", help="skip `trainimg verify` of the child")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="verify's training steps")
    p.add_argument("--only", metavar="EXPR", help="verify only the checks EXPR selects (-k)")
    add_engine_options(p)
    p.set_defaults(func=run)


def prove(
    engine: ContainerRunner, plan: extension.ExtendPlan, image_id: str
) -> tuple[list[str], str]:
    """Every way the child fails its proof against its parent (empty: proven), and a summary."""
    parent_fp = fingerprint.read_fingerprint(engine, plan.parent.id)
    try:
        child_fp = fingerprint.read_fingerprint(engine, image_id)
        out = [str(d) for d in fingerprint.compare_fingerprints(parent_fp, child_fp)]
    except TrainimgError as exc:  # e.g. an overwritten torch file that no longer imports
        child_fp, out = {}, [f"the child's fingerprint: {exc}"]
    site = venv_site_packages(plan.cell.python)
    parent_files = files.read_manifest(engine, plan.parent.id)
    child_files = files.read_manifest(engine, image_id)
    out += [str(b) for b in files.compare_trees(parent_files, child_files, site)]
    modules = {
        f"{w.name}=={w.version}": imports.top_level_modules(w.path) for w in plan.extras.wheels
    }
    out += imports.smoke_import(engine, image_id, modules)
    summary = (
        f"fingerprint: the same as {plan.cell.name}'s: {fingerprint.describe(child_fp)}; "
        f"files: {len(parent_files)} of the locked trees unchanged; imports: "
        + ", ".join(f"{d} ({' '.join(m) or 'no modules'})" for d, m in sorted(modules.items()))
    )
    return out, summary


def run(args: argparse.Namespace) -> int:
    ws = workspace(args, strict=False)
    cell = ws.cell(args.cell)
    copies = [parse_copy(spec, i) for i, spec in enumerate(args.copy)]
    lock_path = lock_file(args, ws)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    with engine_session(args.engine, args.url) as engine:
        plan = extension.plan(
            ws,
            engine,
            cell,
            Path(args.requirement),
            name=args.name,
            copies=copies,
            lock_path=lock_path,
            parent_wheelhouse=Path(args.wheelhouse),
            extra_wheelhouse=Path(args.extra_wheelhouse) if args.extra_wheelhouse else None,
            repository=args.repository,
            find_links=[Path(d) for d in args.find_links],
            offline=args.offline,
            pip_config=args.pip_config,
            log=log,
        )
        extras = ", ".join(f"{w.name}=={w.version}" for w in plan.extras.wheels)
        log(f"extending {cell.name} ({plan.parent.id[:19]}) as {plan.tag}: {extras}")
        try:
            image_id = extension.build(engine, plan, ws.root / ".cache" / "build")
        except BuildFailed as exc:
            raise ExtendFailed(
                f"building {plan.tag} failed: {exc}\n" + "\n".join(exc.log_tail)
            ) from None
        try:
            breaches, summary = prove(engine, plan, image_id)
        except TrainimgError as exc:  # a probe that cannot run in the child: not proven
            breaches, summary = [str(exc)], ""
        if breaches:
            extension.discard(engine, image_id)
            raise ExtendFailed(
                f"{plan.tag} does not carry {cell.name}'s stack unchanged (discarded, nothing "
                "recorded):\n  " + "\n  ".join(breaches)
            )
        log(summary)
        info = extension.commit(engine, plan, image_id, lock_path)
        print(f"{plan.tag} {info.id}")
        if args.no_verify:
            return 0
        report = verify(
            engine,
            plan.tag,
            workspace=ws,
            gpus="auto",
            steps=args.steps,
            only=args.only,
            supply=supply_context(info.id, ws, lock_path),
        )
    print(report.text(), file=sys.stderr)
    return 0 if report.ok else 1

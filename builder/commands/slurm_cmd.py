"""`trainimg slurm CELL|IMAGE --nodes N --gpus-per-node G -- TRAINER ARGS`: write an sbatch
script that runs the image on N nodes, one container each (builder/launch/slurm.py,
docs/run.md). Nothing is submitted: `sbatch FILE` is yours to run.

The nodes get the image by digest from a registry - a cell's digest as `trainimg push`
recorded it in the lock file, or a reference you give - or from an archive on the shared
filesystem (--archive, written by `trainimg export`); never localhost/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.build import lock as lockfile
from builder.commands.common import (
    REGISTRY_HELP,
    configured_value,
    output_file,
    said,
    shared_options,
)
from builder.commands.run_cmd import takes_trainer_args
from builder.launch.expected_image import expected_image
from builder.launch.request import LaunchError
from builder.launch.slurm import DEFAULT_GRACE, SlurmJob, render_sbatch, requeue_note
from builder.launch.slurm_limits import DEFAULT_MAX_RESTARTS, MAX_SIGNAL_TIME
from builder.matrix.model import Cell
from builder.registry.reference import parse_reference
from builder.verify.target import find_cell, load_workspace, resolve_image
from builder.workspace import Workspace

EXAMPLES = """\
examples:
  trainimg push CELL --registry registry.example.com/team/trainimg   # records the digest
  trainimg slurm CELL --nodes 2 --gpus-per-node 8 --partition gpu --time 12:00:00 \\
      --ckpt /nfs/ckpt -o job.sbatch -- --parallel fsdp
  trainimg export CELL -o /nfs/images/trainimg.tar                        # or, without a registry
  trainimg slurm CELL --archive /nfs/images/trainimg.tar --nodes 2 --gpus-per-node 8 -o job.sbatch
  sbatch job.sbatch

the job's exit code is the trainer's: 0 finished, 2 bad input, 3 numerical stop, 4 stopped
with nothing saved, 143 stopped with a checkpoint (130 for SIGINT). Slurm's SIGTERM --grace
seconds before --time makes every rank checkpoint; the job requeues itself only when its run
wrote a checkpoint newer than the newest one at its start, and at most --max-restarts times
(SLURM_RESTART_COUNT). Without --ckpt nothing survives a stop: the script never requeues
(#SBATCH --no-requeue) and says so. Containers are named trainimg-JOB-STEP-NODE-rRESTART and
removed when their node's shell ends.

exit codes: 0 written, 2 bad input (the reason and the fix on stderr)
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "slurm",
        parents=[shared_options()],
        description=(
            "Render an sbatch script for CELL (or an image reference HOST/REPO@sha256:...): srun "
            "starts one container per node (podman with the job's GPUs as CDI devices, or "
            "enroot/pyxis), node 0 hosts the torchrun rendezvous on a port derived from the job "
            "id, and Slurm's SIGTERM --grace seconds before the time limit makes every rank "
            "checkpoint and exit 143; the job then requeues itself and resumes (with --ckpt, "
            "when the run wrote a new checkpoint, up to --max-restarts times). Arguments after "
            "-- go to `trainer train`."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="CELL|IMAGE")
    p.add_argument("--nodes", type=int, metavar="N", help="nodes (required)")
    p.add_argument(
        "--gpus-per-node", type=int, metavar="G", help="GPUs per node, 0 for CPU nodes (required)"
    )
    p.add_argument("--partition", metavar="P")
    p.add_argument(
        "--time",
        metavar="T",
        help="the job's time limit, as sbatch takes it: MINUTES, MM:SS, HH:MM:SS, D-HH, "
        "D-HH:MM, D-HH:MM:SS (longer than --grace)",
    )
    p.add_argument("--cpus-per-node", type=int, metavar="C", help="CPUs per node (the task's)")
    p.add_argument("--mem", metavar="SIZE", help="memory per node, as Slurm takes it (0: all)")
    p.add_argument(
        "--exclusive",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whole nodes (default: yes when GPUs are asked for)",
    )
    p.add_argument("--data", metavar="DIR", help="shared directory mounted read-only at /data")
    p.add_argument("--ckpt", metavar="DIR", help="shared directory mounted at /ckpt")
    p.add_argument(
        "--port", type=int, metavar="PORT", help="rendezvous port (default: from the job id)"
    )
    p.add_argument(
        "--grace",
        type=int,
        default=DEFAULT_GRACE,
        metavar="S",
        help=f"SIGTERM this many seconds before the limit, 1-{MAX_SIGNAL_TIME} and shorter "
        f"than --time (default {DEFAULT_GRACE})",
    )
    p.add_argument(
        "--max-restarts",
        type=int,
        default=DEFAULT_MAX_RESTARTS,
        metavar="N",
        help="requeue the job at most N times, each after a stop that wrote a new checkpoint "
        f"(default {DEFAULT_MAX_RESTARTS}; 0: never)",
    )
    p.add_argument(
        "--registry",
        metavar="HOST/REPO",
        default=configured_value("registry"),
        help="which pushed copy of CELL the nodes pull (the lock file records each push; "
        f"{REGISTRY_HELP})",
    )
    p.add_argument(
        "--archive",
        metavar="PATH",
        help="an image archive on the shared filesystem instead of a registry (`trainimg "
        "export`: .tar for podman, .sqsh for --pyxis)",
    )
    p.add_argument("--lock", metavar="FILE", help="the lock file (default: images/lock.json)")
    p.add_argument(
        "--pyxis",
        action="store_true",
        help="run through enroot/pyxis (srun --container-image) instead of podman",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    p.set_defaults(func=slurm_command)
    takes_trainer_args(p)


def pushed_ref(ws: Workspace, cell: Cell, registry: str | None, lock: str | None) -> str:
    """REPO@DIGEST of the cell's image as `trainimg push` recorded it; LaunchError (with the
    fix) when it was never pushed, or pushed to several places and --registry is missing."""
    path = Path(lock) if lock else ws.root / lockfile.DEFAULT_PATH
    record = lockfile.read(path).get(cell.name)
    pushed = {
        ref.name: digest
        for text, digest in sorted((record.pushed if record else {}).items())
        if (ref := parse_reference(text)).tag == cell.name
    }
    if registry is not None:
        named = said("--registry", registry)
        name = parse_reference(f"{registry}:x", what=named).name
        if name not in pushed:
            where = ", ".join(pushed) or "nowhere"
            raise LaunchError(
                f"{named}: {path} records no push of {cell.name} there (pushed "
                f"to: {where}); `trainimg push {cell.name} --registry {registry}` first"
            )
        return f"{name}@{pushed[name]}"
    if len(pushed) == 1:
        ((name, digest),) = pushed.items()
        return f"{name}@{digest}"
    if pushed:
        raise LaunchError(
            f"{cell.name} was pushed to {', '.join(pushed)}: choose one with --registry"
        )
    raise LaunchError(
        f"{cell.name}: {path} records no push, and the compute nodes cannot pull "
        f"{ws.matrix.project.repository}:{cell.name} from this machine; `trainimg push "
        f"{cell.name} --registry HOST/REPO` first (it records the digest), or `trainimg export "
        f"{cell.name} -o /nfs/images/trainimg.tar` and --archive"
    )


def slurm_command(args: argparse.Namespace) -> int:
    rest = list(args.trainer_args)
    if args.nodes is None or args.gpus_per_node is None:
        raise LaunchError("trainimg slurm needs --nodes N and --gpus-per-node G (0 for CPU nodes)")
    out = None if args.output is None else output_file(args.output)
    ws = load_workspace(args.matrix)
    cell = find_cell(ws, args.target)
    if ws is not None and cell is not None:
        image = args.target
        if args.archive is None:
            image = pushed_ref(ws, cell, args.registry, args.lock)
        info = expected_image(image, cell, ws.matrix.project)
    else:
        image = resolve_image(args.target, args.matrix)
        info = None
    job = SlurmJob(
        image=image,
        cell=cell.name if cell is not None else "job",
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        trainer_args=tuple(rest),
        partition=args.partition,
        time=args.time,
        data=args.data,
        ckpt=args.ckpt,
        port=args.port,
        grace=args.grace,
        pyxis=args.pyxis,
        archive=args.archive,
        cpus_per_node=args.cpus_per_node,
        mem=args.mem,
        exclusive=args.exclusive,
        image_info=info,
        max_restarts=args.max_restarts,
    )
    text = render_sbatch(job)
    note = requeue_note(job)
    if note is not None:
        print(f"trainimg: {note}", file=sys.stderr)
    if out is None:
        sys.stdout.write(text)
        return 0
    atomic_write(out, text)
    out.chmod(0o755)
    print(f"trainimg: wrote {out} (submit with `sbatch {out}`)", file=sys.stderr)
    return 0

"""`trainimg slurm CELL --nodes N --gpus-per-node G -- TRAINER ARGS`: write an sbatch script
that runs the cell's image on N nodes, one container each (builder/launch/slurm.py,
docs/run.md). Nothing is submitted: `sbatch FILE` is yours to run."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.commands.common import shared_options
from builder.commands.run_cmd import takes_trainer_args
from builder.launch.request import LaunchError
from builder.launch.slurm import DEFAULT_GRACE, DEFAULT_PORT, SlurmJob, render_sbatch
from builder.verify.target import find_cell, load_workspace, resolve_image


def register(sub: Any) -> None:
    p = sub.add_parser(
        "slurm",
        parents=[shared_options()],
        description=(
            "Render an sbatch script for CELL (or an image reference): srun starts one "
            "container per node (podman with CDI GPUs, or enroot/pyxis with "
            "--container-image), node 0 (from `scontrol show hostnames`) hosts the torchrun "
            "rendezvous, and Slurm's SIGTERM --grace seconds before the time limit makes the "
            "trainer checkpoint and exit 143. Arguments after -- go to `trainer train`."
        ),
        epilog="example:\n  trainimg slurm CELL --nodes 2 --gpus-per-node 8 --partition gpu "
        "--time 12:00:00 --ckpt /nfs/ckpt -o job.sbatch -- --parallel fsdp --resume\n"
        "  sbatch job.sbatch\n\nexit codes: 0 written, 2 bad input",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="CELL|IMAGE")
    p.add_argument("--nodes", type=int, metavar="N", help="nodes (required)")
    p.add_argument(
        "--gpus-per-node", type=int, metavar="G", help="GPUs per node, 0 for CPU nodes (required)"
    )
    p.add_argument("--partition", metavar="P")
    p.add_argument("--time", metavar="T", help="the job's time limit (HH:MM:SS, D-HH:MM, MIN)")
    p.add_argument("--data", metavar="DIR", help="shared directory mounted read-only at /data")
    p.add_argument("--ckpt", metavar="DIR", help="shared directory mounted at /ckpt")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"rendezvous port (default {DEFAULT_PORT})"
    )
    p.add_argument(
        "--grace",
        type=int,
        default=DEFAULT_GRACE,
        metavar="S",
        help=f"SIGTERM this many seconds before the limit (default {DEFAULT_GRACE})",
    )
    p.add_argument(
        "--pyxis",
        action="store_true",
        help="run through enroot/pyxis (srun --container-image) instead of podman",
    )
    p.add_argument("--container-image", metavar="REF", help="what pyxis imports (default: IMAGE)")
    p.add_argument(
        "--rootful",
        action="store_true",
        help="the nodes run rootful podman (default: rootless, --userns=keep-id)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    p.set_defaults(func=slurm_command)
    takes_trainer_args(p)


def slurm_command(args: argparse.Namespace) -> int:
    rest = list(args.trainer_args)
    if args.nodes is None or args.gpus_per_node is None:
        raise LaunchError("trainimg slurm needs --nodes N and --gpus-per-node G (0 for CPU nodes)")
    image = resolve_image(args.target, args.matrix)
    cell = find_cell(load_workspace(args.matrix), args.target)
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
        container_image=args.container_image,
        rootful=args.rootful,
        uid=os.getuid(),
        gid=os.getgid(),
    )
    text = render_sbatch(job)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    atomic_write(out, text)
    out.chmod(0o755)
    print(f"trainimg: wrote {out} (submit with `sbatch {out}`)", file=sys.stderr)
    return 0

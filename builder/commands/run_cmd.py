"""`trainimg run CELL|IMAGE [options] -- TRAINER ARGS`: start the bundled trainer right on this
host (GPUs, NCCL, SELinux, user mapping, stop timeout), on one node or several (docs/run.md).

Exit codes: the trainer's own (0 finished, 2 bad input, 3 numerical stop, 4 stopped with
nothing saved, 130/143 interrupted with a checkpoint); 2 also when trainimg refuses to start
(with the reason and the fix), and then no container is left behind.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import secrets
import sys
from typing import Any

from builder.commands.common import add_engine_options, shared_options
from builder.engines.discover import engine_session
from builder.host.shown import printable
from builder.launch import cli_line, execute, gpucheck, hostfacts
from builder.launch.expected_image import expected_image
from builder.launch.plan import cdi_names, check_request, plan_run
from builder.launch.request import (
    DEFAULT_STOP_TIMEOUT,
    LaunchError,
    RunRequest,
    check_name,
    parse_add_host,
    parse_env,
    parse_gpus,
    parse_rdzv,
)
from builder.verify.target import find_cell, load_workspace, resolve_image

EPILOG = """\
examples:
  trainimg run CELL --gpus all --data ~/tokens --ckpt ~/ckpt -- --config /data/run.yaml --resume
  trainimg run CELL --gpus 2,3 --ckpt ~/ckpt -- --parallel fsdp
  trainimg run CELL --gpus none --dry-run -- --preset bf16 --steps 8
  trainimg run CELL --engine podman --dry-run --gpus all -- --steps 8   # no engine needed
  trainimg run CELL --nnodes 2 --node-rank 0 --rdzv node0:29500 --gpus all -- --parallel fsdp

exit codes: the trainer's, through `python -m trainer.launch` on every node (0 finished, 2 bad
input, 3 numerical stop, 4 stopped with nothing saved, 130/143 stopped with a checkpoint); 2
when trainimg refuses to start (the reason and the fix on stderr). Ctrl-C, SIGTERM or SIGHUP
stop the container the same way; should trainimg itself die, a watchdog stops and removes the
container.
"""


# what podman and docker read as a size (go-units RAMInBytes): 512, 64m, 8g, 1.5GiB
_SIZE = re.compile(r"^(\d+(?:\.\d+)?) ?([kKmMgGtTpP])?[iI]?[bB]?$")


_SHM_HELP = "a private /dev/shm of SIZE (e.g. 8g; units b, k, m, g, t) instead of --ipc=host"


def _shm_size(text: str) -> str:
    m = _SIZE.match(text)
    if m is None or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (expected a number and an optional unit b, k, m, g or t, "
            "e.g. 8g)"
        )
    return text


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        parents=[shared_options()],
        description=(
            "Compose the engine's run for this host and image: GPUs (CDI on podman, a device "
            "request on docker), --ipc=host and memlock for NCCL, /data and /ckpt volumes with "
            "SELinux labels when enforcing, user mapping so checkpoints belong to you, "
            "NCCL_*/TORCH_*/GLOO_*/CUDA_VISIBLE_DEVICES passed through, and a stop timeout that "
            "lets the trainer checkpoint. Arguments after -- go to `trainer train`."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="CELL|IMAGE")
    add_engine_options(p)
    p.add_argument(
        "--gpus",
        default="none",
        metavar="all|N|none|IDS",
        help="GPUs for the container, one worker each: all, none (default), N (the first N), or "
        "by index or UUID (2,3 or GPU-8f6e...)",
    )
    p.add_argument("--data", metavar="DIR", help="host directory mounted read-only at /data")
    p.add_argument(
        "--ckpt", metavar="DIR", help="host directory mounted at /ckpt (adds --ckpt-dir /ckpt)"
    )
    p.add_argument("--nnodes", type=int, default=1, metavar="N", help="nodes in the job")
    p.add_argument("--node-rank", type=int, default=0, metavar="R", help="this node (0 .. N-1)")
    p.add_argument("--rdzv", metavar="HOST:PORT", help="node 0's rendezvous endpoint (c10d)")
    p.add_argument("--rdzv-id", default="trainimg", metavar="ID", help="the job's rendezvous id")
    p.add_argument(
        "--nproc-per-node", type=int, metavar="N", help="processes here (default: GPUs, or 1)"
    )
    p.add_argument(
        "--network", metavar="MODE", help="host (default with --nnodes > 1), none (default), ..."
    )
    p.add_argument(
        "--hostname",
        metavar="NAME",
        help="the container's host name (default: the engine's choice)",
    )
    p.add_argument(
        "--local-addr",
        metavar="ADDR",
        help="this node's address as the others reach it (torchrun --local-addr; default its "
        "host name); distinct loopback addresses let several nodes share one machine",
    )
    p.add_argument(
        "--add-host",
        action="append",
        default=[],
        metavar="NAME:IP",
        help="an /etc/hosts entry in the container (nodes without DNS; repeatable)",
    )
    p.add_argument("--shm-size", type=_shm_size, metavar="SIZE", help=_SHM_HELP)
    p.add_argument(
        "--stop-timeout",
        type=int,
        default=DEFAULT_STOP_TIMEOUT,
        metavar="S",
        help=f"seconds `podman stop` waits for the checkpoint (default {DEFAULT_STOP_TIMEOUT})",
    )
    p.add_argument("--name", metavar="NAME", help="container name (default trainimg-run-XXXXXXXX)")
    p.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the podman/docker run line (with --engine: no engine needed)",
    )
    p.add_argument(
        "--no-check", action="store_true", help="skip the driver vs NVIDIA_REQUIRE_CUDA check"
    )
    p.set_defaults(func=run_command)
    takes_trainer_args(p)


class TrainerArgsParser(argparse.ArgumentParser):
    """Splits its arguments at the first `--`: what follows goes, untouched, to the trainer
    (args.trainer_args). argparse alone cannot do it: a positional list after CELL swallows the
    options in between, and it drops a `--` that directly follows CELL."""

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        cut = words.index("--") if "--" in words else len(words)
        ns, extras = super().parse_known_args(words[:cut], namespace)
        ns.trainer_args = words[cut + 1 :]
        return ns, extras


def takes_trainer_args(p: argparse.ArgumentParser) -> None:
    """Make subparser `p` a TrainerArgsParser (subparsers are all made by one class)."""
    p.__class__ = TrainerArgsParser
    p.usage = p.format_usage().removeprefix("usage: ").rstrip() + " [-- TRAINER ARGS]"


def request_from(args: argparse.Namespace, image: str, rest: list[str]) -> RunRequest:
    return RunRequest(
        image=image,
        trainer_args=tuple(rest),
        gpus=parse_gpus(args.gpus),
        data=args.data,
        ckpt=args.ckpt,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv=parse_rdzv(args.rdzv) if args.rdzv else None,
        nproc_per_node=args.nproc_per_node,
        rdzv_id=check_name(args.rdzv_id, "--rdzv-id"),
        network=args.network,
        shm_size=args.shm_size,
        local_addr=parse_rdzv(f"{args.local_addr}:1").host if args.local_addr else None,
        add_hosts=tuple(parse_add_host(h) for h in args.add_host),
        hostname=check_name(args.hostname, "--hostname") if args.hostname else None,
        stop_timeout=args.stop_timeout,
        name=check_name(args.name or f"trainimg-run-{secrets.token_hex(4)}", "--name"),
        env=parse_env(args.env),
    )


def run_command(args: argparse.Namespace) -> int:
    rest = list(args.trainer_args)
    image = resolve_image(args.target, args.matrix)
    req = request_from(args, image, rest)
    check_request(req)  # before any engine is contacted
    dirs = [d for d in (req.data, req.ckpt) if d is not None]
    if args.dry_run and args.engine:
        return _dry_run_without_engine(args, req, dirs)
    with engine_session(args.engine, args.url) as engine:
        info = engine.inspect_image(image)
        host = hostfacts.read_host(engine.name, engine.rootless(), dirs)
        plan = plan_run(req, host, info)
        verdict = gpucheck.check_driver(image, info, host, req.gpus != "none")
        if not verdict.ok and not args.no_check:
            raise LaunchError(verdict.message)
        _say(verdict.message + (" (--no-check)" if not verdict.ok else ""))
        hosting = req.rdzv is not None and req.node_rank == 0 and plan.network == "host"
        if hosting and req.rdzv and hostfacts.port_in_use(req.rdzv.host, req.rdzv.port):
            raise LaunchError(
                f"--rdzv {req.rdzv}: port {req.rdzv.port} is already in use on this "
                "host; pick a free one (the same --rdzv on every node), e.g. "
                f"--rdzv {req.rdzv.host}:{req.rdzv.port + 1}"
            )
        for note in plan.notes:
            _say(note)
        if args.dry_run:
            print(cli_line.shell_line(plan))
            return 0
        return execute.execute(engine, plan)


def _dry_run_without_engine(args: argparse.Namespace, req: RunRequest, dirs: list[str]) -> int:
    """`--dry-run --engine E`: the line for a machine whose engine is not here (a login node).
    The image is taken as trainimg builds it (a cell's environment and labels from the matrix),
    rootless podman when you are not root; the driver check is said, not enforced: it belongs
    where the container runs."""
    ws = load_workspace(args.matrix)
    cell = find_cell(ws, args.target)
    info = expected_image(req.image, cell, ws.matrix.project if ws is not None else None)
    rootless = args.engine == "podman" and os.getuid() != 0
    host = hostfacts.read_host(args.engine, rootless, dirs)
    if args.engine == "podman" and req.gpus != "none" and not host.cdi_devices:
        host = dataclasses.replace(host, cdi_devices=cdi_names(req.gpus))
        _say("no CDI spec here: the GPUs are named as asked; the spec is checked where it runs")
    plan = plan_run(req, host, info)
    verdict = gpucheck.check_driver(req.image, info, host, req.gpus != "none")
    _say(
        f"no engine asked (--dry-run --engine {args.engine}): the image is taken as trainimg "
        f"builds it, {'rootless' if rootless else 'rootful'} {args.engine}"
    )
    _say(f"{verdict.message} (here; checked again where it runs)")
    for note in plan.notes:
        _say(note)
    print(cli_line.shell_line(plan))
    return 0


def _say(line: str) -> None:
    # the driver check names this host's GPUs as /proc and sysfs spell them: printable only
    print(f"trainimg: {printable(line)}", file=sys.stderr)

"""`trainimg preflight`: read-only host checks before an NVIDIA driver change, plus the impact of
the target driver on every image (matrix cells, build records, local images).

Exit codes: 0 all ok, 1 something blocks, 3 warnings only, 2 bad input (docs/preflight.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from builder import lock as lockfile
from builder.commands.common import driver_argument, shared_options
from builder.errors import TrainimgError
from builder.preflight import images as img
from builder.preflight.checks import CHECK_IDS
from builder.preflight.fleet import FleetInputs, record_name, run_fleet
from builder.preflight.host_spec import target_from_spec
from builder.preflight.hostio import connect
from builder.preflight.inventory import Target, targets
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record, find_records
from builder.preflight.report import as_json, exit_code, render_fleet
from builder.workspace import DEFAULT_MATRIX, open_workspace

JSON_INDENT_HOSTS = 10


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a job count: {text!r} (expected 1 or more)")
    return int(text)


def _seconds(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 600:
        raise argparse.ArgumentTypeError(f"not a timeout: {text!r} (expected 1 to 600 seconds)")
    return int(text)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "preflight",
        parents=[shared_options()],
        description=(
            "Inspect GPU hosts before a driver change, without changing them: OS (family from "
            "/etc/os-release) and kernels, kernel-devel and DKMS, the driver (loaded vs "
            "installed: reboot pending; the CUDA version it reports; NVIDIA's end of life), its "
            "kernel module, GPUs (lspci and NVML), Secure Boot, nouveau, persistenced, fabric "
            "manager, the container toolkit and CDI spec, podman, SELinux, GPU processes, free "
            "disk, modules that pin the driver, MIG, pending memory repairs, Xid errors, a "
            "runfile install and dnf pins. With --target-driver, judge every image (matrix "
            "cells, images/lock.json, the host's podman images) on the current and the target "
            "driver. --record DIR keeps what the hosts returned; --from DIR judges such records "
            "offline (a record is untrusted input: checked whole, nothing outside it read). "
            "Each host gets a verdict now and, with --target-driver, one for the plan, which "
            "decides the exit code (a plan that repairs a host passes). The report is a line "
            "per host, its fix and the hosts per reason code; --verbose prints every check. "
            "Exit 0: all ok; 1: something blocks; 3: warnings only; 2: bad input."
        ),
        epilog="checks, in report order: " + ", ".join(CHECK_IDS) + " (docs/preflight.md)",
    )
    p.add_argument(
        "--hosts",
        default=None,
        help="comma-separated testinfra host specs (local://, ssh://user@host, "
        "podman://NAME ...); default: local://",
    )
    p.add_argument(
        "--inventory",
        default=None,
        help="an ansible inventory (INI, YAML, or the JSON of `ansible-inventory --list`)",
    )
    p.add_argument("--limit", default=None, help="with --inventory: groups or hosts to check")
    p.add_argument("--jobs", type=_jobs, default=4, help="hosts checked in parallel (default 4)")
    p.add_argument(
        "--target-driver",
        type=driver_argument,
        default=None,
        metavar="VERSION",
        help="the driver to judge, e.g. 570.124.06",
    )
    p.add_argument(
        "--target-module",
        choices=("open", "proprietary"),
        default=None,
        help="the kernel-module flavour the upgrade installs (default: as now)",
    )
    p.add_argument(
        "--lock",
        default=None,
        help=f"build records to judge (default: {lockfile.DEFAULT_PATH} beside the matrix, if "
        "present)",
    )
    p.add_argument(
        "--no-images",
        action="store_true",
        help="skip the image impact (matrix, lock and local images)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a driver branch past NVIDIA's end of life blocks (default: it warns)",
    )
    p.add_argument(
        "--record",
        metavar="DIR",
        default=None,
        help="also write what each host returned to DIR/<host>/ (a record: judge it later "
        "with --from)",
    )
    p.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        default=None,
        help="judge recorded hosts instead of live ones: DIR is one record, or a directory of "
        "records (a fleet); nothing is contacted",
    )
    p.add_argument("--timeout", type=_seconds, default=20, help="seconds per probe (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the report")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="every check and the image table of every host (default: one line per host, "
        "its fix, and the hosts per reason code)",
    )
    p.add_argument("--wide", action="store_true", help="with --verbose: do not shorten findings")
    p.set_defaults(func=run, matrix=None)


def _targets(args: argparse.Namespace) -> list[Target]:
    out: list[Target] = []
    if args.from_dir is not None:
        if args.hosts is not None or args.inventory or args.record:
            raise TrainimgError(
                "--from judges recorded hosts: it takes no --hosts, --inventory or --record"
            )
        found = find_records(Path(args.from_dir))
        # a broken or hostile record is bad input (exit 2), found before judging any
        return [Target(p.name, f"record:{p}", record=p, loaded=Record.load(p)) for p in found]
    if args.hosts is not None and not args.hosts.strip(" ,"):
        raise TrainimgError("--hosts is empty: name at least one host spec (e.g. local://)")
    if args.inventory:
        out += targets(args.inventory, args.limit)
    elif args.limit:
        raise TrainimgError("--limit needs --inventory")
    if args.hosts:
        out += [target_from_spec(s.strip()) for s in args.hosts.split(",") if s.strip()]
    if not args.inventory and not args.hosts:
        out.append(Target("local", "local://"))
    if args.record:
        root = Path(args.record)
        taken = [t.name for t in out if (root / record_name(t.name)).exists()]
        if taken:
            raise TrainimgError(
                f"--record {root}: {root / record_name(taken[0])} exists (records are never "
                "overwritten: pick a new directory)"
            )
    return out


def _images(args: argparse.Namespace) -> tuple[list[img.ImageRecord], list[str]]:
    notes: list[str] = []
    matrix: list[img.ImageRecord] = []
    given = args.matrix is not None
    path = Path(args.matrix or os.environ.get("TRAINIMG_MATRIX", DEFAULT_MATRIX))
    if given and not path.is_file():
        raise TrainimgError(f"--matrix {path}: no such file")
    if args.lock and not Path(args.lock).is_file():
        raise TrainimgError(f"--lock {args.lock}: no such file")
    root = path.resolve().parent
    if path.is_file():
        try:
            ws = open_workspace(path, args.today, strict=False)
            matrix = img.from_workspace(ws)
        except TrainimgError as exc:
            if given:
                raise
            notes.append(f"matrix not judged: {exc}")
    else:
        notes.append(f"no matrix at {path}: matrix cells not judged")
    lock_path = Path(args.lock) if args.lock else root / lockfile.DEFAULT_PATH
    lock: list[img.ImageRecord] = []
    if args.lock or lock_path.is_file():
        lock, lock_notes = img.from_lock(lock_path)
        notes += lock_notes
    return img.merge(matrix, lock), notes


def run(args: argparse.Namespace) -> int:
    hosts = _targets(args)
    records, notes = ([], []) if args.no_images else _images(args)
    plan = UpgradePlan(args.target_driver, args.target_module, args.strict)
    with tempfile.TemporaryDirectory(prefix="trainimg-ssh-") as control:  # mode 0700
        ctx = FleetInputs(
            plan,
            args.today or dt.date.today(),
            records,
            notes,
            not args.no_images,
            args.timeout,
            Path(args.record) if args.record else None,
            control,
        )
        reports = run_fleet(hosts, ctx, args.jobs, lambda spec: connect(spec, args.timeout))
    target = str(args.target_driver) if args.target_driver else None
    if args.json:
        # indented for a few hosts; a fleet's document on one line (Python's indenting encoder
        # is several times slower than its compact one: jq indents it for a person)
        indent = 2 if len(reports) <= JSON_INDENT_HOSTS else None
        print(json.dumps(as_json(reports, target), indent=indent))  # dumps: the C encoder
    else:
        print(render_fleet(reports, target, verbose=args.verbose, wide=args.wide))
    return exit_code(reports)

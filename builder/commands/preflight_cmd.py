"""`trainimg preflight`: read-only host checks before an NVIDIA driver change, plus the impact of
the target driver on every image (matrix cells, build records, local images).

Exit codes (builder/judgement/kind.py EXIT_TABLE, docs/preflight.md): 0 nothing counted, 1 the
plan breaks something, 4 broken now or never ran only, 3 risks only, 2 bad input; `--fail-on`
chooses the kinds that count.

Over 400 lines: one command's parser - some thirty options, each with its --help text and its
check at parse time - and the run that reads them, kept in one module so the two cannot drift.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.build import lock as lockfile
from builder.commands.columns import output_width
from builder.commands.common import (
    FROM_CONFIG,
    configured_value,
    driver_argument,
    shared_options,
)
from builder.commands.json_out import JsonKind, add_json_option, document, text_wanted, write_json
from builder.errors import TrainimgError
from builder.judgement.kind import DEFAULT_FAIL_ON
from builder.preflight import images as img
from builder.preflight.checks import CHECK_IDS
from builder.preflight.exit_gate import exit_table_help, fail_on_argument
from builder.preflight.fleet import FleetInputs, record_name, run_fleet
from builder.preflight.host_spec import target_from_spec
from builder.preflight.hostio import connect
from builder.preflight.html_report import render_html
from builder.preflight.inventory import Target, targets
from builder.preflight.model import UpgradePlan
from builder.preflight.record import Record, find_records
from builder.preflight.report import (
    REPORT_SCHEMA,
    as_json,
    exit_code,
    fleet_json_lines,
    render_fleet,
)
from builder.preflight.ssh_transport import SshOptions
from builder.workspace import DEFAULT_MATRIX, open_workspace

JSON_INDENT_HOSTS = 10
# its schema: preflight's own REPORT_SCHEMA (docs/json.md, docs/schemas/)
PREFLIGHT_JSON = JsonKind("trainimg.preflight", REPORT_SCHEMA)
# The per-host deadline's default: a healthy host answers its ~40 probes in seconds; one whose
# nvidia-smi hangs costs --timeout per probe that touches it.
HOST_TIMEOUT_S = 300


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a job count: {text!r} (expected 1 or more)")
    return int(text)


def _seconds_up_to(most: int) -> Any:
    def parse(text: str) -> int:
        if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= most:
            raise argparse.ArgumentTypeError(f"not a number from 1 to {most}: {text!r}")
        return int(text)

    return parse


def _seconds(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 600:
        raise argparse.ArgumentTypeError(f"not a timeout: {text!r} (expected 1 to 600 seconds)")
    return int(text)


DESCRIPTION = (
    "Inspect GPU hosts before a driver change, without changing them: OS (family from "
    "/etc/os-release) and kernels, kernel-devel and DKMS, the driver (loaded vs "
    "installed: reboot pending; the CUDA version it reports; NVIDIA's end of life), its "
    "kernel module, GPUs (lspci and NVML), Secure Boot, nouveau, persistenced, fabric "
    "manager, the container toolkit and CDI spec, podman, SELinux, GPU processes, free "
    "disk, modules that pin the driver, MIG, pending memory repairs, Xid errors, a "
    "runfile install and dnf pins. With --target-driver, judge every image (matrix "
    "cells, images/lock.json, the host's podman images) on the current and the target "
    "driver; with --repos, ask each EL host's dnf whether the driver's packages and its "
    "kernel module for the running and next-boot kernels install. --record DIR keeps what the "
    "hosts returned; --from DIR judges such records "
    "offline (a record is untrusted input: checked whole, nothing outside it read). "
    "Each host gets a verdict now and, with --target-driver, one for the plan, which "
    "decides the exit code (a plan that repairs a host passes). Each finding has a kind: "
    "breaks, broken-now, never-ran, risk or info. The report is a line per host (every "
    "blocking reason, by kind), its fix and the hosts per reason code; --verbose prints every "
    "check. The exit code is the worst kind's that --fail-on counts (below)."
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "preflight",
        parents=[shared_options()],
        # plain paragraphs: the formatter wraps them to the terminal, between words only
        description=DESCRIPTION,
        epilog=exit_table_help()
        + "\n\n"
        + "checks, in report order: "
        + ", ".join(CHECK_IDS)
        + " (docs/preflight.md)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _host_options(p)
    _judgement_options(p)
    _output_options(p)
    p.set_defaults(func=run, matrix=None)


def _host_options(p: argparse.ArgumentParser) -> None:
    """Which hosts, and how many at once."""
    p.add_argument(
        "--hosts",
        default=None,
        help="comma-separated testinfra host specs (local://, ssh://user@host, "
        "podman://NAME ...); default: local://",
    )
    p.add_argument(
        "--inventory",
        default=None,
        help="an ansible inventory (INI, YAML, or the JSON of `ansible-inventory --list`), "
        "read as ansible-core does; ansible_ssh_common_args/_extra_args validated, then "
        "passed to ssh (default, when --hosts is not given either: `inventory` in the config "
        f"file, else local://; {FROM_CONFIG})",
    )
    p.add_argument(
        "--limit",
        default=None,
        help="with --inventory: Ansible host patterns (a:b, a:&b, a:!b, node*, ~regex)",
    )
    p.add_argument("--jobs", type=_jobs, default=4, help="hosts checked in parallel (default 4)")
    _ssh_options(p)


def _ssh_options(p: argparse.ArgumentParser) -> None:
    """How long a host may take, and how ssh is run (BatchMode=yes always: never a prompt)."""
    p.add_argument(
        "--host-timeout",
        type=_seconds_up_to(3600),
        default=HOST_TIMEOUT_S,
        metavar="S",
        help=f"seconds one host may take in all (default {HOST_TIMEOUT_S}); a host past it is "
        "unreachable, with how far it got, and the others are still judged",
    )
    p.add_argument(
        "--connect-timeout",
        type=_seconds_up_to(600),
        default=SshOptions.connect_timeout,
        metavar="S",
        help=f"ssh ConnectTimeout (default {SshOptions.connect_timeout})",
    )
    p.add_argument(
        "--server-alive-interval",
        type=_seconds_up_to(600),
        default=SshOptions.alive_interval,
        metavar="S",
        help=f"ssh ServerAliveInterval (default {SshOptions.alive_interval})",
    )
    p.add_argument(
        "--server-alive-count-max",
        type=_seconds_up_to(100),
        default=SshOptions.alive_count,
        metavar="N",
        help=f"ssh ServerAliveCountMax (default {SshOptions.alive_count}): a host that stops "
        "answering is dropped after about interval x count seconds",
    )
    p.add_argument(
        "--ssh-config",
        metavar="FILE",
        default=None,
        help="an ssh_config for every ssh host (ssh -F; default: ssh's own, ~/.ssh/config): "
        "StrictHostKeyChecking, known hosts and keys as it says",
    )


def _judgement_options(p: argparse.ArgumentParser) -> None:
    """What to judge them for: the target driver and module, the images, how strictly."""
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
        "--fail-on",
        type=fail_on_argument,
        default=DEFAULT_FAIL_ON,
        metavar="KINDS",
        help="the finding kinds that fail the run, a comma list of breaks, broken-now, "
        "never-ran, risk (default: all four; e.g. --fail-on breaks gates only on what the plan "
        "breaks)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a driver branch past NVIDIA's end of life blocks (default: it warns)",
    )
    p.add_argument(
        "--repos",
        action="store_true",
        help="also ask each EL host's dnf (repoquery, module list, install --assumeno; "
        "--cacheonly first, else dnf refreshes its metadata cache) whether the driver and its "
        "kernel module for the running and next-boot kernels install: driver.repos blocks when "
        "nothing installs it for the next boot's",
    )


def _output_options(p: argparse.ArgumentParser) -> None:
    """Records kept or replayed, probe timeout, and how the report is printed."""
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
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=20,
        help="the per-probe deadline in seconds (default 20): the host runs each probe under "
        "`timeout`; over ssh this side gives up 10 s later and the host is unreachable",
    )
    shape = p.add_mutually_exclusive_group()
    add_json_option(shape, PREFLIGHT_JSON)
    shape.add_argument(
        "--jsonl",
        action="store_true",
        help="print JSON Lines: one host object per line (as --json's `hosts`), then one "
        '{"summary": ...} line (docs/preflight.md): a fleet streamed, jq-able line by line',
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        default=None,
        help="also write the report as one self-contained HTML page to FILE (tables per "
        "verdict, a filter; nothing is fetched when it is viewed); FILE's directory must exist",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="every check and the image table of every host (default: a fleet's summary "
        "first - hosts per verdict, then grouped by reason with the fix once - then one line "
        "per host, worst first)",
    )
    p.add_argument("--wide", action="store_true", help="with --verbose: do not shorten findings")


def _targets(args: argparse.Namespace) -> list[Target]:
    out: list[Target] = []
    if args.from_dir is not None:
        if args.hosts is not None or args.inventory or args.record:
            raise TrainimgError(
                "--from judges recorded hosts: it takes no --hosts, --inventory or --record"
            )
        found = find_records(Path(args.from_dir))
        if len(found) == 1:  # one record, broken or hostile: bad input (exit 2), nothing judged
            return [Target(found[0].name, f"record:{found[0]}", record=found[0],
                           loaded=Record.load(found[0]))]  # fmt: skip
        # a fleet: each record is loaded by the worker that judges it; a refused one is that
        # host's block (host.reach), the others are judged
        return [Target(p.name, f"record:{p}", record=p) for p in found]
    if args.hosts is not None and not args.hosts.strip(" ,"):
        raise TrainimgError("--hosts is empty: name at least one host spec (e.g. local://)")
    if args.inventory is None and args.hosts is None:  # neither typed: the configured fleet
        args.inventory = configured_value("inventory")
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


def _ssh(args: argparse.Namespace) -> SshOptions:
    if args.ssh_config is not None and not Path(args.ssh_config).is_file():
        raise TrainimgError(f"--ssh-config {args.ssh_config}: no such file")
    return SshOptions(
        args.connect_timeout,
        args.server_alive_interval,
        args.server_alive_count_max,
        os.path.abspath(args.ssh_config) if args.ssh_config else None,
    )


def _html_path(value: str | None) -> Path | None:
    """--html's file, checked before any host is contacted: its directory must exist."""
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise TrainimgError(
            f"--html {value}: is a directory; give a file name, e.g. {value}/preflight.html"
        )
    if not path.parent.is_dir():
        raise TrainimgError(f"--html {value}: no directory {path.parent}; create it first")
    return path


def run(args: argparse.Namespace) -> int:
    html_path = _html_path(args.html)
    hosts = _targets(args)
    records, notes = ([], []) if args.no_images else _images(args)
    plan = UpgradePlan(args.target_driver, args.target_module, args.strict, args.repos)
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
            _ssh(args),
            args.host_timeout,
        )
        reports = run_fleet(hosts, ctx, args.jobs, lambda spec: connect(spec, args.timeout))
    if args.from_dir is not None and not any(r.reachable for r in reports):
        raise TrainimgError(f"--from {args.from_dir}: no record could be judged; the first: "
                            f"{reports[0].checks[0].message}")  # fmt: skip
    target = str(args.target_driver) if args.target_driver else None
    if args.jsonl:
        for line in fleet_json_lines(reports, target, args.fail_on):
            print(line)
    elif args.json is not None:
        # indented for a few hosts; a fleet's document on one line (Python's indenting encoder
        # is several times slower than its compact one: jq indents it for a person)
        indent = 2 if len(reports) <= JSON_INDENT_HOSTS else None
        write_json(
            args.json, document(PREFLIGHT_JSON, as_json(reports, target, args.fail_on)), indent
        )
    if not args.jsonl and text_wanted(args):
        print(render_fleet(reports, target, verbose=args.verbose, wide=args.wide,
                           fail_on=args.fail_on, width=output_width()))  # fmt: skip
    if html_path is not None:
        atomic_write(html_path, render_html(reports, target, args.fail_on))
    return exit_code(reports, args.fail_on)

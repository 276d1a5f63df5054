"""`trainimg base`: make the offline base image of every local (air-gapped) OS in the matrix,
through whichever engine discovery finds (podman or Docker Engine)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from builder.build.base_image import BaseSpec, make_offline_base
from builder.commands.common import (
    add_engine_options,
    add_quiet_option,
    shared_options,
    workspace,
)
from builder.engines.discover import engine_session
from builder.engines.local_podman import ROOT_ENV
from builder.engines.roles import ImageStore
from builder.errors import TrainimgError
from builder.facts.oses import DEBIAN_MIRROR, DISTROS
from builder.matrix.model import OsSpec
from builder.progress import Progress


def register(sub: Any) -> None:
    p = sub.add_parser(
        "base",
        parents=[shared_options()],
        description=(
            "Make the base image of every OS the matrix marks `local: true`, with debootstrap "
            "from Debian's mirror (plus the -updates and -security suites), loaded through "
            "the engine's API (podman or Docker Engine) as a reproducible archive: the same "
            "apt lists give the same image id in any store; no container registry is "
            f"needed. Set ${ROOT_ENV} to use an isolated podman store (as CI does); without it, "
            "the checkout's store .cache/podman is used when it exists and no engine of the "
            "host's answers (docs/build.md)."
        ),
    )
    add_engine_options(p)
    p.add_argument(
        "--cache",
        default=os.environ.get("TRAINIMG_CACHE", ".cache"),
        help="where the rootfs tarball is cached (default: $TRAINIMG_CACHE or .cache)",
    )
    p.add_argument("--force", action="store_true", help="remake the base even if the image exists")
    p.add_argument("--mirror", default=DEBIAN_MIRROR, help="the Debian mirror")
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = workspace(args)
    local_oses = [o for o in ws.matrix.oses.values() if o.local]
    if not local_oses:
        print("no OS in the matrix is marked local: nothing to make")
        return 0
    progress = Progress(quiet=args.quiet)
    with engine_session(args.engine, args.url) as engine:
        for os_spec in local_oses:
            _make(args, os_spec, engine, progress)
    return 0


def _make(
    args: argparse.Namespace, os_spec: OsSpec, engine: ImageStore, progress: Progress
) -> None:
    suite = os_spec.distro.codename  # the Debian suite debootstrap fetches
    if not suite:
        recipes = [key for key, distro in DISTROS.items() if distro.codename]
        raise TrainimgError(
            f"oses.{os_spec.key}: no offline base recipe for {os_spec.distro.name} "
            f"(recipes exist for: {', '.join(recipes)})"
        )
    spec = BaseSpec(tag=os_spec.base, suite=suite, mirror=args.mirror)
    made = make_offline_base(
        spec,
        Path(args.cache) / "base",
        engine,
        force=args.force,
        log=lambda m: progress.say(f"base: {m}"),
        progress=progress,
    )
    print(f"{spec.tag}: {'made' if made else 'present'} ({engine.name})")

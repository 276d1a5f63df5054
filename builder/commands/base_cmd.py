"""`trainimg base`: make the offline base image of every local (air-gapped) OS in the matrix."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builder.base_image import BaseSpec, make_offline_base
from builder.commands.common import shared_options, workspace
from builder.engines.discover import isolated_store
from builder.engines.local_podman import ROOT_ENV, podman_cli
from builder.errors import TrainimgError
from builder.matrix.model import OsSpec

SUITES = {"debian12": "bookworm"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "base",
        parents=[shared_options()],
        help="make the offline base image(s) for local OSes (debootstrap -> podman import)",
        description=(
            "Make the base image of every OS the matrix marks `local: true`, with debootstrap "
            "from Debian's mirror and `podman import`; no container registry is needed. Set "
            f"${ROOT_ENV} to use an isolated podman store (as CI does); without it, the "
            "checkout's store .cache/podman is used when it exists and no engine of the host's "
            "answers (docs/build.md)."
        ),
    )
    p.add_argument(
        "--cache",
        default=os.environ.get("TRAINIMG_CACHE", ".cache"),
        help="where the rootfs tarball is cached (default: $TRAINIMG_CACHE or .cache)",
    )
    p.add_argument("--force", action="store_true", help="re-import even if the image exists")
    p.add_argument("--mirror", default="http://deb.debian.org/debian", help="the Debian mirror")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = workspace(args)
    local_oses = [o for o in ws.matrix.oses.values() if o.local]
    if not local_oses:
        print("no OS in the matrix is marked local: nothing to make")
        return 0
    store = isolated_store()
    try:
        _make(args, local_oses, podman_cli(store))
    finally:
        if store is not None:
            store.release()  # `podman import` leaves the store's graph root mounted
    return 0


def _make(args: argparse.Namespace, local_oses: list[OsSpec], podman: Callable[..., str]) -> None:
    for os_spec in local_oses:
        suite = SUITES.get(os_spec.distro.key)
        if suite is None:
            raise TrainimgError(
                f"oses.{os_spec.key}: no offline base recipe for {os_spec.distro.name} "
                f"(recipes exist for: {', '.join(SUITES)})"
            )
        spec = BaseSpec(tag=os_spec.base, suite=suite, mirror=args.mirror)
        made = make_offline_base(
            spec,
            Path(args.cache) / "base",
            podman,
            force=args.force,
            log=lambda m: print(f"base: {m}", file=sys.stderr),
        )
        print(f"{spec.tag}: {'made' if made else 'present'}")

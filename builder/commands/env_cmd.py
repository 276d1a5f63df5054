"""`trainimg env`: the shell exports that point plain podman/docker at the engine trainimg uses.

`eval "$(trainimg env)"` in a shell, and `podman images` there lists what `trainimg build` made:
for an isolated store (this checkout's `.cache/podman`, or $TRAINIMG_PODMAN_ROOT) the podman CLI
reads the store directly through CONTAINERS_CONF/CONTAINERS_STORAGE_CONF; for the host's own
engine CONTAINER_HOST (podman) or DOCKER_HOST (docker) names the socket discovery found. Nothing
is started or created, except that an isolated store's configuration is (re)written.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from builder.commands.common import add_engine_options
from builder.engines.discover import Choice, EngineSearch, locate
from builder.engines.local_podman import ROOT_ENV, LocalPodman


def register(sub: Any) -> None:
    p = sub.add_parser(
        "env",
        description=(
            "Print shell exports (values shell-quoted) that point plain podman and docker at the "
            "engine every trainimg command here uses, in discovery's order (docs/build.md): "
            "--url, CONTAINER_HOST, DOCKER_HOST, $TRAINIMG_PODMAN_ROOT, the host's podman/Docker "
            "sockets, then this checkout's isolated store .cache/podman (made by scripts/demo.sh)."
            ' Use: eval "$(trainimg env)".'
        ),
    )
    add_engine_options(p)
    p.add_argument(
        "--release",
        action="store_true",
        help="instead: unmount what the isolated store's storage left mounted (before removing "
        "the checkout); exit 1 when a podman command or container still uses it",
    )
    p.set_defaults(func=run)


def _said(text: object) -> str:
    """Text for a comment line the shell evaluates: no line break may end the comment."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def exports(choice: Choice) -> list[str]:
    """The lines `trainimg env` prints for where discovery leads."""
    q = shlex.quote
    if choice.store is not None:
        local = LocalPodman(choice.store)
        lines = [
            f"# trainimg's engine: the isolated podman store {_said(local.root)}"
            f" ({_said(choice.source)}).",
            "# Plain podman reads it directly; docker reaches it only while a trainimg command",
            f"# serves its API on {_said(local.url)}.",
            f"export {ROOT_ENV}={q(str(local.root))}",
        ]
        lines += [f"export {k}={q(v)}" for k, v in local.env().items()]
        return [*lines, "unset CONTAINER_HOST DOCKER_HOST"]
    var = "CONTAINER_HOST" if choice.kind == "podman" else "DOCKER_HOST"
    return [
        f"# trainimg's engine: {choice.kind} at {_said(choice.url)} ({_said(choice.source)}).",
        f"export {var}={q(choice.url)}",
    ]


def run(args: argparse.Namespace) -> int:
    choice = locate(EngineSearch(args.engine, args.url))
    if args.release:
        if choice.store is None:
            print(f"nothing to release: trainimg uses {choice.url} ({choice.source})")
            return 0
        local = LocalPodman(choice.store)
        busy = local.processes()
        if busy:
            print(
                f"{local.root} is in use by pid {', '.join(map(str, busy))}: left mounted",
                file=sys.stderr,
            )
            return 1
        done = local.release()
        print(f"{local.root}: unmounted {len(done)} mount(s)")
        return 0
    if choice.store is not None:
        LocalPodman(choice.store).configure()  # podman missing: a clear error, exit 2
    print("\n".join(exports(choice)))
    return 0

"""`trainimg pin [OS ...]`: resolve each registry base of matrix.yaml to its manifest digest
(Registry HTTP API v2) and write the digests into matrix.yaml, keeping comments and order.
Render afterwards emits `FROM <base>@sha256:...` and labels io.trainimg.base.pinned=true."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.commands.common import shared_options, workspace
from builder.errors import TrainimgError
from builder.registry import auth, reference
from builder.registry.client import RegistryClient
from builder.registry.pin import set_digest


def register(sub: Any) -> None:
    p = sub.add_parser(
        "pin",
        parents=[shared_options()],
        description=(
            "For each OS (default: every OS whose base comes from a registry), ask the base's "
            "registry for the manifest digest of its tag and write it as oses.<os>.digest in "
            "matrix.yaml; only those values change. Credentials: $REGISTRY_AUTH_FILE, "
            "${XDG_RUNTIME_DIR}/containers/auth.json, ~/.docker/config.json. Nothing is "
            "written unless every base resolved. Then run `trainimg render`."
        ),
    )
    p.add_argument("oses", nargs="*", metavar="OS", help="OS keys of matrix.yaml to pin")
    p.add_argument("--dry-run", action="store_true", help="print the digests, write nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = workspace(args, strict=False)
    oses = ws.matrix.oses
    unknown = [k for k in args.oses if k not in oses]
    if unknown:
        raise TrainimgError(
            f"{args.matrix}: no OS {', '.join(unknown)} under oses (known: {', '.join(oses)})"
        )
    chosen = [oses[k] for k in args.oses] if args.oses else [o for o in oses.values()]
    local = [o.key for o in chosen if o.local]
    if local and args.oses:
        raise TrainimgError(
            f"{args.matrix}: oses.{local[0]} is a local base (made by `trainimg base`), not "
            "in a registry: there is no digest to pin"
        )
    path = Path(args.matrix)
    text = path.read_text(encoding="utf-8")
    changed = 0
    for os_spec in (o for o in chosen if not o.local):
        ref = reference.parse_reference(os_spec.base, what=f"{path}: oses.{os_spec.key}.base")
        client = RegistryClient(ref.registry, auth.lookup(ref.registry))
        try:
            digest = client.manifest_digest(ref)
        finally:
            client.close()
        note = "unchanged" if digest == os_spec.digest else "pinned"
        changed += digest != os_spec.digest
        print(f"oses.{os_spec.key}: {os_spec.base}@{digest} ({note})")
        text = set_digest(text, os_spec.key, digest)
    if changed and not args.dry_run:
        atomic_write(path, text)
        print(f"{path}: {changed} digest(s) written; run `trainimg render`", file=sys.stderr)
    return 0

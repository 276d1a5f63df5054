"""`trainimg prune`: remove build-hash tags that no record in the lock file references, from
the engine's store (and, with --registry, from a registry). Cell tags are never touched."""

from __future__ import annotations

import argparse
import os
from typing import Any

from builder.build import lock as lockfile
from builder.build.prune import BUILD_HASH_TAG, referenced_hashes, stale
from builder.commands.common import (
    REGISTRY_HELP,
    add_engine_options,
    configured_value,
    lock_file,
    said,
    shared_options,
    workspace,
)
from builder.engines.discover import engine_session
from builder.errors import TrainimgError
from builder.registry import auth, reference
from builder.registry.client import RegistryClient


def register(sub: Any) -> None:
    p = sub.add_parser(
        "prune",
        parents=[shared_options()],
        description=(
            "List the <repository>:<build hash> tags in the engine's store (or, with "
            "--registry, in that registry repository) and remove those that no record of the "
            "lock file names. A registry manifest is deleted only when no referenced tag "
            "points at it."
        ),
    )
    p.add_argument("--repository", help="local repository (default: project.repository)")
    p.add_argument(
        "--registry",
        nargs="?",
        const="",
        metavar="HOST[:PORT]/REPO",
        help="prune a registry repository instead of the engine's store; given without a "
        f"value: the configured one ({REGISTRY_HELP}). Never implied: a plain `prune` only "
        "touches the engine's store",
    )
    p.add_argument("--lock", help="the lock file (default: images/lock.json)")
    p.add_argument("--dry-run", action="store_true", help="print what would go, remove nothing")
    add_engine_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = workspace(args, strict=False)
    lock_path = lock_file(args, ws)
    records = lockfile.read(lock_path)
    if args.registry == "":
        args.registry = configured_value("registry")
        if args.registry is None:
            raise TrainimgError(
                "--registry without a value prunes the configured registry, and none is "
                "configured: give --registry HOST[:PORT]/REPO, or set $TRAINIMG_REGISTRY or "
                "`registry` in the config file (`trainimg config show`)"
            )
    if args.registry is not None:
        return _registry(args, records)
    repo = args.repository or ws.matrix.project.repository
    with engine_session(args.engine, args.url) as engine:
        for tag in stale(engine.image_tags(repo), records):
            print(f"{'would remove' if args.dry_run else 'removed'} {repo}:{tag}")
            if not args.dry_run:
                engine.remove_image(f"{repo}:{tag}")
    return 0


def _registry(args: argparse.Namespace, records: dict[str, lockfile.BuildRecord]) -> int:
    ref = reference.parse_reference(args.registry, what=said("--registry", args.registry))
    client = RegistryClient(ref.registry, auth.lookup(ref.registry, os.environ))
    try:
        tags = client.tags(ref.repository)
        keep = referenced_hashes(records)
        kept_digests = {
            client.manifest_digest(ref.with_tag(t))
            for t in tags
            if t in keep or not BUILD_HASH_TAG.match(t)
        }
        for tag in stale(tags, records):
            digest = client.manifest_digest(ref.with_tag(tag))
            if digest in kept_digests:
                print(f"kept {ref.name}:{tag} (its manifest is also a referenced tag's)")
                continue
            print(f"{'would remove' if args.dry_run else 'removed'} {ref.name}:{tag} ({digest})")
            if not args.dry_run:
                client.delete_manifest(ref.repository, digest)
    finally:
        client.close()
    return 0

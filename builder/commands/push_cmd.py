"""`trainimg push [CELL ...] --registry HOST[:PORT]/REPO`: push built cells under their cell
tag and their build-hash tag, and record the pushed manifest digest in the lock file.

Only cells with a lock record are pushed, and only the image that record names. The registry
is asked first (reachable? credentials taken?), so bad input fails before anything moves
(exit 2). Each push is retried; a push that still fails exits 1 and records nothing for its
cell. Credentials travel in the push request's header only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from builder.build import lock as lockfile
from builder.commands.common import (
    REGISTRY_HELP,
    add_engine_options,
    add_quiet_option,
    configured_value,
    lock_file,
    said,
    shared_options,
    workspace,
)
from builder.engines.base import EngineError
from builder.engines.credentials import Credentials
from builder.engines.discover import engine_session, isolated_store
from builder.engines.local_podman import podman_cli
from builder.engines.roles import InspectAndRun, RegistryTransfer
from builder.errors import TrainimgError
from builder.progress import Progress
from builder.registry import attach, auth, dsse, reference, signed, signing
from builder.registry.client import RegistryClient
from builder.sbom import documents
from builder.workspace import Workspace, is_glob

RETRIES = 3


class PushFailed(TrainimgError):
    exit_code = 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "push",
        parents=[shared_options()],
        description=(
            "Push each CELL (default: project.default_cell; or an image `trainimg extend` "
            "recorded) that the lock file records, as "
            "REGISTRY/REPO:<cell> and REGISTRY/REPO:<build hash>, and record the manifest "
            "digest under `pushed` in its lock record. Credentials: as podman finds them "
            "($REGISTRY_AUTH_FILE, podman login's auth.json, ~/.config/containers/auth.json, "
            "~/.docker/config.json). --sign: podman's GPG simple signing, and the SBOM and "
            "provenance pushed beside the image. Exit codes: 0 "
            "pushed, 1 a push failed after retries, 2 bad input (unknown cell, unbuilt cell, "
            "unreachable registry, refused credentials)."
        ),
    )
    p.add_argument("cells", nargs="*", metavar="CELL", help="cells to push; globs too: 'rocky9-*'")
    p.add_argument("--all", action="store_true", help="every cell the lock file records")
    p.add_argument(
        "--registry",
        metavar="HOST[:PORT]/REPO",
        default=configured_value("registry"),
        help=f"the registry repository to push to ({REGISTRY_HELP})",
    )
    p.add_argument("--lock", help="the lock file (default: images/lock.json)")
    p.add_argument("--retries", type=int, default=RETRIES, help="tries per push (default: 3)")
    p.add_argument(
        "--sign",
        action="store_true",
        help="sign each pushed tag with podman's simple signing, every tag's signature kept "
        "under its manifest digest (needs --sign-by and a registries.d entry whose staging is "
        "a writable directory, `trainimg policy`), and push the SBOM and SLSA provenance beside "
        "the image (tags sha256-<hex>.sbom / .att)",
    )
    p.add_argument("--sign-by", metavar="KEY", help="the GPG key to sign with (fingerprint or id)")
    p.add_argument(
        "--attest-key",
        metavar="FILE",
        help="with --sign: an ed25519 private key (PEM) that signs the SBOM and provenance as "
        "DSSE envelopes of in-toto statements whose subject is the pushed manifest digest "
        "(`trainimg attestations IMAGE --key PUB.pem` verifies them)",
    )
    add_engine_options(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def _push(
    engine: RegistryTransfer,
    ref: str,
    creds: Credentials | None,
    tries: int,
    tls: bool,
    progress: Progress,
) -> None:
    """Push with retries; each blob's line as the engine streams it (`Copying blob sha256:...`,
    Docker's `62fd67d4067a: Pushed`), and a heartbeat while a large one copies
    (builder/progress.py)."""
    for attempt in range(1, tries + 1):
        try:
            with progress.step(
                f"push {ref}" + (f" (try {attempt})" if attempt > 1 else "")
            ) as step:
                engine.push(ref, creds, tls_verify=tls, on_line=step.line)
            return
        except EngineError as exc:
            if attempt == tries:
                raise PushFailed(f"push {ref} failed after {tries} tries: {exc}") from None
            print(f"push {ref}: try {attempt} failed ({exc}); retrying", file=sys.stderr)
            time.sleep(min(2**attempt, 10))


def run(args: argparse.Namespace) -> int:
    ws = workspace(args, strict=False)
    if args.registry is None:
        raise TrainimgError(
            "push needs a registry: --registry HOST[:PORT]/REPO, $TRAINIMG_REGISTRY or "
            "`registry` in the config file (`trainimg config show`)"
        )
    named = said("--registry", args.registry)
    target = reference.parse_reference(args.registry, what=named)
    if target.tag or target.digest:
        raise TrainimgError(f"{named}: give HOST[:PORT]/REPO, without a tag")
    if args.sign and not args.sign_by:
        raise TrainimgError("--sign needs --sign-by KEY (the GPG key podman signs with)")
    if args.sign_by and not args.sign:
        raise TrainimgError("--sign-by is used only with --sign")
    if args.attest_key and not args.sign:
        raise TrainimgError("--attest-key is used only with --sign")
    attest_key = dsse.load_private_key(Path(args.attest_key)) if args.attest_key else None
    staging = signing.check_staging(target) if args.sign else None
    lock_path = lock_file(args, ws)
    records = lockfile.read(lock_path)
    names = sorted(records) if args.all else args.cells or [ws.matrix.project.default_cell]
    names = [n for name in names for n in _expanded(ws, name)]
    for name in names:
        if records.get(name) is None or records[name].parent is None:
            ws.cell(name)  # unknown cell (and not an extension the lock records): exit 2
        if name not in records:
            raise TrainimgError(f"cell {name}: no record in {lock_path}: `trainimg build` it first")
    creds = auth.lookup(target.registry, os.environ)
    tls = not reference.is_insecure(target.registry)
    progress = Progress(quiet=args.quiet)
    client = RegistryClient(target.registry, creds)
    try:
        client.ping()
        with engine_session(args.engine, args.url) as engine:
            if args.sign and engine.name != "podman":
                raise TrainimgError(
                    f"--sign signs with podman's simple signing; this engine is {engine.name} "
                    f"at {engine.base_url}: push through podman (--engine podman)"
                )
            for name in names:
                rec = records[name]
                if not engine.image_exists(rec.image_id):
                    raise TrainimgError(
                        f"cell {name}: image {rec.image_id} of {lock_path} is not in the "
                        f"{engine.name} store: build it again"
                    )
                refs = [f"{target.name}:{name}", f"{target.name}:{rec.build_hash}"]
                pushed = {}
                for ref in refs:
                    engine.tag(rec.image_id, ref)
                    if staging is not None:
                        with progress.step(f"signed push {ref}"):
                            _push_signed(rec.image_id, ref, args.sign_by, creds, tls, staging)
                    else:
                        _push(engine, ref, creds, max(1, args.retries), tls, progress)
                    pushed[ref] = client.manifest_digest(reference.parse_reference(ref))
                if args.sign:
                    _attach(ws, engine, client, target, name, rec, refs[0], attest_key)
                _record(lock_path, name, rec.image_id, pushed)
                for ref, digest in pushed.items():
                    print(f"{ref} {digest}")
    finally:
        client.close()
    return 0


def _push_signed(
    image_id: str, ref: str, sign_by: str, creds: Credentials | None, tls: bool, staging: Path
) -> None:
    podman = podman_cli(isolated_store())
    repo = reference.parse_reference(ref)
    before = signing.read_signatures(staging, repo)
    with tempfile.TemporaryDirectory(prefix="trainimg-push-") as tmp:
        try:
            digest = signing.push_signed(
                podman, image_id, ref, sign_by, creds, tls_verify=tls, digest_file=Path(tmp) / "d"
            )
        except EngineError as exc:
            raise PushFailed(f"signed push of {ref} failed: {exc}") from None
    where = signing.signature_dir(staging, repo, digest)
    if not where.is_dir():
        raise PushFailed(f"signed push of {ref}: podman wrote no signature to {where}")
    count = signing.keep_signatures(where, before.get(where.name, []))
    print(
        f"{ref}: signed by {sign_by} ({count} signatures of {digest} in {where})", file=sys.stderr
    )


def _attach(
    ws: Workspace,
    engine: InspectAndRun,
    client: RegistryClient,
    target: reference.Reference,
    name: str,
    rec: lockfile.BuildRecord,
    ref: str,
    key: Ed25519PrivateKey | None = None,
) -> None:
    """The SBOM and the provenance of the pushed image, beside it in the registry; signed
    in-toto statements about the pushed manifest digest where `key` is given."""
    docs = documents.gather_documents(ws, engine, name, rec)
    body, media_type = client.get_manifest(reference.parse_reference(ref))
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if key is not None:
        tags = signed.attach_signed(
            client, target.repository, target.name, digest, body, media_type,
            docs.sbom, docs.provenance, key,
        )  # fmt: skip
        for tag, kind in tags:
            print(f"{target.name}:{tag} (signed {kind} of {ref})", file=sys.stderr)
        return
    for text, kind in ((docs.sbom, attach.CYCLONEDX), (docs.provenance, attach.IN_TOTO)):
        tag = attach.attach(client, target.repository, digest, body, media_type, text, kind)
        print(f"{target.name}:{tag} ({kind} of {ref})", file=sys.stderr)


def _record(lock_path: Path, cell: str, image_id: str, pushed: dict[str, str]) -> None:
    def change(records: dict[str, lockfile.BuildRecord]) -> None:
        rec = records.get(cell)
        if rec is None or rec.image_id != image_id:
            raise TrainimgError(
                f"cell {cell}: {lock_path} changed while pushing (rebuilt?): nothing recorded"
            )
        rec.pushed.update(pushed)

    lockfile.modify(lock_path, change)


def _expanded(ws: Workspace, name: str) -> list[str]:
    """A glob (`'rocky9-*'`) as the cells it matches; any other name as itself."""
    return [c.name for c in ws.select([name])] if is_glob(name) else [name]

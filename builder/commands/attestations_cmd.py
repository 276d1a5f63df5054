"""`trainimg attestations IMAGE --key PUB.pem`: verify the signed SBOM and provenance that
`trainimg push --sign --attest-key` put beside IMAGE: each DSSE envelope's signature by the key,
its in-toto subject against IMAGE's manifest digest as the registry serves it, its predicate
type. Exit codes: 0 verified, 1 a check failed, 2 bad input (name, key, unreachable registry)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from builder.errors import TrainimgError
from builder.registry import auth, dsse, reference, signed
from builder.registry.client import RegistryClient


def register(sub: Any) -> None:
    p = sub.add_parser(
        "attestations",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("image", metavar="IMAGE", help="HOST[:PORT]/REPO:TAG or HOST[:PORT]/REPO@DIGEST")
    p.add_argument("--key", required=True, metavar="PUB.pem", help="the ed25519 public key (PEM)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ref = reference.parse_reference(args.image, what="IMAGE")
    if not (ref.tag or ref.digest):
        raise TrainimgError(f"IMAGE {args.image}: give a tag or a digest")
    public = dsse.load_public_key(Path(args.key))
    client = RegistryClient(ref.registry, auth.lookup(ref.registry, os.environ))
    try:
        digest = client.manifest_digest(ref)
        try:
            checked = signed.verify_attached(client, ref.repository, digest, public)
        except dsse.VerificationFailed as exc:
            raise dsse.VerificationFailed(f"{ref.name}@{digest}: {exc}") from None
    finally:
        client.close()
    for predicate_type in checked:
        print(f"{ref.name}@{digest} {predicate_type} verified")
    return 0

"""`trainimg policy --registry HOST[:PORT]/REPO --key PUBLIC-KEY --signatures DIR|URL`: write
the policy.json and registries.d entry under which `podman pull` accepts images of REPO only
when signed by KEY (builder/registry/policy.py). Exit codes: 0 written, 2 bad input."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from builder.atomic_file import atomic_write
from builder.commands.common import output_dir
from builder.errors import TrainimgError
from builder.registry import policy, reference


def _default_dest() -> str:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return str(Path(config) / "containers")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "policy",
        description=(
            "Write DEST/policy.json requiring a GPG simple signature by KEY for every image of "
            "REPO, made for the very reference pulled (matchRepoDigestOrExact: REPO:TAG needs a "
            "signature for that tag, so a signed image re-tagged is refused; other images: the "
            "stock policy, or refused with --reject-others), and "
            "DEST/registries.d/trainimg-<registry>.yaml naming where signatures are read "
            "(--signatures) and written by `trainimg push --sign` (--staging, default the "
            "same). DEST defaults to podman's per-user directory, ~/.config/containers; "
            "/etc/containers makes it host-wide. An existing policy.json is replaced only "
            "with --force."
        ),
    )
    p.add_argument("--registry", required=True, metavar="HOST[:PORT]/REPO")
    p.add_argument("--key", required=True, metavar="PUBLIC-KEY", help="armored GPG public key")
    p.add_argument("--signatures", required=True, metavar="DIR|URL", help="lookaside storage")
    p.add_argument(
        "--staging",
        metavar="DIR|URL",
        help="where signing writes: a directory (or file:// URL) podman can write (default: "
        "--signatures; an http(s) --signatures needs one)",
    )
    p.add_argument(
        "--dest",
        default=None,
        help="(default: $XDG_CONFIG_HOME/containers, or ~/.config/containers without it)",
    )
    p.add_argument("--reject-others", action="store_true", help="refuse every other image")
    p.add_argument("--force", action="store_true", help="replace an existing policy.json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    repo = reference.parse_reference(args.registry, what="--registry")
    if repo.tag or repo.digest:
        raise TrainimgError(f"--registry {args.registry}: give HOST[:PORT]/REPO, without a tag")
    key = Path(args.key).resolve()
    if not key.is_file() or b"PGP PUBLIC KEY" not in key.read_bytes()[:200]:
        raise TrainimgError(
            f"--key {args.key}: not an armored GPG public key (`gpg --armor --export KEY-ID`)"
        )
    dest = output_dir(Path(args.dest or _default_dest()), "--dest")
    target = dest / "policy.json"
    if target.exists() and not args.force:
        raise TrainimgError(
            f"{target} exists: trainimg replaces it only with --force (merge by hand to keep "
            "its other rules)"
        )
    lookaside = policy.lookaside_url(args.signatures)
    staging = policy.lookaside_url(args.staging) if args.staging else None
    yaml_path = dest / "registries.d" / f"trainimg-{repo.registry.replace(':', '-')}.yaml"
    yaml_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(yaml_path, policy.registries_d(repo, lookaside, staging))
    atomic_write(target, policy.policy_json(repo, key, reject_others=args.reject_others))
    print(f"{target}: images of {repo.name} must be signed by {key}", file=sys.stderr)
    print(f"{yaml_path}: their signatures are at {lookaside}", file=sys.stderr)
    return 0

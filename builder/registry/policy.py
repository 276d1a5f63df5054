"""The signature policy under which podman (containers/image) accepts only signed images of a
repository: policy.json (containers-policy.json(5)) and a registries.d entry
(containers-registries.d(5)) saying where the signatures are (pure: text in, text out).

GPG "simple signing", podman's own (`podman push --sign-by`): a signature is a detached GPG
signature of the manifest digest and the reference, kept in "lookaside" storage beside the
registry, read from `lookaside` (podman 4.3 spells it `sigstore`) and written to its
`-staging` location. The policy requires a signature by the given public key whose identity
is the reference pulled (`matchRepoDigestOrExact`, containers-policy.json(5)): `REPO:TAG`
needs a signature made for exactly that tag, a pull by digest one for the repository. So an
image signed under another tag, its manifest put under the cell tag, is refused; so is
anything unsigned, or whose manifest changed after signing (its digest no longer matches a
signature). One manifest pushed as the cell tag and the build-hash tag carries a signature for
each (builder/registry/signing.py keeps both). Other images keep the stock policy unless
`reject_others`.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from builder.matrix.yamlnodes import safe_load
from builder.registry.reference import Reference


def policy_json(repo: Reference, public_key: Path, *, reject_others: bool = False) -> str:
    default = [{"type": "reject"}] if reject_others else [{"type": "insecureAcceptAnything"}]
    doc = {
        "default": default,
        "transports": {
            "docker": {
                repo.name: [
                    {
                        "type": "signedBy",
                        "keyType": "GPGKeys",
                        "keyPath": str(public_key),
                        # the signature must name the tag pulled (or, pulled by digest, the
                        # repository): a signed manifest re-tagged is refused
                        "signedIdentity": {"type": "matchRepoDigestOrExact"},
                    }
                ]
            },
            # images already in the local store are not checked again
            "docker-daemon": {"": [{"type": "insecureAcceptAnything"}]},
            "containers-storage": {"": [{"type": "insecureAcceptAnything"}]},
        },
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def registries_d(repo: Reference, lookaside: str, staging: str | None = None) -> str:
    """A registries.d file: where signatures of `repo` are read (and written, when signing)."""
    entry = {"sigstore": lookaside, "sigstore-staging": staging or lookaside}
    return yaml.safe_dump({"docker": {repo.name: entry}}, sort_keys=True)


def lookaside_url(where: str) -> str:
    """A directory becomes a file:// URL; an http(s):// or file:// URL stays as it is."""
    if where.startswith(("http://", "https://", "file://")):
        return where
    return Path(where).resolve().as_uri()


def staging_for(repo: Reference, directories: list[Path]) -> str | None:
    """The signature staging location registries.d gives `repo` (the most specific entry of the
    first directory that has one), or None when none is configured."""
    for d in directories:
        if not d.is_dir():
            continue
        best: tuple[int, str] | None = None
        for f in sorted(d.glob("*.yaml")):
            data = safe_load(f.read_text(encoding="utf-8")) or {}
            for scope, entry in (data.get("docker") or {}).items():
                if not isinstance(entry, dict):
                    continue
                url = (
                    entry.get("sigstore-staging")
                    or entry.get("sigstore")
                    or entry.get("lookaside-staging")
                    or entry.get("lookaside")
                )
                covers = repo.name == scope or repo.name.startswith(f"{scope}/")
                if url and covers and (best is None or len(scope) > best[0]):
                    best = (len(scope), str(url))
        if best is not None:
            return best[1]
    return None

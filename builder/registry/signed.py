"""The SBOM and the provenance beside a pushed image as signed attestations: each an in-toto
Statement v1 whose subject is the registry's manifest digest of what was pushed (never the
engine's local digest), wrapped in a DSSE envelope (dsse.py), pushed as attach.py lays out."""

from __future__ import annotations

import json
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from builder.registry import attach, dsse
from builder.registry.client import RegistryClient, RegistryError

PREDICATES = {attach.CYCLONEDX: dsse.CYCLONEDX_PREDICATE, attach.IN_TOTO: dsse.SLSA_PREDICATE}


def _provenance_predicate(text: str) -> Any:
    """The provenance document is a whole statement already: its predicate, re-subjected."""
    return json.loads(text)["predicate"]


def attach_signed(
    client: RegistryClient,
    repository: str,
    image: str,
    subject_digest: str,
    subject_body: bytes,
    subject_type: str,
    sbom: str,
    provenance: str,
    key: Ed25519PrivateKey,
) -> list[tuple[str, str]]:
    """Push both envelopes; (tag, artifact type) of each."""
    predicates = {
        attach.CYCLONEDX: json.loads(sbom),
        attach.IN_TOTO: _provenance_predicate(provenance),
    }
    tags = []
    for kind, predicate in predicates.items():
        payload = dsse.subject_statement(image, subject_digest, PREDICATES[kind], predicate)
        envelope = dsse.sign(payload, key)
        tag = attach.attach(
            client, repository, subject_digest, subject_body, subject_type, envelope, kind,
            layer_type=dsse.ENVELOPE_TYPE,
        )  # fmt: skip
        tags.append((tag, kind))
    return tags


def verify_attached(
    client: RegistryClient, repository: str, subject_digest: str, public: Ed25519PublicKey
) -> list[str]:
    """Both envelopes checked (signature, subject digest, predicate type): their predicate
    types; VerificationFailed at the first that does not hold."""
    checked = []
    for kind, predicate_type in PREDICATES.items():
        try:
            envelope = attach.fetch_attached(client, repository, subject_digest, kind)
        except RegistryError as exc:
            raise dsse.VerificationFailed(f"no {kind} attestation: {exc}") from None
        try:
            text = envelope.decode("utf-8")
        except UnicodeDecodeError:
            raise dsse.VerificationFailed(f"{kind} attestation is not UTF-8 JSON") from None
        try:
            dsse.verify_envelope(text, public, subject_digest, predicate_type)
        except dsse.VerificationFailed as exc:
            raise dsse.VerificationFailed(
                f"{kind} attestation of {subject_digest}: {exc}"
            ) from None
        checked.append(predicate_type)
    return checked

"""DSSE envelopes (https://github.com/secure-systems-lab/dsse/blob/master/protocol.md) around
in-toto statements, signed with an ed25519 key the project manages as a PEM file.

ed25519 rather than the GPG key podman's simple signing uses: DSSE verifiers (securesystemslib,
in-toto, cosign with `--key`) take a PEM public key, and `cryptography` signs with it without a
keyring. The signature is over PAE(payloadType, payload), never over the payload alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from builder.errors import TrainimgError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_TYPE = "application/vnd.dsse.envelope.v1+json"
IN_TOTO_STATEMENT = "https://in-toto.io/Statement/v1"
CYCLONEDX_PREDICATE = "https://cyclonedx.org/bom"
SLSA_PREDICATE = "https://slsa.dev/provenance/v1"  # builder/sbom/provenance.py PREDICATE_TYPE


class VerificationFailed(TrainimgError):
    """An envelope whose signature, subject or predicate does not hold (exit 1)."""

    exit_code = 1


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSEv1 pre-authentication encoding: what is signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def keyid(public: Ed25519PublicKey) -> str:
    """sha256 of the raw public key: names the key in the envelope (a hint, never trusted)."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise TrainimgError(f"{path}: not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise TrainimgError(f"{path}: an ed25519 key is needed, this is {type(key).__name__}")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TrainimgError(f"{path}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise TrainimgError(f"{path}: an ed25519 public key is needed, not {type(key).__name__}")
    return key


def subject_statement(
    subject_name: str, manifest_digest: str, predicate_type: str, predicate: Any
) -> str:
    """An in-toto Statement v1 naming the image by its registry manifest digest."""
    algo, _, hexd = manifest_digest.partition(":")
    if algo != "sha256" or len(hexd) != 64:
        raise TrainimgError(f"subject digest {manifest_digest!r}: expected sha256:<64 hex>")
    doc = {
        "_type": IN_TOTO_STATEMENT,
        "subject": [{"name": subject_name, "digest": {"sha256": hexd}}],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def sign(payload: str, key: Ed25519PrivateKey) -> str:
    """The DSSE envelope (JSON) of an in-toto statement."""
    body = payload.encode("utf-8")
    sig = key.sign(pae(PAYLOAD_TYPE, body))
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": keyid(key.public_key()), "sig": base64.b64encode(sig).decode()}],
    }
    return json.dumps(envelope, sort_keys=True) + "\n"


def verify_envelope(
    envelope: str, public: Ed25519PublicKey, manifest_digest: str, predicate_type: str
) -> dict[str, Any]:
    """The statement inside `envelope` once its signature, subject digest and predicate type
    hold; VerificationFailed naming the first that does not."""
    try:
        env = json.loads(envelope)
        kind = env["payloadType"]
        body = base64.b64decode(env["payload"], validate=True)
        sigs = [base64.b64decode(s["sig"], validate=True) for s in env["signatures"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise VerificationFailed(f"not a DSSE envelope ({exc!r})") from None
    if kind != PAYLOAD_TYPE:
        raise VerificationFailed(f"payloadType {kind!r}, expected {PAYLOAD_TYPE}")
    for sig in sigs:
        try:
            public.verify(sig, pae(kind, body))
            break
        except InvalidSignature:
            continue
    else:
        raise VerificationFailed(f"no signature by key {keyid(public)[:16]} verifies the payload")
    try:
        doc: dict[str, Any] = json.loads(body)
        subjects = doc["subject"]
        hexes = {s["digest"].get("sha256") for s in subjects}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise VerificationFailed(f"payload is not an in-toto statement ({exc!r})") from None
    if doc.get("_type") != IN_TOTO_STATEMENT:
        raise VerificationFailed(f"_type {doc.get('_type')!r}, expected {IN_TOTO_STATEMENT}")
    if manifest_digest.removeprefix("sha256:") not in hexes:
        raise VerificationFailed(
            f"subject digests {sorted(h for h in hexes if h)} do not name {manifest_digest}"
        )
    if doc.get("predicateType") != predicate_type:
        raise VerificationFailed(
            f"predicateType {doc.get('predicateType')!r}, expected {predicate_type}"
        )
    return doc

"""DSSE envelopes as trainimg signs them, checked by trainimg and by securesystemslib (an
independent DSSE implementation), and refused when tampered with or aimed at another image."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer._crypto_signer import CryptoSigner  # not re-exported for mypy
from securesystemslib.signer._key import SSlibKey  # not re-exported for mypy

from builder.errors import TrainimgError
from builder.registry import dsse
from builder.sbom.provenance import PREDICATE_TYPE

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


@pytest.fixture(scope="module")
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture(scope="module")
def envelope(key: Ed25519PrivateKey) -> str:
    payload = dsse.subject_statement("localhost/trainimg/cpu", DIGEST, PREDICATE_TYPE, {"x": 1})
    return dsse.sign(payload, key)


def _sslib_key(key: Ed25519PrivateKey) -> SSlibKey:
    # through PEM, as a verifier given the published public key file would load it
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    public = serialization.load_pem_public_key(pem)
    return SSlibKey.from_crypto(public, keyid=dsse.keyid(key.public_key()), scheme="ed25519")


def test_pae_matches_the_spec_example() -> None:
    # protocol.md's test vector: PAE("http://example.com/HelloWorld", "hello world")
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_trainimg_verifies_and_returns_the_statement(key: Ed25519PrivateKey, envelope: str) -> None:
    doc = dsse.verify_envelope(envelope, key.public_key(), DIGEST, PREDICATE_TYPE)
    assert doc["subject"][0]["digest"] == {"sha256": "ab" * 32}
    assert doc["_type"] == dsse.IN_TOTO_STATEMENT


def test_securesystemslib_accepts_the_envelope(key: Ed25519PrivateKey, envelope: str) -> None:
    env = Envelope.from_dict(json.loads(envelope))
    pub = _sslib_key(key)
    verified = env.verify([pub], 1)
    assert pub.keyid in verified
    assert json.loads(env.pae().split(b" ", 4)[4])["predicateType"] == PREDICATE_TYPE
    assert env.pae() == dsse.pae(
        dsse.PAYLOAD_TYPE, base64.b64decode(json.loads(envelope)["payload"])
    )


def test_trainimg_accepts_what_securesystemslib_signs(key: Ed25519PrivateKey) -> None:
    payload = dsse.subject_statement(
        "img", DIGEST, dsse.CYCLONEDX_PREDICATE, {"bomFormat": "CycloneDX"}
    )
    env = Envelope(payload.encode(), dsse.PAYLOAD_TYPE, {})
    env.sign(CryptoSigner(key, _sslib_key(key)))
    doc = dsse.verify_envelope(
        json.dumps(env.to_dict()), key.public_key(), DIGEST, dsse.CYCLONEDX_PREDICATE
    )
    assert doc["predicate"] == {"bomFormat": "CycloneDX"}


def _tampered(envelope: str) -> str:
    env = json.loads(envelope)
    doc = json.loads(base64.b64decode(env["payload"]))
    doc["predicate"]["x"] = 2
    env["payload"] = base64.b64encode(json.dumps(doc).encode()).decode()
    return json.dumps(env)


def test_a_tampered_payload_is_refused_by_both(key: Ed25519PrivateKey, envelope: str) -> None:
    bad = _tampered(envelope)
    with pytest.raises(dsse.VerificationFailed, match="no signature"):
        dsse.verify_envelope(bad, key.public_key(), DIGEST, PREDICATE_TYPE)
    with pytest.raises(VerificationError):
        Envelope.from_dict(json.loads(bad)).verify([_sslib_key(key)], 1)


def test_another_key_is_refused(envelope: str) -> None:
    stranger = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(dsse.VerificationFailed, match="no signature by key"):
        dsse.verify_envelope(envelope, stranger, DIGEST, PREDICATE_TYPE)


def test_a_wrong_subject_digest_is_refused(key: Ed25519PrivateKey, envelope: str) -> None:
    with pytest.raises(dsse.VerificationFailed, match=f"do not name {OTHER}"):
        dsse.verify_envelope(envelope, key.public_key(), OTHER, PREDICATE_TYPE)


def test_a_wrong_predicate_type_is_refused(key: Ed25519PrivateKey, envelope: str) -> None:
    with pytest.raises(dsse.VerificationFailed, match="predicateType"):
        dsse.verify_envelope(envelope, key.public_key(), DIGEST, dsse.CYCLONEDX_PREDICATE)


def test_a_non_envelope_and_a_bad_digest_are_clear_errors(key: Ed25519PrivateKey) -> None:
    with pytest.raises(dsse.VerificationFailed, match="not a DSSE envelope"):
        dsse.verify_envelope("{}", key.public_key(), DIGEST, PREDICATE_TYPE)
    with pytest.raises(TrainimgError, match="expected sha256:<64 hex>"):
        dsse.subject_statement("img", "sha256:abc", PREDICATE_TYPE, {})


def test_the_slsa_predicate_type_is_the_provenance_documents() -> None:
    assert dsse.SLSA_PREDICATE == PREDICATE_TYPE

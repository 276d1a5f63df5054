"""Signed attestations in a real registry (docker-registry): what push --sign --attest-key
attaches (signed.attach_signed on a pushed manifest, no image build) is verified by
`trainimg attestations`, and refused for another key or another image's digest."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from builder.cli import main
from builder.registry import attach, dsse, signed
from builder.registry.client import RegistryClient
from builder.registry.reference import Reference
from builder.sbom.provenance import PREDICATE_TYPE
from tests.registry.server import Registry

REPOSITORY = "trainimg/attested"
MEDIA = "application/vnd.oci.image.manifest.v1+json"


def _push(client: RegistryClient, tag: str, label: str) -> tuple[str, bytes]:
    image = {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
             "config": {"Labels": {"test": label}}}  # fmt: skip
    config = json.dumps(image).encode()
    blob = client.put_blob(REPOSITORY, config)
    manifest = {"schemaVersion": 2, "mediaType": MEDIA, "layers": [],
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "size": len(config), "digest": blob}}  # fmt: skip
    body = json.dumps(manifest).encode()
    return client.put_manifest(REPOSITORY, tag, body, MEDIA), body


def _pem(path: Path, key: Ed25519PrivateKey) -> Path:
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path


def test_attached_attestations_verify_and_refuse(
    registries: Callable[..., Registry], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = registries()
    key = Ed25519PrivateKey.generate()
    provenance = json.dumps({"predicateType": PREDICATE_TYPE, "predicate": {"p": 1}})
    client = RegistryClient(reg.host)
    try:
        digest, body = _push(client, "cpu", "a")
        other, _ = _push(client, "gpu", "b")
        tags = signed.attach_signed(
            client, REPOSITORY, f"{reg.host}/{REPOSITORY}", digest, body, MEDIA,
            '{"bomFormat": "CycloneDX"}', provenance, key,
        )  # fmt: skip
        sbom_manifest, _ = client.get_manifest(Reference(reg.host, REPOSITORY, tags[0][0]))
        layer = json.loads(sbom_manifest)["layers"][0]
    finally:
        client.close()
    stem = digest.replace(":", "-")
    assert [t for t, _ in tags] == [f"{stem}.sbom", f"{stem}.att"]
    assert layer["mediaType"] == dsse.ENVELOPE_TYPE
    good = _pem(tmp_path / "pub.pem", key)
    assert main(["attestations", f"{reg.host}/{REPOSITORY}:cpu", "--key", str(good)]) == 0
    out = capsys.readouterr().out
    assert f"@{digest} {dsse.CYCLONEDX_PREDICATE} verified" in out
    assert f"@{digest} {PREDICATE_TYPE} verified" in out

    stranger = _pem(tmp_path / "other.pem", Ed25519PrivateKey.generate())
    assert main(["attestations", f"{reg.host}/{REPOSITORY}:cpu", "--key", str(stranger)]) == 1
    assert "no signature by key" in capsys.readouterr().err
    # the gpu image has no attestations of its own: cpu's do not vouch for it
    assert main(["attestations", f"{reg.host}/{REPOSITORY}@{other}", "--key", str(good)]) == 1
    assert f"no {attach.CYCLONEDX} attestation" in capsys.readouterr().err
    assert main(["attestations", f"{reg.host}/{REPOSITORY}:cpu", "--key", str(tmp_path)]) == 2
    assert "not a PEM public key" in capsys.readouterr().err

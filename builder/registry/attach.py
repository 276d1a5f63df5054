"""SBOM and provenance beside an image in its registry, as OCI artifacts (image-spec 1.1): a
manifest whose one layer is the document, with `artifactType` and a `subject` naming the
image's manifest, tagged by the tag scheme registries without the referrers API understand
(sigstore/cosign's `sha256-<hex>.sbom` and `sha256-<hex>.att`)."""

from __future__ import annotations

import hashlib
import json

from builder.registry.client import RegistryClient, RegistryError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
CYCLONEDX = "application/vnd.cyclonedx+json"
IN_TOTO = "application/vnd.in-toto+json"
SUFFIX = {CYCLONEDX: "sbom", IN_TOTO: "att"}


def attach(
    client: RegistryClient,
    repository: str,
    subject_digest: str,
    subject_body: bytes,
    subject_type: str,
    document: str,
    media_type: str,
) -> str:
    """Push `document` as an artifact referring to the image; its tag."""
    blob = document.encode("utf-8")
    layer = client.put_blob(repository, blob)
    config = client.put_blob(repository, b"{}")
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": media_type,
        "config": {"mediaType": EMPTY, "digest": config, "size": 2},
        "layers": [{"mediaType": media_type, "digest": layer, "size": len(blob)}],
        "subject": {"mediaType": subject_type, "digest": subject_digest, "size": len(subject_body)},
    }
    if hashlib.sha256(subject_body).hexdigest() != subject_digest.removeprefix("sha256:"):
        raise RegistryError(f"registry {client.registry}: {subject_digest} changed while attaching")
    tag = f"{subject_digest.replace(':', '-')}.{SUFFIX[media_type]}"
    body = json.dumps(manifest, sort_keys=True).encode()
    client.put_manifest(repository, tag, body, OCI_MANIFEST)
    return tag

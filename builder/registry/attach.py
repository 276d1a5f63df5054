"""SBOM and provenance beside an image in its registry, as OCI artifacts (image-spec 1.1): a
manifest whose one layer is the document, with `artifactType` and a `subject` naming the
image's manifest, tagged by the tag scheme registries without the referrers API understand
(sigstore/cosign's `sha256-<hex>.sbom` and `sha256-<hex>.att`). With an attestation key
(signed.py) each layer is a DSSE envelope (`application/vnd.dsse.envelope.v1+json`, as cosign's
attestation layers are) around an in-toto statement whose subject is that manifest digest."""

from __future__ import annotations

import hashlib
import json

from builder.registry.client import RegistryClient, RegistryError
from builder.registry.reference import Reference

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
    layer_type: str | None = None,
) -> str:
    """Push `document` as an artifact referring to the image; its tag. `layer_type`: the
    layer's media type where it differs from the artifact's (a DSSE envelope around it)."""
    blob = document.encode("utf-8")
    layer = client.put_blob(repository, blob)
    config = client.put_blob(repository, b"{}")
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": media_type,
        "config": {"mediaType": EMPTY, "digest": config, "size": 2},
        "layers": [{"mediaType": layer_type or media_type, "digest": layer, "size": len(blob)}],
        "subject": {"mediaType": subject_type, "digest": subject_digest, "size": len(subject_body)},
    }
    if hashlib.sha256(subject_body).hexdigest() != subject_digest.removeprefix("sha256:"):
        raise RegistryError(f"registry {client.registry}: {subject_digest} changed while attaching")
    tag = f"{subject_digest.replace(':', '-')}.{SUFFIX[media_type]}"
    body = json.dumps(manifest, sort_keys=True).encode()
    client.put_manifest(repository, tag, body, OCI_MANIFEST)
    return tag


def fetch_attached(
    client: RegistryClient, repository: str, subject_digest: str, media_type: str
) -> bytes:
    """The one layer of the artifact `attach` pushed for `subject_digest`."""
    tag = f"{subject_digest.replace(':', '-')}.{SUFFIX[media_type]}"
    body, _ = client.get_manifest(Reference(client.registry, repository, tag, None))
    try:
        manifest = json.loads(body)
        (layer,) = manifest["layers"]
        digest = layer["digest"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RegistryError(f"registry {client.registry}: {repository}:{tag}: {exc!r}") from None
    if manifest.get("subject", {}).get("digest") != subject_digest:
        raise RegistryError(f"{repository}:{tag} does not refer to {subject_digest}")
    return client.get_blob(repository, digest)

"""A CycloneDX 1.6 SBOM of an image from its lock record and its inventory (pure; written with
cyclonedx-python-lib and checked with its JSON-schema validator).

- every wheel the lock records as `pkg:pypi/<name>@<version>` with the sha256 the wheelhouse
  lock pinned (a distribution in the image that no wheel brought, e.g. ensurepip's pip, is
  listed with the property trainimg:origin and no hash);
- every OS package as `pkg:deb/<os id>/<name>@<version>?arch=..&distro=<id>-<version>` or
  `pkg:rpm/<os id>/<name>@<version>-<release>?arch=..&distro=..[&epoch=..]`, read inside the
  image (the distro qualifier from its /etc/os-release);
- the base image (and the parent of an extended image) as `pkg:oci` with its digest;
- every CUDA library with its SASS and PTX lists as properties.
The serial number and timestamp derive from the image id and build time, so the same image
always gets the same document.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL
from packaging.utils import canonicalize_name

from builder import __version__
from builder.errors import TrainimgError
from builder.lock import BuildRecord

PROPERTY = "trainimg"
SCHEMA = SchemaVersion.V1_6


class SbomError(TrainimgError):
    pass


def _sha256(hex_digest: str) -> HashType:
    return HashType(alg=HashAlgorithm.SHA_256, content=hex_digest.removeprefix("sha256:"))


def wheel_purl(pin: str) -> str:
    name, _, version = pin.partition("==")
    return str(PackageURL("pypi", None, canonicalize_name(name), version))


def _oci(ref: str, digest: str | None) -> Component:
    repo = ref.split("@", 1)[0]
    head, _, last = repo.rpartition("/")
    if ":" in last:  # a tag, not a registry port
        repo = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    name = repo.rsplit("/", 1)[-1]
    qualifiers = {"repository_url": repo} if "/" in repo else {}
    return Component(
        type=ComponentType.CONTAINER,
        name=repo,
        version=digest or "unpinned",
        purl=PackageURL("oci", None, name, digest, qualifiers) if digest else None,
        hashes=[_sha256(digest)] if digest else [],
        bom_ref=f"oci:{ref}",
        properties=[Property(name=f"{PROPERTY}:reference", value=ref)],
    )


def _os_packages(inventory: Mapping[str, Any]) -> list[Component]:
    osr = inventory.get("os_release") or {}
    vendor = str(osr.get("ID") or "unknown")
    distro = f"{vendor}-{osr.get('VERSION_ID', '')}"
    kind = inventory.get("package_type")
    out = []
    for pkg in inventory.get("packages") or ():
        qualifiers = {"arch": pkg["arch"], "distro": distro}
        if pkg.get("epoch"):
            qualifiers["epoch"] = pkg["epoch"]
        purl = PackageURL(str(kind), vendor, pkg["name"], pkg["version"], qualifiers)
        out.append(
            Component(
                type=ComponentType.LIBRARY if kind == "deb" else ComponentType.APPLICATION,
                name=pkg["name"],
                version=pkg["version"],
                purl=purl,
                bom_ref=str(purl),
            )
        )
    return out


def build_bom(image: str, record: BuildRecord, inventory: Mapping[str, Any], *, cell: str) -> Bom:
    bom = Bom()
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, f"trainimg:{record.image_id}")
    bom.metadata.timestamp = dt.datetime.fromisoformat(record.built_at.replace("Z", "+00:00"))
    root = Component(
        type=ComponentType.CONTAINER,
        name=image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image,
        version=cell,
        hashes=[_sha256(record.image_id)],
        bom_ref=f"image:{record.image_id}",
        properties=[
            Property(name=f"{PROPERTY}:image.id", value=record.image_id),
            Property(name=f"{PROPERTY}:content-hash", value=record.content_hash),
            Property(name=f"{PROPERTY}:engine", value=record.engine),
            Property(name=f"{PROPERTY}:built-at", value=record.built_at),
            *[
                Property(name=f"{PROPERTY}:label:{k}", value=v)
                for k, v in sorted(record.labels.items())
            ],
        ],
    )
    if record.digest:
        root.properties.add(Property(name=f"{PROPERTY}:manifest.digest", value=record.digest))
    bom.metadata.component = root
    bom.metadata.tools.components.add(
        Component(type=ComponentType.APPLICATION, name="trainimg", version=__version__)
    )
    components: list[Component] = [_oci(record.base_image, record.base_digest)]
    if record.parent:
        components.append(_oci(record.parent["image_id"], record.parent.get("digest") or None))
    locked = {canonicalize_name(pin.partition("==")[0]): pin for pin in record.wheels}
    for pin, sha in sorted(record.wheels.items()):
        name, _, version = pin.partition("==")
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=canonicalize_name(name),
                version=version,
                purl=PackageURL("pypi", None, canonicalize_name(name), version),
                hashes=[_sha256(sha)],
                bom_ref=wheel_purl(pin),
            )
        )
    for dist in inventory.get("python") or ():
        name = canonicalize_name(dist["name"])
        if name in locked:
            continue
        purl = PackageURL("pypi", None, name, dist["version"])
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=name,
                version=dist["version"],
                purl=purl,
                bom_ref=str(purl),
                properties=[
                    Property(name=f"{PROPERTY}:origin", value="not from the wheelhouse lock")
                ],
            )
        )
    components += _os_packages(inventory)
    for lib in inventory.get("cuda_libraries") or ():
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=lib["path"].rsplit("/", 1)[-1],
                bom_ref=f"file:{lib['path']}",
                properties=[
                    Property(name=f"{PROPERTY}:path", value=lib["path"]),
                    Property(name=f"{PROPERTY}:cuda.sass", value=" ".join(lib["sass"]) or "none"),
                    Property(name=f"{PROPERTY}:cuda.ptx", value=" ".join(lib["ptx"]) or "none"),
                ],
            )
        )
    seen: set[str] = set()
    for c in components:
        if str(c.bom_ref) in seen:
            continue
        seen.add(str(c.bom_ref))
        bom.components.add(c)
    bom.register_dependency(root, list(bom.components))
    return bom


def sbom_json(bom: Bom) -> str:
    """The document, validated against the CycloneDX schema (an invalid one is our bug)."""
    text: str = JsonV1Dot6(bom).output_as_string(indent=2)
    error = JsonStrictValidator(SCHEMA).validate_str(text)
    if error is not None:
        raise SbomError(
            f"the SBOM does not validate against CycloneDX {SCHEMA.to_version()}: {error}"
        )
    return text + "\n"

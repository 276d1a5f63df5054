"""A CycloneDX 1.6 SBOM of an image from its lock record and its inventory (pure; written with
cyclonedx-python-lib and checked with its JSON-schema validator).

- every wheel the lock records as `pkg:pypi/<name>@<version>` with the sha256 the wheelhouse
  lock pinned (a distribution in the image that no wheel brought, e.g. ensurepip's pip, is
  listed with the property trainimg:origin and no hash);
- every OS package as `pkg:deb/<os id>/<name>@<version>?arch=..&distro=<id>-<version>` or
  `pkg:rpm/<os id>/<name>@<version>-<release>?arch=..&distro=..[&epoch=..]`, read inside the
  image (the distro qualifier from its /etc/os-release), with `upstream=<source>[@<version>]`
  where the binary package's source package differs (libssl3 -> openssl: Debian's advisories
  and scanners' matches are keyed by source; syft writes the same qualifier);
- a supplier on every component (NTIA minimum elements): the distribution for OS packages, the
  wheel's own Maintainer/Author for Python packages, the registry for a base image, NVIDIA for
  the CUDA libraries of nvidia-* wheels and the CUDA toolkit;
- the base image (and the parent of an extended image) as `pkg:oci` with its digest;
- every CUDA library with its SASS and PTX lists as properties, versioned by the wheel whose
  directory holds it (torchao/... -> torchao's version) or the toolkit directory it lies in
  (cuda-12.8/...), else `unknown (...)` saying why;
- the first-party parts: the image as the metadata component (version: its cell; supplier: its
  vendor label; licence: its licenses label) and the bundled trainer payload (trainimg's code,
  version from its label);
- licences as each package states them (licenses.py), none where it states none;
- the SBOM's author (trainimg) and tool (trainimg and its version), and the image's dependency
  on every component (the NTIA minimum elements; tests/sbom/test_sbom_ntia.py runs sbomaudit);
- each Python distribution's dependencies on the others, as its Requires-Dist states them
  under the image's own Python (edges.py: torch -> filelock, jinja2, ..., nvidia-* where the
  marker holds).
The serial number and timestamp derive from the image id and build time, so the same image
always gets the same document.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from cyclonedx.model import HashAlgorithm, HashType, Property, XsUri
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.contact import OrganizationalContact, OrganizationalEntity
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL
from packaging.utils import canonicalize_name

from builder import __version__
from builder.build.lock import BuildRecord
from builder.errors import TrainimgError
from builder.sbom import licenses
from builder.sbom.edges import dependency_edges
from builder.spec import labels, layout

PROPERTY = "trainimg"
SCHEMA = SchemaVersion.V1_6


class SbomError(TrainimgError):
    pass


def _supplier(name: str, url: str | None = None) -> OrganizationalEntity:
    return OrganizationalEntity(name=name, urls=[XsUri(url)] if url else None)


UNKNOWN_SUPPLIER = "unknown (no Maintainer or Author in its metadata)"
NVIDIA = _supplier("NVIDIA Corporation", "https://www.nvidia.com/")
TRAINIMG = _supplier("trainimg")
UNKNOWN_VERSION = "unknown (no distribution in the inventory holds this file)"


def upstream(pkg: Mapping[str, str]) -> str | None:
    """The purl `upstream` qualifier of an OS package: its source package, with the source's
    version where that differs; None when the package is its own source."""
    source = pkg.get("source") or ""
    version = pkg.get("source_version") or pkg["version"]
    if not source or (source, version) == (pkg["name"], pkg["version"]):
        return None
    return source if version == pkg["version"] else f"{source}@{version}"


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
    host = repo.split("/", 1)[0] if "/" in repo else ""
    local = not host or host == "localhost" or ref.startswith("sha256:")
    return Component(
        type=ComponentType.CONTAINER,
        supplier=TRAINIMG if local else _supplier(host),
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
    supplier = _supplier(str(osr.get("NAME") or vendor), osr.get("HOME_URL"))
    out = []
    for pkg in inventory.get("packages") or ():
        qualifiers = {"arch": pkg["arch"], "distro": distro}
        if pkg.get("epoch"):
            qualifiers["epoch"] = pkg["epoch"]
        source = upstream(pkg)
        if source:
            qualifiers["upstream"] = source
        purl = PackageURL(str(kind), vendor, pkg["name"], pkg["version"], qualifiers)
        out.append(
            Component(
                type=ComponentType.LIBRARY if kind == "deb" else ComponentType.APPLICATION,
                supplier=supplier,
                name=pkg["name"],
                version=pkg["version"],
                licenses=licenses.of_os_package(pkg),
                purl=purl,
                bom_ref=str(purl),
            )
        )
    return out


def build_bom(image: str, record: BuildRecord, inventory: Mapping[str, Any], *, cell: str) -> Bom:
    bom = Bom()
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, f"trainimg:{record.image_id}")
    bom.metadata.timestamp = dt.datetime.fromisoformat(record.built_at.replace("Z", "+00:00"))
    root = _image(image, record, cell)
    bom.metadata.component = root
    bom.metadata.authors.add(OrganizationalContact(name="trainimg"))
    bom.metadata.tools.components.add(
        Component(
            type=ComponentType.APPLICATION, name="trainimg", version=__version__, supplier=TRAINIMG
        )
    )
    components: list[Component] = [_oci(record.base_image, record.base_digest)]
    trainer = _trainer(record)
    if trainer is not None:
        components.append(trainer)
    if record.parent:
        components.append(_oci(record.parent["image_id"], record.parent.get("digest") or None))
    python = _python_packages(record, inventory)
    components += python
    components += _os_packages(inventory)
    components += _cuda_libraries(inventory, record)
    seen: set[str] = set()
    for c in components:
        if str(c.bom_ref) in seen:
            continue
        seen.add(str(c.bom_ref))
        bom.components.add(c)
    bom.register_dependency(root, list(bom.components))
    by_name = {c.name: c for c in python}
    for name, needs in dependency_edges(inventory).items():
        if name in by_name:
            bom.register_dependency(by_name[name], [by_name[n] for n in needs if n in by_name])
    return bom


def _image(image: str, record: BuildRecord, cell: str) -> Component:
    """The image itself, the BOM's subject: its id, hashes, engine, build time and labels."""
    vendor = record.labels.get(labels.OCI_VENDOR)
    root = Component(
        type=ComponentType.CONTAINER,
        name=image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image,
        version=cell,
        supplier=_supplier(vendor) if vendor else TRAINIMG,
        licenses=licenses.from_text(record.labels.get(labels.OCI_LICENSES)),
        hashes=[_sha256(record.image_id)],
        bom_ref=f"image:{record.image_id}",
        properties=[
            Property(name=f"{PROPERTY}:image.id", value=record.image_id),
            Property(name=f"{PROPERTY}:build-hash", value=record.build_hash),
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
    return root


def _trainer(record: BuildRecord) -> Component | None:
    """The bundled trainer payload (trainimg's own code, copied to TRAINER_HOME, no wheel): its
    version from the image's label; an extension's record without that label names none."""
    version = record.labels.get(labels.TRAINER_VERSION_LABEL)
    if not version:
        return None
    return Component(
        type=ComponentType.APPLICATION,
        supplier=TRAINIMG,
        name="trainimg-trainer",
        version=version,
        licenses=licenses.from_text(record.labels.get(labels.OCI_LICENSES)),
        bom_ref=f"trainimg:trainer@{version}",
        properties=[
            Property(
                name=f"{PROPERTY}:path", value=f"{layout.TRAINER_HOME}/{layout.TRAINER_MODULE}"
            )
        ],
    )


def _python_packages(record: BuildRecord, inventory: Mapping[str, Any]) -> list[Component]:
    """Every locked wheel with its pinned sha256, then each installed distribution the lock
    does not name (marked as not from the wheelhouse lock)."""
    components: list[Component] = []
    locked = {canonicalize_name(pin.partition("==")[0]): pin for pin in record.wheels}
    dists = {canonicalize_name(d["name"]): d for d in inventory.get("python") or ()}
    authors = {name: d.get("author") or "" for name, d in dists.items()}

    def supplier(name: str) -> OrganizationalEntity:
        return _supplier(authors.get(canonicalize_name(name)) or UNKNOWN_SUPPLIER)

    for pin, sha in sorted(record.wheels.items()):
        name, _, version = pin.partition("==")
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                supplier=supplier(name),
                name=canonicalize_name(name),
                version=version,
                licenses=licenses.of_wheel(dists.get(canonicalize_name(name))),
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
                supplier=supplier(name),
                name=name,
                version=dist["version"],
                licenses=licenses.of_wheel(dist),
                purl=purl,
                bom_ref=str(purl),
                properties=[
                    Property(name=f"{PROPERTY}:origin", value="not from the wheelhouse lock")
                ],
            )
        )
    return components


def _owner(path: str, inventory: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The distribution that installed the library: the one whose RECORD lists it (inventories
    read since issue 34), else the one named like the site-packages directory holding it
    (torchao/_C.so -> torchao); None for a file no one distribution owns (nvidia/<lib>/ is a
    namespace directory, named for no wheel)."""
    dists = inventory.get("python") or ()
    for d in dists:
        if path in (d.get("libraries") or ()):
            return dict(d)
    top = path.split("/site-packages/", 1)[-1].split("/", 1)[0] if "/site-packages/" in path else ""
    for d in dists:
        if top and top != "nvidia" and canonicalize_name(d["name"]) == canonicalize_name(top):
            return dict(d)
    return None


def _library_supplier(path: str, inventory: Mapping[str, Any]) -> OrganizationalEntity:
    """NVIDIA for the nvidia-* wheels and the CUDA toolkit; else the maintainer of the wheel
    that installed the library (torch/lib/... -> torch's)."""
    owner = _owner(path, inventory)
    if "/site-packages/nvidia/" in path or path.startswith(layout.CUDA_LINK):  # and cuda-<ver>
        return NVIDIA
    if owner is not None and owner.get("author"):
        return _supplier(owner["author"])
    return _supplier(UNKNOWN_SUPPLIER)


def _library_version(path: str, inventory: Mapping[str, Any], record: BuildRecord) -> str:
    """The version of what ships the library: the wheel that installed it (_owner), the CUDA
    toolkit directory (cuda-12.8/...) or the cell's CUDA behind the /usr/local/cuda link (not
    cuda-compat: its libraries follow a driver's version); else unknown."""
    owner = _owner(path, inventory)
    if owner is not None:
        return str(owner["version"])
    if "/compat/" in path:
        return UNKNOWN_VERSION
    for part in path.split("/"):
        if part.startswith("cuda-") and part[5:6].isdigit():
            return part[5:]
    if path.startswith(layout.CUDA_LINK + "/") and record.cuda:
        return record.cuda
    return UNKNOWN_VERSION


def _cuda_libraries(inventory: Mapping[str, Any], record: BuildRecord) -> list[Component]:
    """The CUDA libraries found in the image, with the SASS and PTX they carry."""
    components: list[Component] = []
    for lib in inventory.get("cuda_libraries") or ():
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                supplier=_library_supplier(lib["path"], inventory),
                name=lib["path"].rsplit("/", 1)[-1],
                version=_library_version(lib["path"], inventory, record),
                bom_ref=f"file:{lib['path']}",
                properties=[
                    Property(name=f"{PROPERTY}:path", value=lib["path"]),
                    Property(name=f"{PROPERTY}:cuda.sass", value=" ".join(lib["sass"]) or "none"),
                    Property(name=f"{PROPERTY}:cuda.ptx", value=" ".join(lib["ptx"]) or "none"),
                ],
            )
        )
    return components


def sbom_json(bom: Bom) -> str:
    """The document, validated against the CycloneDX schema (an invalid one is our bug)."""
    text: str = JsonV1Dot6(bom).output_as_string(indent=2)
    error = JsonStrictValidator(SCHEMA).validate_str(text)
    if error is not None:
        raise SbomError(
            f"the SBOM does not validate against CycloneDX {SCHEMA.to_version()}: {error}"
        )
    return text + "\n"

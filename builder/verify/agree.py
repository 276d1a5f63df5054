"""Do an image's labels, its lock record, its SBOM and what is installed in it agree? (pure)

The verify check `supply_chain` asks this: the lock record names the image's id and carries
exactly its labels; every wheel the record pins is installed at that version, and nothing else
is (ensurepip's own pip aside); an SBOM, when one is given, describes this image id, lists
exactly the record's wheels with their sha256, and carries the image's labels. Each
disagreement is one sentence naming the key, package or value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name

PROPERTY_LABEL = "trainimg:label:"
NOT_FROM_WHEELS = frozenset({"pip"})  # the venv's own, from ensurepip


def disagreements(
    image_id: str,
    labels: Mapping[str, str],
    record: Mapping[str, Any],
    installed: Mapping[str, str],
    sbom: Mapping[str, Any] | None = None,
) -> list[str]:
    out = []
    if record.get("image_id") != image_id:
        out.append(f"the lock record names image {record.get('image_id')}, not {image_id}")
    rec_labels = record.get("labels") or {}
    for key in sorted(rec_labels.keys() | labels.keys()):
        if rec_labels.get(key) != labels.get(key):
            out.append(
                f"label {key}: the image says {labels.get(key)!r}, the lock {rec_labels.get(key)!r}"
            )
    pins = {}
    for pin in record.get("wheels") or {}:
        name, _, version = pin.partition("==")
        pins[canonicalize_name(name)] = version
    have = {canonicalize_name(k): v for k, v in installed.items()}
    for name, version in sorted(pins.items()):
        if have.get(name) != version:
            out.append(f"{name}: the lock pins {version}, the image has {have.get(name) or 'none'}")
    for name, version in sorted(have.items()):
        if name not in pins and name not in NOT_FROM_WHEELS:
            out.append(f"{name} {version} is installed but no lock entry names it")
    if sbom is not None:
        out += _sbom_disagreements(image_id, labels, record, sbom)
    return out


def _sbom_disagreements(
    image_id: str, labels: Mapping[str, str], record: Mapping[str, Any], sbom: Mapping[str, Any]
) -> list[str]:
    out = []
    root = (sbom.get("metadata") or {}).get("component") or {}
    hashes = [h.get("content") for h in root.get("hashes") or ()]
    if image_id.removeprefix("sha256:") not in hashes:
        out.append(f"the SBOM describes {hashes or 'no image'}, not {image_id}")
    props = {
        p["name"][len(PROPERTY_LABEL) :]: p.get("value")
        for p in root.get("properties") or ()
        if str(p.get("name", "")).startswith(PROPERTY_LABEL)
    }
    if props != dict(labels):
        keys = sorted(k for k in props.keys() | labels.keys() if props.get(k) != labels.get(k))
        out.append(f"the SBOM's labels differ from the image's: {', '.join(keys[:5])}")
    listed = {}
    for c in sbom.get("components") or ():
        if str(c.get("purl", "")).startswith("pkg:pypi/") and c.get("hashes"):
            pin = f"{canonicalize_name(c['name'])}=={c.get('version')}"
            listed[pin] = c["hashes"][0]["content"]
    want = {
        f"{canonicalize_name(pin.partition('==')[0])}=={pin.partition('==')[2]}": sha
        for pin, sha in (record.get("wheels") or {}).items()
    }
    for pin in sorted(want.keys() | listed.keys()):
        if want.get(pin) != listed.get(pin):
            out.append(
                f"wheel {pin}: the lock says sha256 {str(want.get(pin))[:12]}, the SBOM "
                f"{str(listed.get(pin))[:12]}"
            )
    return out

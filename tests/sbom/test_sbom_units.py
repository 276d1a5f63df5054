"""The SBOM and provenance of the CPU cell's image, from its recorded lock record and what
builder/sbom/inventory.py read inside it (tests/data/sbom/, origins noted there): the document
validates against the CycloneDX 1.6 schema with the library's validator and lists every lock
entry with its sha256; OS packages carry their distro; the same image gives the same bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from builder.build.lock import BuildRecord
from builder.sbom import cyclonedx, provenance
from tests.sbom.conftest import CELL


@pytest.fixture
def doc(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def test_it_validates_and_lists_every_lock_entry_with_its_sha256(
    record: BuildRecord, text: str
) -> None:
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    pypi = {c["purl"]: c for c in doc["components"] if c.get("purl", "").startswith("pkg:pypi/")}
    assert len(record.wheels) == 13
    for pin, sha in record.wheels.items():
        c = pypi[cyclonedx.wheel_purl(pin)]
        assert c["hashes"] == [{"alg": "SHA-256", "content": sha}], pin
    assert "pkg:pypi/torch@2.13.0%2Bcpu" in pypi
    pip = pypi["pkg:pypi/pip@23.0.1"]  # ensurepip's, not a locked wheel: said so, no hash
    assert "hashes" not in pip
    assert pip["properties"][0]["name"] == "trainimg:origin"


def test_os_packages_carry_their_distro(doc: dict[str, Any], inventory: dict[str, Any]) -> None:
    debs = [c["purl"] for c in doc["components"] if c.get("purl", "").startswith("pkg:deb/")]
    assert len(debs) == len(inventory["packages"]) > 100
    gcc = next(p for p in debs if p.startswith("pkg:deb/debian/gcc-12@"))
    assert "distro=debian-12" in gcc and "arch=amd64" in gcc
    # the source package where it differs: what Debian's advisories (and scanners) key on
    by_name = {p.split("/")[2].split("@")[0]: p for p in debs}
    assert "upstream=openssl" in by_name["libssl3"]
    assert "upstream=glibc" in by_name["libc6"]
    assert "upstream" not in by_name["adduser"]  # its own source
    differ = [p for p in inventory["packages"] if p["source"] != p["name"]]
    assert sum("upstream=" in p for p in debs) >= len(differ) > 50


def test_the_source_version_is_named_where_it_differs() -> None:
    pkg = {"name": "libfoo1", "version": "1.2-3+b1", "source": "foo", "source_version": "1.2-3"}
    assert cyclonedx.upstream(pkg) == "foo@1.2-3"
    assert cyclonedx.upstream({**pkg, "source_version": "1.2-3+b1"}) == "foo"
    assert cyclonedx.upstream({**pkg, "source": "libfoo1", "source_version": "1.2-3+b1"}) is None
    assert cyclonedx.upstream({"name": "bash", "version": "5.2"}) is None  # an older inventory


def test_every_component_has_a_supplier(doc: dict[str, Any]) -> None:
    missing = [c["bom-ref"] for c in doc["components"] if not c.get("supplier", {}).get("name")]
    assert missing == []
    by_ref = {c["bom-ref"]: c for c in doc["components"]}
    deb = next(c for r, c in by_ref.items() if r.startswith("pkg:deb/debian/libssl3@"))
    assert deb["supplier"] == {"name": "Debian GNU/Linux", "url": ["https://www.debian.org/"]}
    torch = next(c for r, c in by_ref.items() if r.startswith("pkg:pypi/torch@"))
    assert torch["supplier"]["name"] != cyclonedx.UNKNOWN_SUPPLIER  # the wheel's own metadata
    # the image: its vendor label (the project's vendor); the tool and the trainer: trainimg
    assert doc["metadata"]["component"]["supplier"]["name"] == "ML platform team"
    assert by_ref["trainimg:trainer@0.1.0"]["supplier"]["name"] == "trainimg"


def test_base_image_and_cuda_libraries(record: BuildRecord, doc: dict[str, Any]) -> None:
    base = next(c for c in doc["components"] if c["bom-ref"].startswith("oci:"))
    assert base["name"] == "localhost/trainimg-base"
    cutlass = next(c for c in doc["components"] if c["name"] == "_C_cutlass_90a.abi3.so")
    props = {p["name"]: p["value"] for p in cutlass["properties"]}
    assert props["trainimg:cuda.sass"] == "sm_90a"
    assert doc["metadata"]["component"]["hashes"][0]["content"] == record.image_id[7:]


def test_the_same_image_gives_the_same_document(
    record: BuildRecord, inventory: dict[str, Any], text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # made again, in full; the schema validator (checked above) is not what is under test here
    monkeypatch.setattr(cyclonedx, "JsonStrictValidator", _Valid)
    again = cyclonedx.sbom_json(
        cyclonedx.build_bom(f"localhost/trainimg:{CELL}", record, inventory, cell=CELL)
    )
    assert again == text
    assert json.loads(text)["serialNumber"].startswith("urn:uuid:")


class _Valid:
    def __init__(self, schema: object) -> None:
        pass

    def validate_str(self, text: str) -> None:
        return None


def test_provenance_is_an_in_toto_statement_of_slsa_v1(record: BuildRecord) -> None:
    doc = provenance.statement(
        "localhost/trainimg",
        record,
        cell=CELL,
        source="https://github.com/trainimg/trainimg",
        containerfile_sha256="c" * 64,
        engine_version="4.3.1",
        source_date_epoch=1795943567,
    )
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    assert doc["predicateType"] == "https://slsa.dev/provenance/v1"
    assert doc["subject"][0]["digest"] == {"sha256": record.image_id[7:]}
    assert record.digest is not None
    assert doc["subject"][1]["digest"] == {"sha256": record.digest[7:]}
    build = doc["predicate"]["buildDefinition"]
    assert build["externalParameters"] == {"cell": CELL, "buildHash": record.build_hash}
    assert build["internalParameters"]["sourceDateEpoch"] == 1795943567
    uris = {d.get("uri") or d.get("name"): d.get("digest") for d in build["resolvedDependencies"]}
    assert uris["Containerfile"] == {"sha256": "c" * 64}
    for pin, sha in record.wheels.items():
        assert uris[cyclonedx.wheel_purl(pin)] == {"sha256": sha}

"""The default cell's SBOM has the NTIA minimum elements, as an independent checker reads them:
sbomaudit (on lib4sbom's CycloneDX parser), called as a library, offline (a connection attempt
fails the test). It must also refuse the document with one element taken away, so that the
check would catch the defect it is here for."""

from __future__ import annotations

import copy
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lib4sbom.parser import SBOMParser
from sbomaudit.audit import SBOMaudit

from builder.sbom import cyclonedx
from tests.sbom.conftest import CELL

Doc = dict[str, Any]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError(f"sbomaudit tried the network: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def audit(doc: Doc, tmp_path: Path) -> tuple[bool, dict[str, Any]]:
    """sbomaudit's NTIA verdict on the document and its report (nothing printed)."""
    path = tmp_path / "sbom.cdx.json"
    path.write_text(json.dumps(doc))
    parser = SBOMParser()
    parser.parse_file(str(path))
    auditor = SBOMaudit(options={"offline": True}, output=str(tmp_path / "audit.json"))
    verdict = auditor.audit_sbom(parser)
    return bool(verdict), auditor.get_audit()


def failures(report: dict[str, Any], section: str) -> list[str]:
    found: list[str] = []
    for entry in report.get(section) or ():
        texts = entry.get("reports", [entry]) if isinstance(entry, dict) else []
        found += [t["text"] for t in texts if t.get("state") == "Fail"]
    return found


def test_the_default_cells_sbom_is_ntia_conformant(text: str, tmp_path: Path) -> None:
    doc = json.loads(text)
    conformant, report = audit(doc, tmp_path)
    assert conformant
    assert failures(report, "metadata") == []
    missing = [
        f
        for f in failures(report, "packages")
        if f.startswith(("Supplier included", "Version included", "Package id missing"))
    ]
    assert missing == []
    assert failures(report, "relationships") == []
    # every component was audited: the image's dependencies name all of them
    root = doc["metadata"]["component"]["bom-ref"]
    depends = next(d for d in doc["dependencies"] if d["ref"] == root)["dependsOn"]
    assert sorted(depends) == sorted(c["bom-ref"] for c in doc["components"])


def _component(doc: Doc, prefix: str) -> Doc:
    return next(c for c in doc["components"] if c["bom-ref"].startswith(prefix))


def _drop_version(doc: Doc) -> None:
    del _component(doc, "pkg:pypi/torch@")["version"]


def _drop_supplier(doc: Doc) -> None:
    del _component(doc, "pkg:deb/debian/libssl3@")["supplier"]


def _drop_cuda_library_version(doc: Doc) -> None:
    del _component(doc, "file:")["version"]  # what main's SBOM lacked before issue 34


def _drop_timestamp(doc: Doc) -> None:
    del doc["metadata"]["timestamp"]


def _drop_author_and_tools(doc: Doc) -> None:
    del doc["metadata"]["authors"], doc["metadata"]["tools"]


def _drop_dependencies(doc: Doc) -> None:
    del doc["dependencies"]


@pytest.mark.parametrize(
    "defect",
    [
        _drop_version,
        _drop_supplier,
        _drop_cuda_library_version,
        _drop_timestamp,
        _drop_author_and_tools,
        _drop_dependencies,
    ],
)
def test_it_fails_without_an_element(
    text: str, tmp_path: Path, defect: Callable[[Doc], None]
) -> None:
    doc = copy.deepcopy(json.loads(text))
    defect(doc)
    conformant, _ = audit(doc, tmp_path)
    assert not conformant


def test_the_first_party_parts_and_licences(text: str) -> None:
    doc = json.loads(text)
    image = doc["metadata"]["component"]
    assert image["version"] == CELL
    assert image["licenses"] == [{"license": {"id": "Apache-2.0"}}]  # its licenses label
    assert doc["metadata"]["authors"] == [{"name": "trainimg"}]
    trainer = _component(doc, "trainimg:trainer@")
    assert (trainer["name"], trainer["version"]) == ("trainimg-trainer", "0.1.0")
    by_name = {c["name"]: c for c in doc["components"]}
    assert by_name["torch"]["licenses"][0]["expression"].startswith("Apache-2.0 AND")
    assert by_name["numpy"]["licenses"] == [{"license": {"name": "BSD License"}}]  # classifier
    assert "licenses" not in by_name["torchao"]  # its METADATA states none: none claimed
    assert by_name["adduser"]["licenses"] == [{"license": {"name": "GPL-2+"}}]  # DEP-5 name
    # the CUDA libraries are versioned by the wheel whose directory holds them
    assert by_name["_C_cutlass_90a.abi3.so"]["version"] == "0.18.0"
    assert cyclonedx.UNKNOWN_VERSION.startswith("unknown (")

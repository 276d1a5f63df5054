"""The SBOM and provenance of one recorded image, gathered through an engine (used by
`trainimg sbom` and `trainimg push --sign`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from builder.atomic_file import atomic_write
from builder.build.lock import BuildRecord
from builder.build.source_date import source_date_epoch
from builder.engines.roles import InspectAndRun
from builder.errors import TrainimgError
from builder.sbom import cyclonedx, inventory, provenance
from builder.workspace import Workspace


@dataclass(frozen=True)
class Documents:
    name: str  # the lock record's name (a cell, or an extension)
    record: BuildRecord
    sbom: str  # CycloneDX JSON, validated
    provenance: str  # in-toto statement JSON


def find_record(
    records: dict[str, BuildRecord], target: str, image_id: str | None
) -> tuple[str, BuildRecord]:
    if target in records:
        return target, records[target]
    for name, rec in sorted(records.items()):
        if image_id is not None and rec.image_id == image_id:
            return name, rec
    raise TrainimgError(
        f"{target}: no lock record names this image (the SBOM's wheel hashes come from the "
        "lock): build it with `trainimg build` (or `trainimg extend`), or pass --lock"
    )


def gather_documents(
    ws: Workspace, engine: InspectAndRun, name: str, record: BuildRecord
) -> Documents:
    image = record.tags[0] if record.tags else record.image_id
    inv = inventory.read_inventory(engine, record.image_id)
    bom = cyclonedx.build_bom(image, record, inv, cell=name)
    cell = record.parent["cell"] if record.parent else name
    containerfile = ws.root / "images" / cell / "Containerfile"
    sha = (
        hashlib.sha256(containerfile.read_bytes()).hexdigest()
        if containerfile.is_file() and not record.parent
        else None
    )
    info = engine.inspect_image(record.image_id)
    doc = provenance.statement(
        image.rsplit(":", 1)[0],
        record,
        cell=name,
        source=ws.matrix.project.source,
        containerfile_sha256=sha,
        engine_version=engine.version(),
        source_date_epoch=source_date_epoch(info.labels, info.created),
    )
    return Documents(name, record, cyclonedx.sbom_json(bom), provenance.provenance_json(doc))


def write(path: Path, text: str) -> None:
    """Written beside, then renamed: no reader sees half an SBOM."""
    atomic_write(path, text)

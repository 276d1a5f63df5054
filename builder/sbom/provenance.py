"""An in-toto Statement (v1) with a SLSA provenance (v1) predicate for a built image (pure).

Subject: the image id (its config digest) and, where the engine or registry reports one, its
manifest digest. The build definition names the cell and its build hash (external
parameters), the engine, its version and SOURCE_DATE_EPOCH (internal), and resolves every input:
the base image by digest, the rendered Containerfile by sha256, every wheel by the sha256 its
wheelhouse lock pinned. https://slsa.dev/spec/v1.0/provenance, https://in-toto.io/Statement/v1.
"""

from __future__ import annotations

import json
from typing import Any

from builder import __version__
from builder.build.lock import BuildRecord
from builder.sbom.cyclonedx import wheel_purl

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"


def _hex(digest: str) -> dict[str, str]:
    return {"sha256": digest.removeprefix("sha256:")}


def statement(
    image: str,
    record: BuildRecord,
    *,
    cell: str,
    source: str,
    containerfile_sha256: str | None,
    engine_version: str,
    source_date_epoch: int,
) -> dict[str, Any]:
    subject = [{"name": f"{image}@config", "digest": _hex(record.image_id)}]
    if record.digest:
        subject.append({"name": image, "digest": _hex(record.digest)})
    deps: list[dict[str, Any]] = [
        {
            "uri": f"oci:{record.base_image}",
            **({"digest": _hex(record.base_digest)} if record.base_digest else {}),
        }
    ]
    if record.parent:
        deps.append(
            {"uri": f"oci:{record.parent['image_id']}", "digest": _hex(record.parent["image_id"])}
        )
    if containerfile_sha256:
        deps.append({"name": "Containerfile", "digest": {"sha256": containerfile_sha256}})
    deps += [
        {"uri": wheel_purl(pin), "digest": {"sha256": sha}}
        for pin, sha in sorted(record.wheels.items())
    ]
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": f"{source}/build/v1",
                "externalParameters": {"cell": cell, "buildHash": record.build_hash},
                "internalParameters": {
                    "engine": record.engine,
                    "engineVersion": engine_version,
                    "sourceDateEpoch": source_date_epoch,
                },
                "resolvedDependencies": deps,
            },
            "runDetails": {
                "builder": {"id": source, "version": {"trainimg": __version__}},
                "metadata": {"finishedOn": record.built_at},
            },
        },
    }


def provenance_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"

"""`trainimg sbom CELL|IMAGE`: the CycloneDX SBOM (and, with --provenance, the in-toto/SLSA
provenance) of a recorded image, from its lock record and what is read inside it
(builder/sbom/). Exit codes: 0 written, 2 no record or engine."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from builder.build import lock as lockfile
from builder.commands.common import (
    add_engine_options,
    lock_file,
    output_file,
    shared_options,
    workspace,
)
from builder.engines.base import ImageNotFound
from builder.engines.discover import engine_session
from builder.errors import TrainimgError
from builder.sbom import documents
from builder.workspace import closest


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sbom",
        parents=[shared_options()],
        description=(
            "Write a CycloneDX 1.6 SBOM of the image of CELL (or IMAGE, when a lock record names "
            "it): every wheel as pkg:pypi with the sha256 its wheelhouse lock pinned, every OS "
            "package as pkg:deb/pkg:rpm with its distro, the base image by digest, the CUDA "
            "libraries with their SASS/PTX, the bundled trainer; each with the NTIA minimum "
            "elements (supplier, version, identifiers, the image's dependency on it; the SBOM's "
            "author and timestamp) and the licence its package states (none where it states "
            "none: docs/build.md). Validated against the CycloneDX schema. "
            "--provenance also writes an in-toto statement with a SLSA v1 provenance predicate."
        ),
    )
    p.add_argument("target", metavar="CELL|IMAGE")
    p.add_argument("-o", "--output", default="-", help="the SBOM file ('-': stdout, the default)")
    p.add_argument("--provenance", metavar="FILE", help="also write the provenance statement")
    p.add_argument("--lock", help="the lock file (default: images/lock.json)")
    add_engine_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = None if args.output == "-" else output_file(args.output)
    prov = None if args.provenance is None else output_file(args.provenance, "--provenance")
    ws = workspace(args, strict=False)
    lock_path = lock_file(args, ws)
    records = lockfile.read(lock_path)
    near = closest(args.target, [*records, *(c.name for c in ws.cells)])
    if args.target not in records and near and not any(c in args.target for c in "/:@"):
        raise TrainimgError(  # a typo of a cell name, not an image of that name
            f"no cell named {args.target!r} in {lock_path} or {ws.matrix.path}; did you mean "
            f"{' or '.join(near)}? (an image: name it with its tag)"
        )
    with engine_session(args.engine, args.url) as engine:
        image_id = None
        if args.target not in records:
            try:
                image_id = engine.inspect_image(args.target).id
            except ImageNotFound:
                image_id = None
        name, record = documents.find_record(records, args.target, image_id)
        docs = documents.gather_documents(ws, engine, name, record)
    if out is None:
        sys.stdout.write(docs.sbom)
    else:
        documents.write(out, docs.sbom)
        print(f"{args.output}: CycloneDX SBOM of {name} ({record.image_id[:19]})", file=sys.stderr)
    if prov is not None:
        documents.write(prov, docs.provenance)
        print(f"{args.provenance}: SLSA provenance of {name}", file=sys.stderr)
    return 0

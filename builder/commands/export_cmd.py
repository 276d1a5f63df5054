"""`trainimg export CELL|IMAGE -o PATH`: write the image where compute nodes without a registry
can read it: an OCI archive (PATH.tar) that podman runs as `oci-archive:PATH`, or an enroot
image (PATH.sqsh) that pyxis runs (builder/launch/archive.py). `trainimg slurm --archive PATH`
writes the job script for it. The file appears whole or not at all."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from builder.commands.common import add_engine_options, output_file, shared_options
from builder.engines.discover import engine_session
from builder.engines.roles import ImageExport
from builder.launch import archive
from builder.verify.target import resolve_image

KINDS = {".tar": "an OCI archive (podman: oci-archive:PATH)", ".sqsh": "an enroot image (pyxis)"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        parents=[shared_options()],
        description=(
            "Write CELL's image (or IMAGE) to PATH for nodes that cannot pull it: PATH.tar is "
            "an OCI archive (podman runs oci-archive:PATH; needs podman here), PATH.sqsh an "
            "enroot image (squashfs, made with sqfstar from squashfs-tools) for pyxis. Then "
            "`trainimg slurm CELL --archive PATH ...`. Exit codes: 0 written, 2 bad input."
        ),
    )
    p.add_argument("target", metavar="CELL|IMAGE")
    p.add_argument("-o", "--output", required=True, metavar="PATH", help="PATH.tar or PATH.sqsh")
    add_engine_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    dest = Path(args.output)
    if dest.suffix not in KINDS:
        raise archive.ExportError(
            f"-o {args.output}: name it .tar (an OCI archive for podman) or .sqsh (an enroot "
            "image for pyxis)"
        )
    if not dest.parent.is_dir():
        raise archive.ExportError(f"-o {args.output}: {dest.parent} is not a directory")
    output_file(args.output)
    image = resolve_image(args.target, args.matrix)
    with engine_session(args.engine, args.url) as engine:
        _write(engine, image, dest)
    size = dest.stat().st_size / 1e9
    print(
        f"trainimg: wrote {dest}: {KINDS[dest.suffix]} of {image}, {size:.2f} GB", file=sys.stderr
    )
    return 0


def _write(engine: ImageExport, image: str, dest: Path) -> None:
    info = engine.inspect_image(image)
    if dest.suffix == ".tar":
        archive.write_file(engine.save_oci_archive(image), dest)
    else:
        with engine.export_rootfs(image) as rootfs:
            archive.write_sqsh(rootfs, archive.enroot_files(image, info), dest)

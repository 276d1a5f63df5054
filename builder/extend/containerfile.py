"""The Containerfile of an extended image (pure): builder/templates/extend.Containerfile.j2.

Values reach it validated: the parent as an image id (`sha256:<64 hex>`), label values through
the `dq` filter, and each `--copy` as a JSON-form COPY whose destination is an absolute path
of plain characters (no `..`, quotes or spaces) outside the locked trees (the venv and the
trainer: LOCKED_TREES): a DEST in one, or above one (`/opt`, `/`), is refused before any build.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from builder import __version__
from builder.errors import TrainimgError
from builder.spec.layout import TRAINER_HOME, USER_ID, VENV
from builder.spec.render import environment

EXTEND_TEMPLATE = "extend.Containerfile.j2"
EXTEND_TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"
_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
_DEST = re.compile(r"^/(?:[A-Za-z0-9._+-]+/?)*$")
LOCKED_TREES = (VENV, TRAINER_HOME)  # what the parent's proof covers, file by file (files.py)


def locked_tree_of(dest: str) -> str | None:
    """The locked tree DEST would write into (DEST inside it, or above it), or None."""
    d = dest.rstrip("/") + "/"
    for tree in LOCKED_TREES:
        t = tree + "/"
        if d.startswith(t) or t.startswith(d):
            return tree
    return None


class CopySpecError(TrainimgError):
    pass


@dataclass(frozen=True)
class Copy:
    """`--copy SRC:DEST`: a file or directory of this host, copied to DEST in the image."""

    source: Path
    dest: str

    @property
    def arcname(self) -> str:
        return self.source.name


def parse_copy(spec: str, index: int) -> Copy:
    src, sep, dest = spec.rpartition(":")
    if not sep or not src or not dest:
        raise CopySpecError(f"--copy {spec!r}: expected SRC:DEST, e.g. ./app:/workspace/app")
    if not _DEST.match(dest) or "/../" in f"{dest}/" or "/./" in f"{dest}/":
        raise CopySpecError(
            f"--copy {spec!r}: DEST {dest!r} must be an absolute path of letters, digits and "
            "._+- (no `..`, spaces or quotes), e.g. /workspace/app"
        )
    tree = locked_tree_of(dest)
    if tree:
        raise CopySpecError(
            f"--copy {spec!r}: DEST {dest!r} would write into {tree}, which the parent image "
            f"locks file by file ({', '.join(LOCKED_TREES)}); copy to another place, e.g. "
            "/workspace/app"
        )
    path = Path(src)
    if path.is_symlink() or not path.exists():
        raise CopySpecError(f"--copy {spec!r}: {src} is not a file or directory (links refused)")
    return Copy(path.resolve(), dest)


def copy_args(copies: Sequence[Copy]) -> list[list[str]]:
    """The JSON-form COPY arguments: copy/<i>/<name> of the context -> DEST."""
    out = []
    for i, c in enumerate(copies):
        src = f"copy/{i}/{c.arcname}" + ("/" if c.source.is_dir() else "")
        out.append([src, c.dest])
    return out


def render(
    parent_image: str,
    parent_cell: str,
    labels: Mapping[str, str],
    copies: Sequence[Copy],
    templates: Path = EXTEND_TEMPLATE_DIR,
) -> str:
    if not _ID.match(parent_image):
        raise TrainimgError(f"the parent image {parent_image!r} is not an image id sha256:<hex>")
    jenv = environment(templates.parent)
    jenv.loader = jinja2.FileSystemLoader(str(templates))
    return jenv.get_template(EXTEND_TEMPLATE).render(
        version=__version__,
        parent_image=parent_image,
        parent_cell=parent_cell,
        venv=VENV,
        uid=USER_ID,
        labels=dict(sorted(labels.items())),
        copies=copy_args(copies),
    )

"""The file-level proof of an extension: every file of the parent's locked trees (the venv and
the trainer) by path and sha256, read from inside the parent's and the child's image, and what
the child may not have done to them (docs/build.md, "Extending a cell's image").

The fingerprint (fingerprint.py) proves torch's build and kernels; this proves the files: a
wheel with a new name can still write `torch/nn/modules/linear.py`, a console script over
`bin/torchrun` or a `.pth` that runs at every interpreter start. The comparison is pure: the
child must have every file of the parent's trees with the same sha256 (or the same link
target), and no new `.pth` file, no new file under a directory of site-packages the parent
has (a locked package's own directory, its .dist-info), nothing that shadows a locked module
(a package directory or extension module of the same name is found before `name.py`; bytecode
in site-packages/__pycache__ for it) and no new file in the trainer's tree. New top-level
packages, their .dist-info and bytecode, and new console scripts are allowed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from builder.engines.image_probe import run_probe
from builder.engines.roles import ContainerRunner
from builder.extend.containerfile import LOCKED_TREES
from builder.spec.layout import TRAINER_HOME, VENV

# Runs with the image's own Python; prints one JSON line: {path: sha256 hex | "link:" target}.
_PROBE = r"""
import hashlib, json, os
out = {}
for root in ROOTS:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames) + links:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                out[path] = "link:" + os.readlink(path)
            elif os.path.isfile(path):
                h = hashlib.sha256()
                with open(path, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                out[path] = h.hexdigest()
            else:
                out[path] = "special"
print(json.dumps({"files": out}, sort_keys=True))
"""


def manifest_probe(roots: tuple[str, ...] = LOCKED_TREES) -> str:
    return _PROBE.replace("ROOTS", json.dumps(list(roots)))


def read_manifest(engine: ContainerRunner, image: str) -> dict[str, str]:
    """Every file of the locked trees in `image`: path -> sha256 (or "link:<target>")."""
    files: dict[str, str] = run_probe(engine, image, manifest_probe(), what="file manifest")[
        "files"
    ]
    return files


@dataclass(frozen=True)
class FileBreach:
    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def _locked_dirs(parent: Mapping[str, str], site_packages: str) -> set[str]:
    """The directories directly under site-packages the parent has (its packages, dist-infos)."""
    prefix = site_packages.rstrip("/") + "/"
    out = set()
    for path in parent:
        top, sep, _rest = path.removeprefix(prefix).partition("/")
        if path.startswith(prefix) and sep and top != "__pycache__":
            out.add(top)
    return out


def _locked_names(parent: Mapping[str, str], site_packages: str) -> set[str]:
    """The import names the parent's site-packages answers: its packages and module files."""
    prefix = site_packages.rstrip("/") + "/"
    out = set()
    for path in parent:
        if path.startswith(prefix):
            out.add(path.removeprefix(prefix).split("/", 1)[0].split(".", 1)[0])
    out.discard("__pycache__")
    return out


def _new_file_breach(
    path: str, site_packages: str, locked_dirs: set[str], names: set[str]
) -> str | None:
    if path.endswith(".pth"):
        return "a new .pth file (site runs it at every interpreter start)"
    if path.startswith(TRAINER_HOME.rstrip("/") + "/"):
        return "a new file in the trainer's tree"
    prefix = site_packages.rstrip("/") + "/"
    if not path.startswith(prefix):
        return None
    top, sep, rest = path.removeprefix(prefix).partition("/")
    if sep and top in locked_dirs:
        return f"a new file under the locked directory {prefix}{top}"
    if top == "__pycache__" and rest.split(".", 1)[0] in names:
        return "new bytecode for a locked module (Python would load it instead of the source)"
    if top.split(".", 1)[0] in names and not top.endswith((".dist-info", ".data")):
        return f"shadows the locked module {top.split('.', 1)[0]} (found first on import)"
    return None


def compare_trees(
    parent: Mapping[str, str], child: Mapping[str, str], site_packages: str
) -> list[FileBreach]:
    """Every way the child touched the parent's locked trees (empty: none), by path."""
    out = []
    bin_dir = f"{VENV}/bin/"
    for path, digest in sorted(parent.items()):
        now = child.get(path)
        if now is None:
            out.append(FileBreach(path, "removed (the parent has it)"))
        elif now != digest:
            what = "console script over an existing name" if path.startswith(bin_dir) else "file"
            out.append(FileBreach(path, f"{what} overwritten ({_short(digest)} -> {_short(now)})"))
    locked_dirs = _locked_dirs(parent, site_packages)
    names = _locked_names(parent, site_packages)
    for path in sorted(set(child) - set(parent)):
        why = _new_file_breach(path, site_packages, locked_dirs, names)
        if why:
            out.append(FileBreach(path, why))
    return out


def _short(digest: str) -> str:
    return digest if digest.startswith(("link:", "special")) else f"sha256 {digest[:12]}…"

"""docs/architecture.md's map is the layout as it is: every file and directory it names exists,
and every package and every module of builder/ and trainer/ is an entry of its own, once.

The map is the page's first code block: one entry a line (a name, then what it holds), nested
by two spaces under the directory above it; continuation lines start in the description column.
A path in a description is read from the entry's directory (a file entry: the one it is in), or
from the top when it starts with one of the project's top-level names (builder/, tests/, ...).
A file on the map puts its directories on it too (`engines/base.py` names builder/engines/).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from tests.conftest import REPO

PAGE = REPO / "docs" / "architecture.md"
PACKAGE_ROOTS = ("builder", "trainer")
# a file of a kind the project keeps (modules, templates, scripts, pages, data) or a directory
PATH = re.compile(
    r"(?<![\w./<>$-])((?:[\w.-]+/)*[\w.-]*[\w-](?:\.(?:py|j2|sh|md|yaml|base)|/))(?![\w/<>])"
)


def map_lines() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    block = re.search(r"^```\n(.*?)^```$", text, re.S | re.M)
    assert block is not None, f"{PAGE}: no map (a plain ``` code block)"
    return block.group(1).splitlines()


def named_paths() -> dict[PurePosixPath, str]:
    """Every path the map names -> the map line that names it."""
    return _walk()[0]


def entries() -> list[PurePosixPath]:
    """The map's entries (a name at the start of a line, under its directory), in order."""
    return _walk()[1]


def _walk(lines: list[str] | None = None) -> tuple[dict[PurePosixPath, str], list[PurePosixPath]]:
    lines = map_lines() if lines is None else lines
    column = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
    desc_col = max(ln.find("  ", len(ln) - len(ln.lstrip())) for ln in lines if ln.strip())
    parents: list[tuple[int, PurePosixPath]] = []  # (indent, directory) of the open entries
    found: dict[PurePosixPath, str] = {}
    listed: list[PurePosixPath] = []
    here = PurePosixPath(".")
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= desc_col - 2 or indent > column + 2 * len(parents):  # a continuation
            description = line
        else:
            while parents and parents[-1][0] >= indent:
                parents.pop()
            base = parents[-1][1] if parents else PurePosixPath(".")
            name, _, description = line.strip().partition("  ")
            entry = base / name
            listed.append(entry)
            if "<" not in name:
                found[entry] = line
            here = entry if name.endswith("/") else entry.parent
            if name.endswith("/"):
                parents.append((indent, entry))
        for token in PATH.findall(description):
            top = token.split("/")[0]
            start = PurePosixPath(".") if (REPO / top).is_dir() and "/" in token else here
            found[start / token] = line
    return found, listed


def test_the_map_reads_and_names_the_parts_it_must() -> None:
    named = named_paths()
    for must in ("matrix.yaml", "Containerfile.base", "builder/engines/base.py", "trainer/fp8"):
        assert PurePosixPath(must) in named, must


def test_every_path_the_map_names_exists() -> None:
    missing = {str(p): line.strip() for p, line in named_paths().items() if not (REPO / p).exists()}
    assert missing == {}, "docs/architecture.md names paths that do not exist"


def packages() -> set[PurePosixPath]:
    return {
        PurePosixPath(p.parent.relative_to(REPO).as_posix())
        for root in PACKAGE_ROOTS
        for p in (REPO / root).rglob("__init__.py")
    }


def modules() -> set[PurePosixPath]:
    return {
        PurePosixPath(p.relative_to(REPO).as_posix())
        for root in PACKAGE_ROOTS
        for p in (REPO / root).rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def test_every_package_and_every_module_is_an_entry_once() -> None:
    listed = entries()
    twice = sorted({str(p) for p in listed if listed.count(p) > 1})
    assert twice == [], "listed more than once on docs/architecture.md's map"
    absent = sorted(str(p) for p in (modules() | packages()) - set(listed))
    assert absent == [], "no entry of its own on docs/architecture.md's map"


def test_the_entry_check_would_see_a_module_folded_into_another_entry() -> None:
    """A module named only inside another entry's description is not an entry of its own."""
    lines = map_lines()
    sdk = next(i for i, ln in enumerate(lines) if ln.strip().startswith("sdk.py "))
    folded = [*lines[:sdk], *lines[sdk + 1 :]]
    base = next(i for i, ln in enumerate(folded) if ln.strip().startswith("base.py "))
    folded[base] += " (sdk.py: the engine base)"
    found, listed = _walk(folded)
    assert PurePosixPath("builder/engines/sdk.py") in found  # still named...
    assert PurePosixPath("builder/engines/sdk.py") not in listed  # ...but no entry


def test_the_map_walk_would_see_a_missing_module(tmp_path: Path) -> None:
    """The check itself: a name that is not there is reported (not read as a description)."""
    assert PurePosixPath("builder/engines/sdk.py") in named_paths()
    assert not (REPO / "builder" / "engines" / "nonesuch.py").exists()
    assert PATH.findall("a; engines/nonesuch.py: x (templates/sbatch.sh.j2)") == [
        "engines/nonesuch.py",
        "templates/sbatch.sh.j2",
    ]

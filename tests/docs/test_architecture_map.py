"""docs/architecture.md's map is the layout as it is: every file and directory it names exists,
and every package of builder/ and trainer/ - and every module at the top of builder/ - is on it.

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
    lines = map_lines()
    column = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
    desc_col = max(ln.find("  ", len(ln) - len(ln.lstrip())) for ln in lines if ln.strip())
    parents: list[tuple[int, PurePosixPath]] = []  # (indent, directory) of the open entries
    found: dict[PurePosixPath, str] = {}
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
            if "<" not in name:
                found[entry] = line
            here = entry if name.endswith("/") else entry.parent
            if name.endswith("/"):
                parents.append((indent, entry))
        for token in PATH.findall(description):
            top = token.split("/")[0]
            start = PurePosixPath(".") if (REPO / top).is_dir() and "/" in token else here
            found[start / token] = line
    return found


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


def test_every_package_and_every_top_level_builder_module_is_on_the_map() -> None:
    named = set(named_paths())
    named |= {parent for path in named for parent in path.parents}  # engines/base.py: engines/
    modules = {
        PurePosixPath(p.relative_to(REPO).as_posix())
        for p in (REPO / "builder").glob("*.py")
        if p.name != "__init__.py"
    }
    absent = sorted(str(p) for p in (packages() | modules) - named)
    assert absent == [], "not on docs/architecture.md's map"


def test_the_map_walk_would_see_a_missing_module(tmp_path: Path) -> None:
    """The check itself: a name that is not there is reported (not read as a description)."""
    assert PurePosixPath("builder/engines/sdk.py") in named_paths()
    assert not (REPO / "builder" / "engines" / "nonesuch.py").exists()
    assert PATH.findall("a; engines/nonesuch.py: x (templates/sbatch.sh.j2)") == [
        "engines/nonesuch.py",
        "templates/sbatch.sh.j2",
    ]

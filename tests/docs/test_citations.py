"""Sources a user can follow: every citation names a public document (a URL) or a file of this
repository, never a note outside it."""

from __future__ import annotations

import re
import subprocess

import pytest

from builder.cli import main
from builder.facts import sources
from builder.workspace import open_workspace
from tests.conftest import REPO

# Built from parts, so that this file does not match itself.
NOTES = ["compat-" + "facts", "trainer-" + "notes", "podman-" + "here", "prior-" + "art"]
OUTSIDE = re.compile("|".join(["shar" + "ed/", r"(?<![\w./])\.\./\w", *NOTES]))
_PATHISH = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)+[\w.-]+\.(?:md|py|yaml|sh|json))\b")


def test_no_citation_points_outside_the_repository() -> None:
    """`grep -rn shared/ builder trainer docs README.md` (and the notes' names) finds nothing."""
    where = ["builder", "trainer", "docs", "README.md", "DEVELOPERS.md", "matrix.yaml", "scripts"]
    proc = subprocess.run(
        ["grep", "-rnP", OUTSIDE.pattern, *where, "--include=*", "--exclude-dir=__pycache__"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, f"citations of files outside the repository:\n{proc.stdout}"


def _followable(text: str) -> str | None:
    """None when a citation can be followed; else why not."""
    if OUTSIDE.search(text):
        return "points outside the repository"
    files = [
        m for m in _PATHISH.findall(text) if not re.search(rf"https?://\S*{re.escape(m)}", text)
    ]
    missing = [f for f in files if not (REPO / f).exists() and "(" not in text.split(f)[0][-60:]]
    if missing:
        return f"names {missing}, not a file of this repository"
    if "https://" not in text and not files and text.strip() != "matrix.yaml":
        return "names neither a URL nor a file of this repository"
    return None


def test_every_rule_source_can_be_followed() -> None:
    found = [v for v in vars(sources).values() if isinstance(v, sources.Source)]
    assert len(found) > 5
    for source in found:
        assert _followable(source.ref) is None, f"{source.ref}: {_followable(source.ref)}"


def test_matrix_explain_sources_can_be_followed(capsys: pytest.CaptureFixture[str]) -> None:
    ws = open_workspace(REPO / "matrix.yaml")
    seen: set[str] = set()
    for cell in ws.cells:
        assert main(["matrix", "explain", cell.name, "--matrix", str(REPO / "matrix.yaml")]) == 0
        out = capsys.readouterr().out
        seen |= {m.strip() for m in re.findall(r"source: (.*)", out)}
    assert len(seen) > 10
    bad = {s: _followable(s) for s in sorted(seen) if _followable(s)}
    assert not bad, "sources a user cannot follow:\n" + "\n".join(
        f"{s}: {w}" for s, w in bad.items()
    )

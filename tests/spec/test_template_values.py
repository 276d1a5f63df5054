"""Which template values reach a Containerfile line unquoted, and why each may: a value from
matrix.yaml reaches shell lines and ENV/LABEL only through the quoting filters (`q`, `rpm`,
`deb`, `dq`) or a macro that applies them; what is written plainly is the project's own
(spec/layout.py, the wheel group names, names trainimg makes) or a matrix value whose pattern in
matrix/validate.py admits nothing a shell reads specially. A new unquoted value fails here until
it is quoted or listed with its reason."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

TEMPLATES = [REPO / "Containerfile.base", *sorted((REPO / "images" / "templates").glob("*.j2"))]
QUOTED = re.compile(r"\|\s*(q|dq|rpm|deb|tojson)\b|\|\s*map\(['\"](q|dq|rpm|deb)['\"]\)")
EXPR = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
CALL = re.compile(r"^[a-z_]+\(")  # a macro of the template: its body is scanned too

# root name -> why it may be written plainly
PLAIN = {
    "python_bin": "python{X.Y}: the Python version matches validate.PYTHON (3.N: digits, a dot)",
    "venv": "spec/layout.py",
    "venv_python": "spec/layout.py",
    "venv_pip": "spec/layout.py",
    "uid": "spec/layout.py",
    "user_home": "spec/layout.py",
    "user_name": "spec/layout.py",
    "volumes": "spec/layout.py",
    "shared_dirs": "spec/layout.py",
    "shared_mode": "spec/layout.py",
    "workdir": "spec/layout.py",
    "trainer_home": "spec/layout.py",
    "trainer_module": "spec/layout.py",
    "compat_dir": "spec/layout.py (from the CUDA release, validated)",
    "group": "a wheel group name (spec/wheel_groups.py)",
    "os_stage": "a stage name trainimg makes",
    "arg": "a build argument name trainimg declares (spec/labels.py)",
    "base_ref": "FROM takes no shell; the reference matches validate.IMAGE_REF",
    "cuda_link": "spec/layout.py",
    "path": "a trimmed path of a wheel group: spec/wheel_groups.py's own list",
    "key": "an ENV or LABEL key: spec/labels.py's constants (the value goes through dq)",
    "'{'": "a literal brace (`${ARG}` in a LABEL)",
}


def unquoted() -> list[tuple[str, str]]:
    """(file:line, expression) of every expression outside a comment that no filter quotes."""
    found = []
    for path in TEMPLATES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith(("#", "{#")):
                continue
            for expr in EXPR.findall(line):
                if QUOTED.search(expr) or CALL.match(expr):
                    continue
                found.append((f"{path.relative_to(REPO)}:{n}", expr))
    return found


def root(expr: str) -> str:
    return expr if expr.startswith("'") else re.split(r"[\s.|\[(]", expr, maxsplit=1)[0]


def test_every_unquoted_value_is_the_projects_own_or_held_to_a_safe_pattern() -> None:
    offenders = [
        f"{where}: {{{{ {expr} }}}}" for where, expr in unquoted() if root(expr) not in PLAIN
    ]
    assert offenders == [], "quote it with q/dq/rpm/deb, or list it in PLAIN with its reason"


def test_the_scan_sees_an_unquoted_matrix_value(tmp_path: Path) -> None:
    assert root("cell.python") not in PLAIN
    assert QUOTED.search("cell.python | q") and not QUOTED.search("cell.python")
    assert EXPR.findall("RUN dnf install {{ cell.python }} {{ x | q }}") == ["cell.python", "x | q"]


def test_every_plain_name_is_still_used() -> None:
    roots = {root(expr) for _, expr in unquoted()}
    assert sorted(set(PLAIN) - roots) == []

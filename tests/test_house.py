"""House rules, checked on the source tree: a public name has one meaning in
builder/, a long module says why it is long, and label keys are spelled in builder/spec/labels.py.

Both rules keep an explicit list of what is allowed (with the reason) and of what is still
PENDING (known to offend, to be split). A PENDING entry that no longer offends must be removed,
so the lists only shrink.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILDER = REPO / "builder"
MAX_LINES = 400
# A module over MAX_LINES says why in its docstring, on a line holding this marker, e.g.
# "Over 400 lines: the check table is one list so that ids and order are read in one place."
LONG_MARKER = "over 400 lines"

# Names that may be defined in several modules because they are one protocol, not two meanings.
ALLOWED_PER_MODULE = {
    # every subcommand module registers its parser and runs it (builder/commands/__init__.py)
    "register": "the subcommand protocol of builder/commands/*_cmd.py",
    "run": "the subcommand protocol of builder/commands/*_cmd.py",
    # a script's entry point (`python -m builder.cli`, `python fatbin.py` inside an image)
    "main": "a module's command-line entry point",
}
PROTOCOL_DIRS = {"register": "commands", "run": "commands"}

# Names defined in several modules that are known to offend; empty: none may.
PENDING_DUPLICATES: set[str] = set()
# Modules over MAX_LINES without the marker that are known to offend; empty: none may.
PENDING_LONG: set[str] = set()


def _public_top_level(tree: ast.Module) -> set[str]:
    """Top-level classes and functions, and assignments to names starting with a capital
    (CONSTANTS, type aliases), that do not start with _."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(
                t.id for t in node.targets if isinstance(t, ast.Name) and t.id[0].isupper()
            )
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id[0].isupper()
        ):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def definitions() -> dict[str, list[str]]:
    """Public top-level name -> the builder/ modules defining it."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(BUILDER.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for name in _public_top_level(ast.parse(path.read_text(encoding="utf-8"))):
            if name in PROTOCOL_DIRS and path.parent.name == PROTOCOL_DIRS[name]:
                continue
            where[name].append(rel)
    return where


def duplicates() -> dict[str, list[str]]:
    return {
        name: files
        for name, files in definitions().items()
        if len(files) > 1 and name not in ALLOWED_PER_MODULE
    }


def long_files() -> set[str]:
    """Modules of builder/ and trainer/ over MAX_LINES whose docstring does not say why."""
    out = set()
    for top in ("builder", "trainer"):
        for path in sorted((REPO / top).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if len(text.splitlines()) <= MAX_LINES:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if not any(LONG_MARKER in line.lower() for line in doc.splitlines()):
                out.add(path.relative_to(REPO).as_posix())
    return out


def test_the_definition_walk_sees_the_names_it_must() -> None:
    where = definitions()
    assert where["PREFIX"] == ["builder/spec/labels.py"]
    assert "builder/facts/gpus.py" in where["CC"]
    assert "builder/spec/trainer_version.py" in where["trainer_version"]
    assert "register" not in where or all("/commands/" not in f for f in where["register"])


def test_no_public_name_is_defined_in_two_builder_modules() -> None:
    found = duplicates()
    offenders = {n: f for n, f in found.items() if n not in PENDING_DUPLICATES}
    assert offenders == {}, "defined in more than one builder/ module (rename one side)"
    stale = sorted(PENDING_DUPLICATES - set(found))
    assert stale == [], "no longer duplicated: remove from PENDING_DUPLICATES"


def test_no_module_is_over_400_lines_without_saying_why() -> None:
    found = long_files()
    offenders = sorted(found - PENDING_LONG)
    assert offenders == [], (
        f"over {MAX_LINES} lines with no '{LONG_MARKER}' reason in the docstring"
    )
    stale = sorted(PENDING_LONG - found)
    assert stale == [], "split or explained: remove from PENDING_LONG"


LABEL_NAMESPACES = ("io.trainimg", "org.opencontainers", "com.nvidia")


def label_spellings() -> list[str]:
    """String literals (docstrings aside) of builder/, trainer/ and scripts/ outside
    builder/spec/labels.py that spell a label namespace: each should be a labels.py constant."""
    out = []
    for top in ("builder", "trainer", "scripts"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == "builder/spec/labels.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(
                    node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
                )
                and node.body
                and isinstance(node.body[0], ast.Expr)
            }
            out += [
                f"{rel}:{node.lineno}: {node.value[:60]!r}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and any(ns in node.value for ns in LABEL_NAMESPACES)
            ]
    return out


def test_label_keys_are_spelled_only_in_labels_py() -> None:
    assert label_spellings() == []


# No file over 600 lines, no function over 80 (def line to last line, decorators aside), in the
# Python of every tree the project writes.
SIZE_ROOTS = ("builder", "trainer", "tests", "benchmarks", "scripts")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
# Known to offend, to be split; an entry that no longer offends must be removed.
PENDING_LONG_FUNCTIONS: set[str] = set()


def long_functions(source: str, rel: str) -> dict[str, int]:
    """'rel:name' -> lines, for every function or method (nested ones too) over the limit."""
    return {
        f"{rel}:{node.name}": node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    }


def oversized() -> tuple[dict[str, int], dict[str, int]]:
    """(files over MAX_FILE_LINES, functions over MAX_FUNCTION_LINES) of SIZE_ROOTS."""
    files: dict[str, int] = {}
    functions: dict[str, int] = {}
    for top in SIZE_ROOTS:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            text = path.read_text(encoding="utf-8")
            if len(text.splitlines()) > MAX_FILE_LINES:
                files[rel] = len(text.splitlines())
            functions |= long_functions(text, rel)
    return files, functions


def test_the_size_walk_measures_functions_from_def_to_last_line() -> None:
    def source(body_lines: int) -> str:
        def body(indent: str) -> str:
            return "".join(f"{indent}x{i} = {i}\n" for i in range(body_lines))

        method = f"class C:\n    async def m(self):\n{body(' ' * 8)}"
        return f"@decorator\ndef f():\n{body(' ' * 4)}\n\n{method}"

    assert long_functions(source(MAX_FUNCTION_LINES - 1), "m.py") == {}
    over = source(MAX_FUNCTION_LINES)
    assert long_functions(over, "m.py") == {
        "m.py:f": MAX_FUNCTION_LINES + 1,
        "m.py:m": MAX_FUNCTION_LINES + 1,
    }
    nested = "def outer():\n    def inner():\n" + "".join(
        f"        y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES)
    )
    assert set(long_functions(nested, "n.py")) == {"n.py:outer", "n.py:inner"}


def test_no_file_over_600_lines_and_no_function_over_80() -> None:
    files, functions = oversized()
    assert files == {}, f"over {MAX_FILE_LINES} lines: split by concept"
    offenders = {k: n for k, n in functions.items() if k not in PENDING_LONG_FUNCTIONS}
    assert offenders == {}, f"functions over {MAX_FUNCTION_LINES} lines: split by concept"
    stale = sorted(PENDING_LONG_FUNCTIONS - set(functions))
    assert stale == [], "split: remove from PENDING_LONG_FUNCTIONS"

"""A project directory: matrix.yaml, its templates and images/, loaded and checked once."""

from __future__ import annotations

import datetime as dt
import fnmatch
from dataclasses import dataclass
from pathlib import Path

from builder.errors import MatrixError, TrainimgError
from builder.matrix.expand import Expansion, expand
from builder.matrix.load import load_matrix
from builder.matrix.model import Cell, Matrix
from builder.spec.cell_hash import with_cell_hashes

DEFAULT_MATRIX = "matrix.yaml"


@dataclass(frozen=True)
class Workspace:
    root: Path
    matrix: Matrix
    expansion: Expansion
    today: dt.date

    @property
    def cells(self) -> tuple[Cell, ...]:
        return self.expansion.cells

    def cell(self, name: str) -> Cell:
        found = self.expansion.find(name)
        if found is not None:
            return found
        why = self.expansion.find_excluded(name)
        if why is not None:
            raise TrainimgError(
                f"cell {name!r} is excluded by group {why.group!r}: "
                f"[{why.reason.code}] {why.reason.text}"
            )
        raise TrainimgError(f"no cell named {name!r} in {self.matrix.path}; {self.hint(name)}")

    def hint(self, name: str) -> str:
        """`did you mean: A, B?` (the cells nearest `name` by edit distance), else the list."""
        names = [c.name for c in self.cells]
        if is_glob(name):  # 'rocky8-*': the nearest literal prefix, with the same wildcards
            cut = next(i for i, c in enumerate(name) if c in GLOB_CHARS)
            prefixes = sorted({n[:cut] for n in names if cut})
            near = [f"'{p}{name[cut:]}'" for p in closest(name[:cut], prefixes)]
        else:
            near = closest(name, names)
        if near:
            return f"did you mean {' or '.join(near)}?"
        first = ", ".join(names[:5])
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        return f"cells: {first}{more} (`trainimg matrix list`; globs like 'rocky9-*' work too)"

    def select(self, names: list[str]) -> tuple[Cell, ...]:
        """The cells `names` name, in order, once each; a name with `*`, `?` or `[` is a glob
        (fnmatch, case-sensitive) that must match at least one cell. No names: every cell."""
        if not names:
            return self.cells
        out: dict[str, Cell] = {}
        for name in names:
            if not is_glob(name):
                out.setdefault(name, self.cell(name))
                continue
            hits = [c for c in self.cells if fnmatch.fnmatchcase(c.name, name)]
            if not hits:
                raise TrainimgError(
                    f"{name!r} matches no cell of {self.matrix.path}; {self.hint(name)}"
                )
            for cell in hits:
                out.setdefault(cell.name, cell)
        return tuple(out.values())


GLOB_CHARS = frozenset("*?[")


def is_glob(name: str) -> bool:
    return any(c in GLOB_CHARS for c in name)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein: insertions, deletions and substitutions that turn `a` into `b`."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def closest(name: str, names: list[str], most: int = 3) -> list[str]:
    """Up to `most` of `names` within a typo's reach of `name` (a sixth of its length, at least
    2 edits) and at most 2 edits further than the nearest, nearest first."""
    reach = max(2, len(name) // 6)
    scored = sorted((edit_distance(name, n), n) for n in names)
    if not scored or scored[0][0] > reach:
        return []
    best = scored[0][0]
    return [n for d, n in scored if d <= min(reach, best + 2)][:most]


def find_matrix(start: Path | None = None) -> Path | None:
    """matrix.yaml in `start` (default: the current directory) or the nearest directory above
    it, as git finds its repository: a command run in images/ or trainer/ still finds it."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / DEFAULT_MATRIX).is_file():
            return d / DEFAULT_MATRIX
    return None


def open_workspace(
    matrix_path: str | Path = DEFAULT_MATRIX, today: dt.date | None = None, *, strict: bool = True
) -> Workspace:
    """Load, expand and (when strict) refuse a matrix whose cells break a rule. The default
    name is looked for here and in the directories above (find_matrix)."""
    path = Path(matrix_path)
    if str(matrix_path) == DEFAULT_MATRIX and not path.exists():
        path = find_matrix() or path
    day = today or dt.date.today()
    matrix = load_matrix(path)
    expansion = with_cell_hashes(expand(matrix), matrix.project)
    _check_defaults(matrix, expansion)
    if strict:
        # imported here: a command that only lists (strict=False) does not load the rules
        from builder.judgement.matrix import first_error

        err = first_error(matrix, expansion, day)
        if err is not None:
            raise err
    return Workspace(path.resolve().parent, matrix, expansion, day)


def _check_defaults(matrix: Matrix, expansion: Expansion) -> None:
    """project.default_cell (and default_gpu_cell) must name cells the matrix produces."""
    wanted = (
        ("default_cell", matrix.project.default_cell, None),
        ("default_gpu_cell", matrix.project.default_gpu_cell, "cuda"),
    )
    for key, name, accelerator in wanted:
        if name is None:
            continue
        cell = expansion.find(name)
        keypath = f"project.{key}"
        line = matrix.lines.get(keypath)
        if cell is None:
            why = f"{name!r} is not a cell of this matrix (see `trainimg matrix list --all`)"
            raise MatrixError(matrix.path, why, keypath, line)
        if accelerator and cell.accelerator != accelerator:
            why = f"{name!r} is a {cell.accelerator} cell; this key names a {accelerator} cell"
            raise MatrixError(matrix.path, why, keypath, line)

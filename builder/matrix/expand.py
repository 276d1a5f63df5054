"""Groups -> cells: the cartesian product of each group's axes, minus its exclusions."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from packaging.version import Version

from builder.errors import MatrixError
from builder.facts.cuda import cuda_tag
from builder.matrix import validate as v
from builder.matrix.model import Cell, Excluded, Group, Matrix
from builder.matrix.yamlnodes import keypath_join


@dataclass(frozen=True)
class Expansion:
    cells: tuple[Cell, ...]
    excluded: tuple[Excluded, ...]

    def find(self, name: str) -> Cell | None:
        return next((c for c in self.cells if c.name == name), None)

    def find_excluded(self, name: str) -> Excluded | None:
        return next((c for c in self.excluded if c.name == name), None)


def expand(matrix: Matrix) -> Expansion:
    cells: list[Cell] = []
    excluded: list[Excluded] = []
    for index, group in enumerate(matrix.groups):
        for cell in _group_cells(matrix, index, group):
            values = cell.axis_values()
            rule = next((e for e in group.exclude if e.excludes(values)), None)
            if rule is None:
                cells.append(cell)
            else:
                excluded.append(Excluded(cell.name, group.name, values, rule.reason))
    seen: dict[str, Cell] = {}
    for cell in cells:
        other = seen.get(cell.name)
        if other is not None:
            a, b = other.axis_values(), cell.axis_values()
            differ = [k for k in a if a[k] != b[k]]
            detail = ", ".join(f"{k} {a[k]} vs {b[k]}" for k in differ) or "identical values"
            fields = " or ".join(f"{{{k}}}" for k in differ) or "a field"
            raise MatrixError(
                matrix.path,
                f"duplicate cell name {cell.name!r} (groups {other.group!r} and {cell.group!r}; "
                f"{detail}): add {fields} to name_format {matrix.project.name_format!r}",
                "project.name_format",
                matrix.lines.get("project.name_format"),
            )
        seen[cell.name] = cell
    return Expansion(tuple(cells), tuple(excluded))


def _group_cells(matrix: Matrix, index: int, group: Group) -> list[Cell]:
    gkp = keypath_join("groups", index)
    axes = list(group.axes)
    out = []
    for combo in itertools.product(*(group.axes[a] for a in axes)):
        values = dict(zip(axes, combo, strict=True))
        origin = {a: keypath_join(f"{gkp}.axes.{a}", group.axes[a].index(values[a])) for a in axes}
        accelerator = values["accelerator"]
        cuda = matrix.cuda[values["cuda"]] if "cuda" in values else None
        driver = matrix.drivers[values["driver"]] if "driver" in values else None
        build = cuda_tag(cuda.version) if cuda is not None else "cpu"
        torch = Version(f"{values['torch']}+{build}")
        fields = {
            **values,
            "accelerator": build if accelerator == "cuda" else "cpu",
            "driver": values.get("driver", "nodriver"),
            "cuda": values.get("cuda", "nocuda"),
        }
        name = matrix.project.name_format.format(**fields)
        if not v.CELL_NAME.matches(name):
            raise MatrixError(
                matrix.path,
                f"name_format gives {name!r}, which is not a valid cell name "
                f"(must match {v.CELL_NAME.regex.pattern})",
                "project.name_format",
                matrix.lines.get("project.name_format"),
            )
        cell = Cell(
            name=name,
            group=group.name,
            os=matrix.oses[values["os"]],
            accelerator=accelerator,
            driver=driver,
            cuda=cuda,
            gcc=values["gcc"],
            python=values["python"],
            torch=torch,
            fp8=values["fp8"],
            flavour=values["flavour"],
            gpus=group.gpus,
            python_packages=matrix.python_packages,
            origin=origin,
        )
        out.append(cell)
    return out

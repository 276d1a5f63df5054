"""`trainimg build --plan`: every problem of every selected cell at once, nothing built - the
drifted Containerfile, the wheelhouse, the stage network and the base image, per cell, with
the build's own messages; exit 2 with problems, 0 without."""

from __future__ import annotations

from pathlib import Path

from builder.build.plan import BuildOptions
from builder.build.problems import cell_problems, plan_lines, shared_problems
from builder.workspace import open_workspace
from tests.fake_engine import FakeEngine
from tests.helpers import REPO, MakeProject, RunCli

ROCKY = "rocky9-cu128-py3.12-torch2.11.0-runtime"
DEBIAN = "debian12-cpu-py3.11-torch2.13.0-runtime"


def test_plan_lists_every_cells_problems_and_builds_nothing(
    make_project: MakeProject, run_cli: RunCli, tmp_path: Path
) -> None:
    matrix = make_project()
    drifted = matrix.parent / "images" / ROCKY / "Containerfile"
    drifted.write_text(drifted.read_text() + "# edited by hand\n")
    empty = tmp_path / "wheels"
    empty.mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = run_cli(
        "build", "--matrix", str(matrix), "rocky9-cu128-*", DEBIAN, "--plan",
        "--url", f"unix://{tmp_path}/no-engine.sock", "--wheelhouse", str(empty),
        "--network", "none", "--trainer", str(REPO / "trainer"),
    )  # fmt: skip
    assert res.code == 2, res.err
    lines = res.out.splitlines()
    selected = open_workspace(matrix).select(["rocky9-cu128-*", DEBIAN])
    heads = [line for line in lines if not line.startswith((" ", "every cell:", "plan:"))]
    assert [h.split(":")[0] for h in heads] == [c.name for c in selected]  # every cell, in order
    assert sum("no engine answers at unix://" in line for line in lines) == 1  # once, shared
    sections: dict[str, str] = {}
    for line in lines:
        if line in heads:
            name = line.split(":")[0]
            sections[name] = ""
        elif line.startswith("  - "):
            sections[name] += line + "\n"
    rocky, debian = sections[ROCKY], sections[DEBIAN]
    assert "differs from a fresh render" in rocky  # the drift, on its own cell only
    assert res.out.count("differs from a fresh render") == 1
    assert rocky.count(f"wheelhouse {empty} lacks") == 1
    assert "--network none cannot build it" in rocky  # an EL cell's os stage needs a network
    assert "--network none" not in debian  # a Debian cell installs no OS packages
    assert all(f"wheelhouse {empty} lacks" in text for text in sections.values())
    assert lines[-1].startswith(f"plan: {len(selected)} cell(s), {len(selected)} with problems")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_a_cell_with_nothing_in_its_way_is_ok_and_a_missing_local_base_is_named(
    make_project: MakeProject,
) -> None:
    ws = open_workspace(make_project())
    (rocky,) = ws.select([ROCKY])
    (debian,) = ws.select([DEBIAN])
    engine = FakeEngine()
    engine.store.add(rocky.os.base_ref)
    opts = BuildOptions(wheelhouse=None, network="host", trainer_dir=REPO / "trainer")
    got = cell_problems(ws, [rocky, debian], engine, opts)
    assert got[rocky.name] == []
    (missing,) = got[debian.name]
    assert f"base image {debian.os.base_ref} is not in the engine's store" in missing
    assert "trainimg base" in missing
    shared = shared_problems(ws, opts)
    assert len(shared) == 1 and "hash-locked wheelhouse" in shared[0]
    # --pull fetches a registry base: not a problem; a local base is never pulled
    pulled = cell_problems(ws, [rocky, debian], FakeEngine(), BuildOptions(pull=True))
    assert not any("base image" in p for p in pulled[rocky.name])
    assert any("trainimg base" in p for p in pulled[debian.name])
    lines = plan_lines([], {rocky.name: [], debian.name: ["x"]})
    assert lines == [f"{rocky.name}: ok", f"{debian.name}: 1 problem(s)", "  - x",
                     "plan: 2 cell(s), 1 with problems"]  # fmt: skip
    assert plan_lines([], {rocky.name: []})[-1].endswith("nothing would stop a build")

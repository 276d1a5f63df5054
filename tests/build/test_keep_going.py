"""`trainimg build --keep-going` through the CLI, on the tests' in-memory engine (no container
engine): a cell that cannot start and a cell whose build fails stop none of the others, the
end names every failed cell with its reason, and the exit code is the one a single failure
gives. With COLUMNS=80 the summary fits 80 columns and every cell name in it is whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.build import lock
from builder.commands import build_cmd
from builder.engines.base import BuildFailed
from builder.workspace import open_workspace
from tests.build.test_wheelhouse import fake_closures, locked
from tests.conftest import write_standin_trainer
from tests.fake_engine import FakeEngine, FakeStore
from tests.helpers import MakeProject, RunCli

BUILT = "debian12-cpu-py3.11-torch2.13.0-runtime"
FAILS = "debian12-cpu-py3.11-torch2.13.0-devel"  # its build fails
REFUSED = "rocky9-cu128-py3.12-torch2.11.0-runtime"  # dnf needs a network: --network none


@dataclass
class FakeEndpoint:
    """What discovery returns, answering with the in-memory engine."""

    store: FakeStore
    kind: str = "podman"
    url: str = "fake://"
    source: str = "the test"

    def connect(self) -> FakeEngine:
        return FakeEngine(self.store)

    def close(self) -> None:
        pass


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> FakeStore:
    s = FakeStore()
    monkeypatch.setattr(build_cmd, "discover", lambda search, log: FakeEndpoint(s))
    monkeypatch.setenv("COLUMNS", "80")
    return s


def test_keep_going_builds_the_rest_and_names_every_failure(
    make_project: MakeProject, run_cli: RunCli, store: FakeStore, tmp_path: Path
) -> None:
    matrix = make_project()
    ws = open_workspace(matrix)
    cells = ws.select([BUILT, FAILS, REFUSED])
    for cell in cells:
        store.add(cell.os.base_ref)
    wheels = locked(fake_closures(tmp_path / "wheelhouse", cells, ws.matrix.project))
    lock_path = tmp_path / "lock.json"

    def fail(context: Path) -> None:
        if f"# cell: {FAILS}\n".encode() in context.read_bytes():
            raise BuildFailed("RUN step failed: exit status 3", ["boom"])

    store.on_build = fail
    head = ["build", "--matrix", str(matrix)]
    opts = [
        "--network", "none", "--wheelhouse", str(wheels),
        "--trainer", str(write_standin_trainer(tmp_path / "t")),
        "--lock", str(lock_path), "--repository", "localhost/kg",
    ]  # fmt: skip
    argv = [*head, BUILT, FAILS, REFUSED, *opts]
    without = run_cli(*argv)  # the first cell that cannot start stops everything, as before
    assert without.code == 2 and "--network none cannot build it" in without.err
    assert store.builds == 0

    res = run_cli(*argv, "--keep-going")
    assert res.code == 2, res.err  # a cell could not start: what that refusal alone gives
    assert store.builds == 2  # BUILT and FAILS were built; REFUSED never reached the engine
    assert sorted(lock.read(lock_path)) == [BUILT]
    assert res.out == f"localhost/kg:{BUILT} {store.names[f'localhost/kg:{BUILT}']}\n"
    failures = " ".join(res.err[res.err.index(f"FAILED {FAILS}") :].split())
    assert f"FAILED {FAILS}: RUN step failed: exit status 3" in failures
    assert f"FAILED {REFUSED}: cell {REFUSED} installs OS packages" in failures
    assert f"2 of 3 cell(s) failed: {FAILS}, {REFUSED}" in res.err
    table = res.err[res.err.index("trainimg build") : res.err.index(f"FAILED {FAILS}")]
    assert all(len(line) <= 80 for line in table.splitlines()), table
    for name, result in ((BUILT, "built"), (FAILS, "failed"), (REFUSED, "failed")):
        (row,) = [line for line in table.splitlines() if f" {name} " in line]  # whole, once
        assert result in row

    again = run_cli(*head, BUILT, FAILS, *opts, "--keep-going")
    assert again.code == 1, again.err  # only a build failed: what one failed build gives
    assert "1 of 2 cell(s) failed" in again.err and store.builds == 3  # BUILT: up to date

"""tests/strict_ci.py on small test files, run by pytest's own pytester: under CI=true a skip
without an allowed reason fails the run and names the test; without CI the same test skips with
its reason; both end with the table of skips."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.strict_ci import ALLOWED_SKIP_REASONS, NVIDIA_DRIVER, allowed_skip

INNER_ARGS = ("-p", "tests.strict_ci", "-p", "no:hypothesispytest", "-p", "no:testinfra")
MARKERS = """
[pytest]
markers =
    gpu: needs an NVIDIA GPU
"""
SKIPS = """
import pytest

def test_needs_a_tool():
    pytest.skip("frobnicate is not installed: run scripts/setup.sh")

def test_needs_a_gpu():
    pytest.skip("needs an NVIDIA GPU (CUDA unavailable)")

def test_runs():
    assert 1 + 1 == 2
"""


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeini(MARKERS)
    monkeypatch.delenv("CI", raising=False)
    return pytester


def pytest_run(pytester: pytest.Pytester) -> pytest.RunResult:
    """pytest in this process on pytester's files, with the strict-CI hooks and no other
    plugin (hypothesis' would import itself anew each time: seconds)."""
    return pytester.runpytest(*INNER_ARGS)


def in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")


def test_under_ci_a_skip_without_an_allowed_reason_fails_naming_the_test(
    run: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run.makepyfile(test_some=SKIPS)
    in_ci(monkeypatch)
    result = pytest_run(run)
    result.assert_outcomes(passed=1, skipped=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*test_some.py::test_needs_a_tool did not run: skipped for 'frobnicate is not "
            "installed: run scripts/setup.sh', which is not a reason CI accepts*",
            "*= skips and their reasons (CI=true) =*",
            "test_some.py::test_needs_a_gpu   skipped  needs an NVIDIA GPU (CUDA unavailable)",
            "test_some.py::test_needs_a_tool  FAILED   frobnicate is not installed: run "
            "scripts/setup.sh",
        ]
    )
    result.stdout.fnmatch_lines(["*slowest 25 durations*"])


def test_without_ci_the_same_tests_skip_with_their_reason(run: pytest.Pytester) -> None:
    run.makepyfile(test_some=SKIPS)
    result = pytest_run(run)
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*= skips and their reasons =*",
            "test_some.py::test_needs_a_gpu   skipped  needs an NVIDIA GPU (CUDA unavailable)",
            "test_some.py::test_needs_a_tool  skipped  frobnicate is not installed: run "
            "scripts/setup.sh",
        ]
    )
    result.stdout.no_fnmatch_line("*slowest*durations*")


def test_under_ci_a_fixture_that_cannot_set_up_fails_every_test_on_it(
    run: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run.makepyfile(
        test_disk="""
        import pytest

        @pytest.fixture(scope="session")
        def big_image():
            pytest.skip("needs ~30 GB free disk; /work has 12.0 GB")

        def test_one(big_image):
            pass

        def test_two(big_image):
            pass
        """
    )
    in_ci(monkeypatch)
    result = pytest_run(run)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_disk.py::test_one did not run: skipped for 'needs ~30 GB free disk*",
            "*test_disk.py::test_two did not run: skipped for 'needs ~30 GB free disk*",
        ]
    )


def test_under_ci_a_gpu_test_skips_for_any_reason_only_where_there_is_no_gpu(
    run: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run.makepyfile(
        test_gpu="""
        import pytest

        @pytest.mark.gpu
        def test_engine():
            pytest.skip("Transformer Engine not installed")
        """
    )
    in_ci(monkeypatch)
    result = pytest_run(run)
    if NVIDIA_DRIVER.exists():  # a GPU machine: a missing package there is a failure
        result.assert_outcomes(failed=1)
    else:
        result.assert_outcomes(skipped=1)
        assert result.ret == pytest.ExitCode.OK


def test_under_ci_a_module_skipped_at_import_fails_the_run(
    run: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run.makepyfile(
        test_mod="""
        import pytest

        pytest.importorskip("no_such_module_here")

        def test_never():
            pass
        """
    )
    in_ci(monkeypatch)
    result = pytest_run(run)
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test_mod.py did not run: skipped for *no_such_module_here*"])


def test_under_ci_xfail_is_not_a_skip(
    run: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run.makepyfile(
        test_known="""
        import pytest

        @pytest.mark.xfail(reason="a known bug", strict=True)
        def test_bug():
            assert False
        """
    )
    in_ci(monkeypatch)
    result = pytest_run(run)
    result.assert_outcomes(xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line("*skips and their reasons*")


def test_an_empty_ci_run_is_not_a_pass(
    run: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest's exit 5 (nothing collected) stays non-zero: .ci/run cannot pass on no tests."""
    run.makepyfile(test_nothing="X = 1\n")
    in_ci(monkeypatch)
    result = pytest_run(run)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.mark.parametrize(
    ("reason", "marked_gpu", "gpu_here", "allowed"),
    [
        ("needs an NVIDIA GPU (CUDA unavailable)", False, False, True),
        ("needs a device the workplace does not have: an InfiniBand HCA", False, False, True),
        ("podman, runc not installed: run scripts/setup.sh", False, False, False),
        ("cannot fill the wheelhouse for a cell: pip exit 1", False, False, False),
        ("Transformer Engine not installed", True, False, True),
        ("Transformer Engine not installed", True, True, False),
    ],
)
def test_the_allowed_reasons(reason: str, marked_gpu: bool, gpu_here: bool, allowed: bool) -> None:
    assert allowed_skip(reason, marked_gpu, gpu_here) is allowed
    assert len(ALLOWED_SKIP_REASONS) == 2


def test_ci_runs_strict() -> None:
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert lines.index("export CI=true") < lines.index("exec scripts/test.sh")

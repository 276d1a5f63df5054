"""verify's line per check as it finishes (builder/verify/live.py), from the plugin run on a
tiny suite in a real pytest process, beside the Collector whose JSON report stays the same."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import REPO

_SUITE = textwrap.dedent(
    """
    import time
    import pytest

    def test_versions():
        pass

    def test_gpu_visible():
        pytest.skip("no GPU attached")

    def test_labels():
        assert 1 == 2, "label io.trainimg.cell is missing"

    def test_training_bf16():
        time.sleep(0.5)
    """
)

# The suite run as runner.run_suite runs it: no terminal reporter, the Collector and the lines.
_RUN = textwrap.dedent(
    """
    import json, sys
    import pytest
    from builder.progress import Progress
    from builder.verify.live import CheckLines, stderr_beside_capture
    from builder.verify.report import Collector
    collector = Collector()
    quiet = sys.argv[2] == "quiet"
    lines = CheckLines(collector, Progress(stderr_beside_capture(), quiet=quiet, heartbeat_s=0.2))
    args = [sys.argv[1], "-p", "no:terminal", "-p", "no:cacheprovider", "-c", "/dev/null"]
    # pytest captures fd 2 while a check runs, as it does in verify's own run
    code = pytest.main(args, plugins=[collector, lines])
    print(json.dumps([c.as_json()["outcome"] for c in collector.results()]))
    sys.exit(int(code))
    """
)


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "test_tiny.py"
    suite.write_text(_SUITE)
    return subprocess.run(
        [sys.executable, "-c", _RUN, str(suite), mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.mark.integration
def test_one_line_per_check_as_it_finishes(tmp_path: Path) -> None:
    proc = _run(tmp_path, "loud")
    assert proc.returncode == 1, proc.stderr  # a check failed: pytest's own code, unchanged
    lines = proc.stderr.splitlines()
    said = [line.split(" (")[0] for line in lines if not line.startswith("verify ")]
    assert said == ["PASS  versions", "SKIP  gpu_visible", "FAIL  labels", "PASS  training_bf16"]
    assert any(line.endswith(": no GPU attached") for line in lines)
    assert any("label io.trainimg.cell is missing" in line for line in lines)
    # the long check was a progress step: its heartbeat came while it ran
    assert "verify training_bf16: still running (0 s)" in lines
    assert not any("\x1b" in line for line in lines)
    assert json.loads(proc.stdout) == ["passed", "skipped", "failed", "passed"]


@pytest.mark.integration
def test_quiet_shows_no_check_lines(tmp_path: Path) -> None:
    proc = _run(tmp_path, "quiet")
    assert proc.returncode == 1
    assert proc.stderr == ""
    assert json.loads(proc.stdout) == ["passed", "skipped", "failed", "passed"]

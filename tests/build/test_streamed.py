"""Long tools streamed through a progress step (builder/build/streamed.py), as `trainimg base`
and `trainimg wheelhouse` run them: real processes, the output read as it comes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from builder.build.base_image import BaseImageError, _tool
from builder.build.streamed import run_streamed
from builder.build.wheelhouse import streamed_runner
from builder.progress import SILENT, Progress
from tests.helpers import REPO

# A stand-in for debootstrap through base's own code path (_tool: the step, its rootfs-size
# measure, the deadline): silent for ~21 s, writing 3 MB into the root on the way.
_SILENT_DEBOOTSTRAP = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from builder.build.base_image import _tool
    from builder.progress import Progress
    root = Path(sys.argv[1])
    root.mkdir()
    script = f"sleep 2; head -c 3000000 /dev/zero > {root}/blob; sleep 19"
    _tool(["sh", "-c", script], "debootstrap bookworm", Progress(), root)
    """
)


def _timed_lines(proc: subprocess.Popen[str]) -> list[tuple[float, str]]:
    assert proc.stderr is not None
    start = time.monotonic()
    lines = [(time.monotonic() - start, line.rstrip("\n")) for line in proc.stderr]
    lines.append((time.monotonic() - start, "<end>"))
    return lines


@pytest.mark.integration
@pytest.mark.slow  # 21 s: the one test that waits out the default heartbeat for real
def test_a_silent_21_s_step_shows_a_line_at_least_every_10_s(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SILENT_DEBOOTSTRAP, str(tmp_path / "root")],
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    timed = _timed_lines(proc)  # stderr is a pipe: the non-terminal (CI log) form
    assert proc.wait(timeout=60) == 0
    gaps = [b[0] - a[0] for a, b in zip([(0.0, "<start>"), *timed], timed, strict=False)]
    assert timed[-1][0] >= 20, timed  # it really ran that long
    assert max(gaps) <= 10, timed
    texts = [text for _, text in timed]
    assert any(t.startswith("debootstrap bookworm: ") and "3 MB written" in t for t in texts)
    assert texts[-2].startswith("debootstrap bookworm: done ("), texts
    assert not any("\x1b" in t for t in texts)


@pytest.mark.integration
def test_a_failing_tool_says_its_last_15_lines(tmp_path: Path) -> None:
    script = "for i in $(seq 30); do echo line$i; done; exit 3"
    with pytest.raises(BaseImageError, match=r"debootstrap bookworm failed \(3\)") as err:
        _tool(["sh", "-c", script], "debootstrap bookworm", SILENT, tmp_path)
    tail = str(err.value).splitlines()[1:]
    assert tail == [f"line{i}" for i in range(16, 31)]


@pytest.mark.integration
def test_the_deadline_kills_the_tool() -> None:
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_streamed(["sleep", "30"], SILENT.begin("sleep"), timeout=0.5)
    assert time.monotonic() - start < 10


class _Lines:
    """A stream that keeps what a Progress writes (thread-safe enough for a list)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.text.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@pytest.mark.integration
def test_pip_download_shows_its_lines_and_the_wheels_that_arrived(tmp_path: Path) -> None:
    dest = tmp_path / "wh"
    dest.mkdir()
    wheel = dest / "demo-1.0-py3-none-any.whl"
    fake_pip = (
        "import sys, time; print('Collecting demo==1.0', flush=True); "
        f"open({str(wheel)!r}, 'wb').write(b'x' * 2_000_000); time.sleep(0.8); "
        "print('Saved ./demo-1.0-py3-none-any.whl')"
    )
    stream = _Lines()
    run = streamed_runner(Progress(stream, heartbeat_s=0.2), dest)  # type: ignore[arg-type]
    proc = run([sys.executable, "-c", fake_pip])
    lines = "".join(stream.text).splitlines()
    assert proc.returncode == 0
    assert "pip download: Collecting demo==1.0" in lines
    assert any(f"1 wheel(s), 2 MB in {dest}" in line for line in lines), lines
    assert lines[-1].startswith(f"pip download: done: 1 wheel(s), 2 MB in {dest} (")

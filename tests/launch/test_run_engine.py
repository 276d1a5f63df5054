"""`trainimg run` against a real podman, through podman-py and through the docker SDK (podman's
Docker-compatible API; see conftest.docker_api_url): mounts, resume, `podman stop` of two
processes -> 143 with one checkpoint, a SIGKILLed `trainimg run` whose watchdog stops and
removes the container, and every refusal leaves no container behind."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from builder.spec.labels import RUN_LABEL
from tests.launch.conftest import free_port, shared_dir, spawn, trainimg

pytestmark = [pytest.mark.engine, pytest.mark.slow]

TINY = ("--preset", "bf16", "--device", "cpu", "--log-interval", "1", "--eval-interval", "0")


def _steps(ckpt: Path) -> list[str]:
    return sorted(p.name for p in ckpt.glob("step_*"))


@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_run_mounts_checkpoints_and_resumes(
    engine: str,
    run_image: str,
    podman_service: str,
    docker_api_url: str,
    tmp_path: Path,
    leftovers: Any,
) -> None:
    url = podman_service if engine == "podman" else docker_api_url
    data = shared_dir(tmp_path / "data", 0o755)
    (data / "run.yaml").write_text("train: {steps: 4, batch_size: 4}\n")
    ckpt = shared_dir(tmp_path / "ckpt")
    first = trainimg(
        url,
        "run",
        run_image,
        "--data",
        str(data),
        "--ckpt",
        str(ckpt),
        "--",
        "--config",
        "/data/run.yaml",
        "--stop-at",
        "2",
        *TINY,
        engine=engine,
    )
    assert first.code == 0, first.err
    assert "step 2/4" in first.out and _steps(ckpt) == ["step_00000002"]
    again = trainimg(
        url,
        "run",
        run_image,
        "--data",
        str(data),
        "--ckpt",
        str(ckpt),
        "--",
        "--config",
        "/data/run.yaml",
        "--resume",
        *TINY,
        engine=engine,
    )
    assert again.code == 0, again.err
    assert "step 3/4" in again.out and "step 1/4" not in again.out  # resumed, not restarted
    assert _steps(ckpt)[-1] == "step_00000004"


def _await_line(proc: Any, prefix: str, timeout: float = 300) -> list[str]:
    """Read the trainer's streamed stdout up to a line starting with `prefix`."""
    seen = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return seen
        assert time.monotonic() < deadline, f"no {prefix!r} in {timeout} s"
    raise AssertionError(f"the output ended without {prefix!r}: {''.join(seen)[-2000:]}")


def test_podman_stop_of_two_processes_then_a_dying_trainimg_run(
    run_image: str, podman_service: str, local_podman: Any, tmp_path: Path, leftovers: Any
) -> None:
    """`podman stop` of a 2-process container: 143, one complete checkpoint. Its resume
    continues; then `trainimg run` itself is SIGKILLed, and its watchdog stops the container
    (one more checkpoint) and removes it."""
    from trainer import checkpoint

    ckpt = shared_dir(tmp_path / "ckpt")
    name = f"trainimg-run-stop-{free_port()}"
    common = ("--stop-timeout", "60", "--ckpt", str(ckpt), "--nproc-per-node", "2")
    args = ("--steps", "100000", "--checkpoint-interval", "0", *TINY)
    proc = spawn(podman_service, "run", run_image, "--name", name, *common, "--", *args)
    _await_line(proc, "step 2/")
    local_podman.podman("stop", "--time", "60", name)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "trainer.launch: exit 143: stopped by SIGTERM" in err
    ((first, path),) = checkpoint.list_steps(ckpt)
    assert checkpoint.load(path).step == first  # complete: its sha256 matches
    again = spawn(podman_service, "run", run_image, *common, "--", *args, "--resume")
    seen = _await_line(again, f"step {first + 2}/")
    assert any(f"resumed from /ckpt/{path.name}" in line for line in seen), seen
    again.kill()  # SIGKILL: no finally of trainimg runs; its watchdog takes over
    again.communicate(timeout=30)
    deadline = time.monotonic() + 120
    while leftovers.containers(label=RUN_LABEL):
        assert time.monotonic() < deadline, "the watchdog did not stop the container"
        time.sleep(0.5)
    steps = [s for s, _ in checkpoint.list_steps(ckpt)]
    assert len(steps) == 2 and steps[-1] > first + 1, steps  # written on the watchdog's stop


def test_trainer_exit_codes_pass_through(
    run_image: str, podman_service: str, leftovers: Any
) -> None:
    bad = trainimg(podman_service, "run", run_image, "--", "--preset", "nope")
    assert bad.code == 2 and "nope" in bad.err
    nan = trainimg(
        podman_service, "run", run_image, "--", "--steps", "4", "--inject-fault", "nan@2", *TINY
    )
    assert nan.code == 3, nan.err


def test_refusals_say_why_and_leave_nothing(
    run_image: str, offline_base: str, podman_service: str, tmp_path: Path, leftovers: Any
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        cases = [
            (["--data", str(tmp_path / "missing")], "no such directory"),
            (["--data", str(private)], "cannot read it"),
            (["--nnodes", "2"], "needs --rdzv HOST:PORT"),
            (["--nnodes", "2", "--rdzv", f"127.0.0.1:{port}"], f"port {port} is already in use"),
        ]
        if not Path("/etc/cdi").is_dir() and not Path("/var/run/cdi").is_dir():
            cases.append((["--gpus", "all", "--no-check"], "nvidia-ctk cdi generate"))
        for flags, says in cases:
            done = trainimg(podman_service, "run", run_image, *flags, "--", "--steps", "1")
            assert done.code == 2, (flags, done.err)
            assert says in done.err and "Traceback" not in done.err, (flags, done.err)
    unlabelled = trainimg(podman_service, "run", offline_base, "--", "--steps", "1")
    assert unlabelled.code == 2 and "io.trainimg.trainer.version" in unlabelled.err


def test_dry_run_line_is_what_podman_runs(
    run_image: str, podman_service: str, tmp_path: Path, local_podman: Any, leftovers: Any
) -> None:
    import shlex

    ckpt = shared_dir(tmp_path / "ckpt")
    done = trainimg(
        podman_service,
        "run",
        run_image,
        "--dry-run",
        "--ckpt",
        str(ckpt),
        "--name",
        "trainimg-run-dry",
        "--",
        "--steps",
        "2",
        *TINY,
    )
    assert done.code == 0, done.err
    argv = shlex.split(done.out)
    assert argv[:3] == ["podman", "run", "--rm"] and argv[-2:] == ["--ckpt-dir", "/ckpt"]
    pasted = local_podman.podman(*argv[1:])  # the podman CLI, on the same isolated store
    assert "done: completed at step 2" in pasted
    assert json.loads((ckpt / "step_00000002" / "meta.json").read_text())["step"] == 2

"""The script `trainimg slurm` writes, submitted with sbatch to a real Slurm (slurmctld and two
slurmd from Debian's slurm-wlm, each node in a network namespace of its own: slurm_cluster.py).
The nodes pull the CPU cell's image by digest from a registry on the cluster's private link
and train with torchrun's c10d rendezvous across the namespaces (gloo over their veths):

- a job runs to the end, with the losses of one process;
- a job for a user without subordinate ids (nobody) fails fast on every node, naming the fix;
- the same with `--pyxis`, through a stand-in srun that runs each node's command inside the
  image with the job's environment, as pyxis does (tests/launch/pyxis/srun);
- a job Slurm's SIGTERM stops while its containers start (before the first step) exits 4,
  "stopped, nothing saved", and is not requeued;
- a job whose time limit is brought near once the trainer reports its first step gets Slurm's
  SIGTERM before the limit, every rank checkpoints and exits 143, the script requeues the job
  (its run wrote a new checkpoint), and the requeued job starts again by itself, resumes from
  that checkpoint (its first step is the one after it) and finishes.

After each job no container is left (each is named trainimg-JOB-STEP-NODE-rRESTART and removed
by its node's shell); at the end nothing is: no job, process in the namespaces, namespace,
link, daemon.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.engines.base import EngineError
from builder.spec.labels import RUN_LABEL
from tests.launch.conftest import REPO, losses, shared_dir
from tests.launch.slurm_cluster import SlurmCluster, missing_tools
from tests.registry.server import Registry

pytestmark = [pytest.mark.engine, pytest.mark.slow]

TOLERANCE = 2e-3  # docs/trainer.md: DDP/FSDP2 against one process, bf16
TINY = (
    "--preset", "bf16", "--device", "cpu", "--batch-size", "4", "--log-interval", "1",
    "--eval-interval", "0", "--parallel", "ddp",
)  # fmt: skip
PYXIS = Path(__file__).parent / "pyxis"  # the stand-in srun
GRACE = 60  # s: Slurm's SIGTERM this long before the limit (--signal=B:TERM@60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """Up for this module; down afterwards, failing the module if anything is left."""
    missing = missing_tools()
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: scripts/setup.sh installs slurm-wlm")
    c = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.up()
        yield c
    finally:
        left = c.down()
        assert not left, left


@pytest.fixture(scope="module")
def pushed(cluster: SlurmCluster, run_image: str, local_podman: Any) -> Iterator[str]:
    """The CPU image in a registry on the cluster's link, by digest (zstd: half the time of
    gzip here); the registry, and the names the pushes and pulls gave the image, go after."""
    reg = Registry(cluster.root / "registry", address=cluster.host_addr)
    reg.start()
    repo = f"{reg.host}/trainimg"
    digest_file = cluster.root / "digest"
    names = [f"{repo}:cpu"]
    try:
        local_podman.podman(
            # --remove-signatures: a signed pull of this image earlier in the session
            # (tests/registry/test_signing.py) gave it signatures a recompression would break
            "push", "--tls-verify=false", "--remove-signatures", "--compression-format", "zstd",
            "--digestfile", str(digest_file), run_image, names[0],
        )  # fmt: skip
        names.append(f"{repo}@{digest_file.read_text().strip()}")
        yield names[-1]
    finally:
        reg.stop()
        for name in names:
            local_podman.podman("rmi", name, check=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    """One process on this machine, the same torch and config: the losses to match."""
    metrics = tmp_path_factory.mktemp("ref") / "m.jsonl"
    subprocess.run(
        [sys.executable, "-m", "trainer", "train", *TINY, "--steps", "4", "--parallel", "none",
         "--metrics-file", str(metrics)],
        check=True, capture_output=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    return losses(metrics)


def _job_env(cluster: SlurmCluster, local_podman: Any, registry: str) -> dict[str, str]:
    """What sbatch exports to the job: the test's podman store, a registries.conf that lets
    the nodes pull over plain HTTP from the link's registry (an admin's setting), and gloo's
    interface inside the node namespaces."""
    conf = cluster.root / "registries.conf"
    conf.write_text(f'[[registry]]\nlocation = "{registry}"\ninsecure = true\n')
    return {
        **local_podman.env(),
        "CONTAINERS_REGISTRIES_CONF": str(conf),
        "GLOO_SOCKET_IFNAME": "eth0",
    }


@pytest.fixture(autouse=True)
def _clean_slate(cluster: SlurmCluster, local_podman: Any) -> Iterator[None]:
    """After each test, whatever its outcome: no job and no job container left for the next
    one (each test asserts its own leftovers; this keeps one failure from failing the rest)."""
    yield
    cluster.ctl("scancel", "--full", "--partition", cluster.name, check=False)
    deadline = time.monotonic() + 60
    while _running(local_podman) and time.monotonic() < deadline:
        time.sleep(1)
    for name in _job_containers(local_podman):
        local_podman.podman("rm", "--force", "--time", "0", name, check=False)


def _script(path: Path, *argv: str) -> Path:
    assert cli.main(["slurm", "-o", str(path), *argv]) == 0
    return path


def _await(
    cluster: SlurmCluster, job: str, states: set[str], timeout: float, out: Path
) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        info = cluster.job(job)
        if info["JobState"] in states:
            return info
        if time.monotonic() > deadline:
            pytest.fail(
                f"job {job} is {info['JobState']}, not {states}:\n"
                + _why(cluster, info, _read(out))
            )
        time.sleep(1)


def _await_text(cluster: SlurmCluster, job: str, out: Path, text: str, timeout: float) -> None:
    """Until the job's output shows `text`; failing with the output and Slurm's logs if the
    job ends first or the deadline passes."""
    deadline = time.monotonic() + timeout
    while not (out.exists() and text in out.read_text()):
        info = cluster.job(job)
        if info["JobState"] not in {"PENDING", "RUNNING", "CONFIGURING"} or (
            time.monotonic() > deadline
        ):
            pytest.fail(f"no {text!r} from job {job}:\n" + _why(cluster, info, _read(out)))
        time.sleep(1)


def _seconds(run_time: str) -> int:
    """Slurm's [days-]hours:minutes:seconds (or minutes:seconds) as seconds."""
    days, _, clock = run_time.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def _read(out: Path) -> str:
    return out.read_text() if out.exists() else "(no output yet)"


def _why(cluster: SlurmCluster, info: dict[str, str], text: str) -> str:
    """What a failing assertion shows: the job's state and reason, the output's tail and the
    daemons' logs."""
    keys = ("JobState", "Reason", "ExitCode", "Restarts", "RunTime", "TimeLimit", "NodeList")
    state = " ".join(f"{k}={info.get(k)}" for k in keys)
    return f"{state}\n--- output ---\n{text[-3000:]}\n{cluster.logs()}"


def _job_containers(local_podman: Any) -> list[str]:
    """The names of the containers of trainimg jobs, running or not."""
    names: str = local_podman.podman(
        "ps", "-a", "--filter", f"label={RUN_LABEL}", "--format", "{{.Names}}"
    )
    return names.split()


def _no_containers(local_podman: Any) -> None:
    """No container of the job is left, and no root filesystem of one is still mounted."""
    names = _job_containers(local_podman)
    assert names == [], names
    overlay = f"{local_podman.root}/storage/overlay/"
    mounted = [
        line.split()[4]
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if line.split()[4].startswith(overlay) and line.split()[4].endswith("/merged")
    ]
    assert mounted == [], mounted


def test_a_two_node_job_trains_like_one_process(
    cluster: SlurmCluster,
    pushed: str,
    local_podman: Any,
    reference: dict[int, float],
    tmp_path: Path,
) -> None:
    ckpt = shared_dir(tmp_path / "ckpt")
    script = _script(
        tmp_path / "job.sbatch", pushed, "--nodes", "2", "--gpus-per-node", "0",
        "--cpus-per-node", "1", "--time", "10", "--ckpt", str(ckpt), "--",
        *TINY, "--steps", "4", "--metrics-file", "/ckpt/m.jsonl",
    )  # fmt: skip
    out = tmp_path / "job.out"
    env = _job_env(cluster, local_podman, pushed.split("/", 1)[0])
    job = cluster.ctl("sbatch", "--parsable", "-o", str(out), str(script), env=env).stdout.strip()
    info = _await(cluster, job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 300, out)
    text = out.read_text()
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", text[-3000:]
    assert "done: completed at step 4" in text, text[-3000:]
    assert info["NodeList"] == f"{cluster.name}-n[0-1]"
    got = losses(ckpt / "m.jsonl")
    assert sorted(got) == [1, 2, 3, 4]
    for step, loss in got.items():
        assert abs(loss - reference[step]) <= TOLERANCE, (step, loss, reference[step])
    assert (ckpt / "step_00000004" / "meta.json").is_file()
    _no_containers(local_podman)


def _running(local_podman: Any) -> list[str]:
    """The names of the running containers of trainimg jobs."""
    names: str = local_podman.podman(
        "ps", "--filter", f"label={RUN_LABEL}", "--filter", "status=running", "--format",
        "{{.Names}}",
    )  # fmt: skip
    return names.split()


def _catches_sigterm(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def _launchers_listen(local_podman: Any, names: list[str]) -> bool:
    """Each container's init (the launcher as pid 1) and the launcher it forked handle SIGTERM:
    until then the kernel drops a SIGTERM to the container's pid 1, and the stop is lost."""
    with contextlib.suppress(OSError, ValueError, EngineError):  # gone, or not started yet
        for name in names:
            pid = int(local_podman.podman("inspect", "--format", "{{.State.Pid}}", name))
            children = [
                int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            ]
            if not (children and all(_catches_sigterm(p) for p in [pid, *children])):
                return False
        return True
    return False


def test_a_two_node_pyxis_job_runs_the_trainer_inside_the_image(
    cluster: SlurmCluster,
    pushed: str,
    local_podman: Any,
    reference: dict[int, float],
    tmp_path: Path,
) -> None:
    """`--pyxis`: the script's `srun --container-image=...` through a stand-in of srun with
    pyxis (tests/launch/pyxis/srun) that runs each node's command inside the image with the
    job's environment, as pyxis does: nothing the node's command calls may be a host tool
    (the defect: run_node asked scontrol, which the image has not, for the node's address)."""
    ckpt = shared_dir(tmp_path / "ckpt")
    script = _script(
        tmp_path / "job.sbatch", pushed, "--pyxis", "--nodes", "2", "--gpus-per-node", "0",
        "--cpus-per-node", "1", "--time", "10", "--ckpt", str(ckpt), "--",
        *TINY, "--steps", "4", "--metrics-file", "/ckpt/m.jsonl",
    )  # fmt: skip
    assert "--container-image=" in script.read_text()
    out = tmp_path / "job.out"
    env = _job_env(cluster, local_podman, pushed.split("/", 1)[0])
    real = shutil.which("srun")
    assert real is not None
    env |= {"PATH": f"{PYXIS}:{os.environ['PATH']}", "TRAINIMG_REAL_SRUN": real}
    job = cluster.ctl("sbatch", "--parsable", "-o", str(out), str(script), env=env).stdout.strip()
    info = _await(cluster, job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 300, out)
    text = out.read_text()
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", _why(cluster, info, text)
    assert "done: completed at step 4" in text and "scontrol: command not found" not in text
    got = losses(ckpt / "m.jsonl")
    assert sorted(got) == [1, 2, 3, 4]
    for step, loss in got.items():
        assert abs(loss - reference[step]) <= TOLERANCE, (step, loss, reference[step])
    left = local_podman.podman("ps", "-a", "--filter", "label=io.trainimg.pyxis", "--format",
                               "{{.Names}}").split()  # fmt: skip
    assert left == [], left


def test_a_user_without_subordinate_ids_fails_fast_naming_them(
    cluster: SlurmCluster, pushed: str, local_podman: Any
) -> None:
    """A job submitted for a user (`sbatch --uid=nobody`: the nodes run it as nobody, which has
    no /etc/subuid range here) checks rootless podman's prerequisites on each node before
    `podman run` and ends at once with exit 2 and the fix, rather than a podman error."""
    work = Path(tempfile.mkdtemp(prefix="trainimg-nobody-", dir="/tmp"))  # nobody can reach it
    try:
        work.chmod(0o777)
        ckpt = work / "ckpt"
        ckpt.mkdir(mode=0o777)
        ckpt.chmod(0o777)
        script = _script(
            work / "job.sbatch", pushed, "--nodes", "2", "--gpus-per-node", "0",
            "--cpus-per-node", "1", "--time", "10", "--ckpt", str(ckpt), "--", *TINY,
            "--steps", "4",
        )  # fmt: skip
        out = work / "job.out"
        env = _job_env(cluster, local_podman, pushed.split("/", 1)[0])
        job = cluster.ctl(
            "sbatch", "--parsable", "--uid=nobody", "-o", str(out), str(script), env=env
        ).stdout.strip()
        info = _await(cluster, job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 120, out)
        text = _read(out)
        ok = info["JobState"] == "FAILED" and info["ExitCode"] == "2:0"
        assert ok and info["Restarts"] == "0", _why(cluster, info, text)
        assert "rootless podman needs subordinate uids for nobody" in text, text[-3000:]
        assert "usermod --add-subuids" in text and "step 1/" not in text
        assert not list(ckpt.iterdir())
        _no_containers(local_podman)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_job_stopped_before_its_first_step_saves_nothing_and_is_not_requeued(
    cluster: SlurmCluster, pushed: str, local_podman: Any, tmp_path: Path
) -> None:
    """Slurm's SIGTERM to the batch script while the containers start (the launchers import
    torch; no worker can catch it yet): exit 4, "stopped, nothing saved", on both nodes and
    for the job, which is not requeued - 143 there used to requeue a job with nothing to
    resume. The containers are named by job, step, node and restart, and none is left."""
    ckpt = shared_dir(tmp_path / "ckpt")
    script = _script(
        tmp_path / "job.sbatch", pushed, "--nodes", "2", "--gpus-per-node", "0",
        "--cpus-per-node", "1", "--time", "10", "--ckpt", str(ckpt), "--",
        *TINY, "--steps", "100000",
    )  # fmt: skip
    out = tmp_path / "job.out"
    env = _job_env(cluster, local_podman, pushed.split("/", 1)[0])
    job = cluster.ctl("sbatch", "--parsable", "-o", str(out), str(script), env=env).stdout.strip()
    deadline = time.monotonic() + 120
    # both containers up, their launchers listening and importing torch: no worker yet
    while len(_running(local_podman)) < 2 or not _launchers_listen(
        local_podman, _running(local_podman)
    ):
        info = cluster.job(job)
        if info["JobState"] not in {"PENDING", "CONFIGURING", "RUNNING"} or (
            time.monotonic() > deadline
        ):
            why = _why(cluster, info, _read(out))
            pytest.fail(f"job {job}'s containers did not start:\n{why}")
        time.sleep(0.2)
    assert sorted(_running(local_podman)) == [f"trainimg-{job}-0-{n}-r0" for n in (0, 1)]
    assert "step 1/" not in _read(out)
    cluster.ctl("scancel", "--batch", "--signal=TERM", job)
    ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PENDING"}  # PENDING: requeued
    info = _await(cluster, job, ended, 180, out)
    text = out.read_text()
    assert info["JobState"] == "FAILED" and info["ExitCode"] == "4:0", _why(cluster, info, text)
    assert info["Restarts"] == "0" and "requeueing" not in text, _why(cluster, info, text)
    assert "step 1/" not in text and list(ckpt.glob("step_*")) == [], text[-3000:]
    # each node says nothing was saved: its launcher ("nothing was saved", within 5 s also when
    # the signal found it blocked in torch's rendezvous: its watchdog; before it, such a node
    # ran past the test's 180 s, seen in CI) or the node script, when podman ended first
    assert text.count("nothing was saved") + text.count("nothing saved\n") >= 1, text[-3000:]
    _no_containers(local_podman)


def test_the_time_limit_ends_in_a_checkpoint_and_the_requeued_job_finishes(
    cluster: SlurmCluster, pushed: str, local_podman: Any, tmp_path: Path
) -> None:
    ckpt = shared_dir(tmp_path / "ckpt")
    config = ckpt / "run.yaml"  # on the shared filesystem: what the requeued job reads again
    config.write_text("train: {steps: 100000}\n")
    script = _script(
        tmp_path / "job.sbatch", pushed, "--nodes", "2", "--gpus-per-node", "0",
        "--cpus-per-node", "1", "--time", "10", "--grace", str(GRACE), "--ckpt", str(ckpt),
        "--", *TINY, "--config", "/ckpt/run.yaml", "--checkpoint-interval", "0",
    )  # fmt: skip
    out = tmp_path / "job.out"
    env = _job_env(cluster, local_podman, pushed.split("/", 1)[0])
    job = cluster.ctl("sbatch", "--parsable", "-o", str(out), str(script), env=env).stdout.strip()
    # Driven by the trainer, not by start-up time: once it reports a step, the limit is brought
    # within GRACE s of now (whole minutes, as Slurm keeps it); Slurm's own SIGTERM then comes at
    # its next time-limit check, every rank checkpoints and exits 143, the script requeues
    _await_text(cluster, job, out, "step 1/100000", 240)
    run_s = _seconds(cluster.job(job)["RunTime"])
    cluster.ctl("scontrol", "update", f"JobId={job}", f"TimeLimit={-(-(run_s + GRACE) // 60)}")
    info = _await(cluster, job, {"PENDING", "COMPLETED", "FAILED", "TIMEOUT"}, 180, out)
    text = out.read_text()
    assert info["JobState"] == "PENDING" and info["Restarts"] == "1", _why(cluster, info, text)
    assert f"SIGTERM {GRACE}s before the time limit" in text, text[-3000:]
    assert "requeueing job" in text and "stopped by SIGTERM: the workers checkpointed" in text
    assert "Traceback" not in text, text[-3000:]
    steps = sorted(p.name for p in ckpt.glob("step_*"))
    assert len(steps) == 1, (steps, text[-3000:])  # one checkpoint, written on the stop
    stopped_at = int(steps[0].removeprefix("step_"))
    # Slurm holds the requeued job back (cred_expire + 1 s: 31 s here) and it starts by itself;
    # meanwhile, as an admin would, give it room and an end: two more steps, ten minutes
    config.write_text(f"train: {{steps: 100000, stop_at: {stopped_at + 2}}}\n")
    cluster.ctl("scontrol", "update", f"JobId={job}", "TimeLimit=10")
    info = _await(cluster, job, {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"}, 300, out)
    text = out.read_text()
    ok = info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0"
    assert ok, _why(cluster, info, text)
    second = text[text.index("requeueing job") :]
    # the second run resumed: it says from where, and its first step is the one after the stop
    assert f"resumed from /ckpt/{steps[0]} (step {stopped_at})" in second, second[-3000:]
    first = re.search(r"step (\d+)/100000", second)
    assert first and int(first.group(1)) == stopped_at + 1, second[-3000:]
    assert f"step {stopped_at + 2}/100000" in second and "Traceback" not in second
    assert (ckpt / f"step_{stopped_at + 2:08d}" / "meta.json").is_file()
    _no_containers(local_podman)
    assert os.stat(ckpt / steps[0]).st_uid == 1000  # root's rootful podman: the image's user

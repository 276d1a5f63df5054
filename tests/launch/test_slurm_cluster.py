"""The script `trainimg slurm` writes, submitted with sbatch to a real Slurm (slurmctld and two
slurmd from Debian's slurm-wlm, each node in a network namespace of its own: slurm_cluster.py).
The nodes pull the CPU cell's image by digest from a registry on the cluster's private link
and train with torchrun's c10d rendezvous across the namespaces (gloo over their veths):

- a job runs to the end, with the losses of one process;
- a job whose time limit is shorter than the run gets Slurm's SIGTERM before the limit, every
  rank checkpoints and exits 143, the script requeues the job, and the requeued job resumes
  from that checkpoint and finishes.

Then nothing is left: no job, container, process in the namespaces, namespace, link, daemon.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import cli
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
# Slurm sends the signal at its first check (every 30 s) after limit - grace - 30 s: here 30 to
# 60 s into the job, when the trainer is training; the limit itself is 120 s.
TIME, GRACE = "2", 60


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
            text = out.read_text() if out.exists() else "(no output yet)"
            pytest.fail(f"job {job} is {info['JobState']}, not {states}:\n{text[-4000:]}")
        time.sleep(1)


def _no_containers(local_podman: Any) -> None:
    """No container of the job is left, and no root filesystem of one is still mounted."""
    names = local_podman.podman("ps", "-a", "--filter", f"label={RUN_LABEL}", "--format",
                                "{{.Names}}").split()  # fmt: skip
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


def test_the_time_limit_ends_in_a_checkpoint_and_the_requeued_job_finishes(
    cluster: SlurmCluster, pushed: str, local_podman: Any, tmp_path: Path
) -> None:
    ckpt = shared_dir(tmp_path / "ckpt")
    config = ckpt / "run.yaml"  # on the shared filesystem: what the requeued job reads again
    config.write_text("train: {steps: 100000}\n")
    script = _script(
        tmp_path / "job.sbatch", pushed, "--nodes", "2", "--gpus-per-node", "0",
        "--cpus-per-node", "1", "--time", TIME, "--grace", str(GRACE), "--ckpt", str(ckpt),
        "--", *TINY, "--config", "/ckpt/run.yaml", "--checkpoint-interval", "0",
    )  # fmt: skip
    out = tmp_path / "job.out"
    env = _job_env(cluster, local_podman, pushed.split("/", 1)[0])
    job = cluster.ctl("sbatch", "--parsable", "-o", str(out), str(script), env=env).stdout.strip()
    _await(cluster, job, {"RUNNING"}, 60, out)
    # Slurm's SIGTERM comes GRACE s before the limit: every rank checkpoints, exits 143, and
    # the script requeues the job; Slurm holds a requeued job back (~2 min, BeginTime)
    info = _await(cluster, job, {"PENDING", "COMPLETED", "FAILED", "TIMEOUT"}, 150, out)
    text = out.read_text()
    assert info["JobState"] == "PENDING" and info["Restarts"] == "1", (info, text[-3000:])
    assert f"SIGTERM {GRACE}s before the time limit" in text, text[-3000:]
    assert "requeueing job" in text and "stopped by SIGTERM: the workers checkpointed" in text
    assert "Traceback" not in text, text[-3000:]
    steps = sorted(p.name for p in ckpt.glob("step_*"))
    assert len(steps) == 1, (steps, text[-3000:])  # one checkpoint, written on the stop
    stopped_at = int(steps[0].removeprefix("step_"))
    # The second run must end: two more steps. Then release the hold, as an admin would.
    config.write_text(f"train: {{steps: 100000, stop_at: {stopped_at + 2}}}\n")
    cluster.ctl("scontrol", "update", f"JobId={job}", "StartTime=now")
    info = _await(cluster, job, {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"}, 120, out)
    text = out.read_text()
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", text[-3000:]
    assert f"resumed from {'/ckpt/' + steps[0]}" in text or f"step {stopped_at + 1}/" in text
    assert f"step {stopped_at + 2}/100000" in text and f"step {stopped_at}/100000" in text
    assert (ckpt / f"step_{stopped_at + 2:08d}" / "meta.json").is_file()
    _no_containers(local_podman)
    assert os.stat(ckpt / steps[0]).st_uid == 1000  # root's rootful podman: the image's user

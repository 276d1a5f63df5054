"""Two nodes on one machine, proven on the CPU: two containers of the CPU image, host network,
torchrun's c10d rendezvous on loopback (node 1 tells itself apart with --local-addr 127.0.0.2),
gloo. Losses match one process within the trainer's documented tolerance (docs/trainer.md:
2e-3 for bf16), checkpoints cross between 2 nodes and 1 in both directions (the trainer
writes full, unsharded state dicts), and `podman stop` of node 0 ends both nodes with 143 and
one checkpoint."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.launch.conftest import REPO, free_port, losses, shared_dir, spawn, trainimg

pytestmark = [pytest.mark.engine, pytest.mark.slow]

TOLERANCE = 2e-3  # docs/trainer.md "Tolerances the tests hold the trainer to": DDP/FSDP2, bf16
RUN = (
    "--preset",
    "bf16",
    "--device",
    "cpu",
    "--steps",
    "4",
    "--batch-size",
    "4",
    "--log-interval",
    "1",
    "--eval-interval",
    "0",
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    """One process, the same torch (the host venv's), the same config."""
    metrics = tmp_path_factory.mktemp("ref") / "m.jsonl"
    subprocess.run(
        [sys.executable, "-m", "trainer", "train", *RUN, "--metrics-file", str(metrics)],
        check=True,
        capture_output=True,
        cwd=REPO,
        timeout=300,
    )
    return losses(metrics)


def start_two_nodes(
    url: str, image: str, ckpt: Path, *args: str, options: tuple[str, ...] = ()
) -> list[subprocess.Popen[str]]:
    """`trainimg run` of node 0 and node 1 (loopback addresses 127.0.0.1 and .2); `options`
    go to `trainimg run` before the trainer's `args`, `{rank}` in them becomes the rank."""
    port = free_port()
    return [
        spawn(
            url,
            "run",
            image,
            "--nnodes",
            "2",
            "--node-rank",
            str(rank),
            "--rdzv",
            f"127.0.0.1:{port}",
            "--local-addr",
            f"127.0.0.{rank + 1}",
            "--ckpt",
            str(ckpt),
            *(o.format(rank=rank) for o in options),
            "--",
            *args,
            env={"GLOO_SOCKET_IFNAME": "lo"},
        )
        for rank in (0, 1)
    ]


def two_nodes(url: str, image: str, ckpt: Path, *args: str) -> list[tuple[int, str, str]]:
    out = []
    for p in start_two_nodes(url, image, ckpt, *args):
        o, e = p.communicate(timeout=600)
        out.append((p.returncode, o, e))
    return out


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_nodes_match_one_and_checkpoints_cross(
    parallel: str,
    run_image: str,
    podman_service: str,
    tmp_path: Path,
    reference: dict[int, float],
    leftovers: Any,
) -> None:
    ckpt = shared_dir(tmp_path / "ckpt")
    metrics = ("--metrics-file", "/ckpt/m.jsonl", "--parallel", parallel)
    one = ("run", run_image, "--ckpt", str(ckpt), "--", *RUN, *metrics)
    # A resume across world sizes is refused unless asked for (the trainer's resume guards):
    # "--resume-anyway" says so, and the losses below show it still reproduces the run.
    resume = ("--resume", "--resume-anyway")
    if parallel == "ddp":  # 2 nodes to step 2, then 1 node resumes
        nodes = two_nodes(podman_service, run_image, ckpt, *RUN, *metrics, "--stop-at", "2")
        single = trainimg(podman_service, *one, *resume)
    else:  # 1 node to step 2, then 2 nodes resume
        single = trainimg(podman_service, *one, "--stop-at", "2")
        nodes = two_nodes(podman_service, run_image, ckpt, *RUN, *metrics, *resume)
    for code, _, err in nodes:
        assert code == 0, err[-3000:]
    assert single.code == 0, single.err
    assert (ckpt / "step_00000004" / "meta.json").is_file()
    got = losses(ckpt / "m.jsonl")
    assert sorted(got) == [1, 2, 3, 4]
    for step, loss in got.items():
        assert abs(loss - reference[step]) <= TOLERANCE, (step, loss, reference[step])


def test_podman_stop_of_node_0_stops_every_node_with_one_checkpoint(
    run_image: str, podman_service: str, local_podman: Any, tmp_path: Path, leftovers: Any
) -> None:
    """Only node 0's container is stopped (as a scheduler or an admin would): every rank on
    both nodes agrees to stop at the same step, they checkpoint once, together, and both nodes
    exit 143; a resume continues from that checkpoint."""
    from trainer import checkpoint

    ckpt = shared_dir(tmp_path / "ckpt")
    name = f"trainimg-node{{rank}}-{free_port()}"
    procs = start_two_nodes(
        podman_service, run_image, ckpt, *RUN[:4], "--steps", "100000", *RUN[6:],
        "--parallel", "ddp", "--checkpoint-interval", "0",
        options=("--name", name, "--stop-timeout", "60"),
    )  # fmt: skip
    assert procs[0].stdout is not None
    deadline = time.monotonic() + 300
    for line in procs[0].stdout:
        if line.startswith("step 2/"):
            break
        assert time.monotonic() < deadline, "node 0 printed no step 2 in 300 s"
    local_podman.podman("stop", "--time", "60", name.format(rank=0))
    for rank, p in enumerate(procs):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 143, (rank, err[-3000:])
        assert "Traceback" not in err, (rank, err[-3000:])
    ((step, path),) = checkpoint.list_steps(ckpt)
    assert checkpoint.load(path).step == step
    resumed = trainimg(
        podman_service, "run", run_image, "--ckpt", str(ckpt), "--", *RUN[:4], "--steps",
        "100000", *RUN[6:], "--resume", "--resume-anyway", "--stop-at", str(step + 1),
    )  # fmt: skip
    assert resumed.code == 0, resumed.err[-3000:]
    assert f"resumed from /ckpt/{path.name}" in resumed.out and f"step {step + 1}/" in resumed.out

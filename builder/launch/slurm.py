"""`trainimg slurm`: an sbatch script that runs one container per node (pure rendering).

The per-node line is the same plan `trainimg run` makes (plan.py, cli_line.py), for a GPU node
as the script assumes it: podman with a CDI spec, SELinux labels (a no-op where SELinux is
off), rootless podman (--userns=keep-id) unless --rootful. The words that differ per node (its
rank, node 0's address, the job id) become shell variables the script sets at run time.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2

from builder import __version__
from builder.engines.base import ImageInfo
from builder.labels import RUN_LABEL, TRAINER_VERSION_LABEL, VENV
from builder.launch import cli_line
from builder.launch.plan import ContainerRun, plan_run
from builder.launch.request import (
    Directory,
    LaunchError,
    LaunchHost,
    Rendezvous,
    RunRequest,
    check_name,
)

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "sbatch.sh.j2"
DEFAULT_GRACE = 120
DEFAULT_PORT = 29500
_RDZV_HOST = "trainimg-rdzv-host"
_RDZV_ID = "trainimg-rdzv-id"
_NAME = "trainimg-slurm-node"
_LOCAL_ADDR = "trainimg-local-addr"
_NODE_NAME = '"trainimg-$SLURM_JOB_ID-$SLURM_NODEID"'
# per-node words: what the plan holds -> what the script writes (double-quoted, expanded there)
_VARIABLE_WORDS = {
    "--node-rank=0": '--node-rank="$SLURM_NODEID"',
    f"--rdzv-endpoint={_RDZV_HOST}:{DEFAULT_PORT}": '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"',
    f"--rdzv-id={_RDZV_ID}": '--rdzv-id="trainimg-$SLURM_JOB_ID"',
    "--rdzv-conf=is_host=true": '--rdzv-conf=is_host="$is_host"',
    f"--local-addr={_LOCAL_ADDR}": '--local-addr="$local_addr"',
    _NAME: _NODE_NAME,
    f"{RUN_LABEL}={_NAME}": f"{RUN_LABEL}={_NODE_NAME}",
}
_TIME = r"^(?:\d+|\d+:\d{2}(?::\d{2})?|\d+-\d+(?::\d{2}(?::\d{2})?)?)$"


@dataclass(frozen=True)
class SlurmJob:
    image: str
    cell: str
    nodes: int
    gpus_per_node: int
    trainer_args: tuple[str, ...] = ()
    partition: str | None = None
    time: str | None = None
    data: str | None = None
    ckpt: str | None = None
    port: int = DEFAULT_PORT
    grace: int = DEFAULT_GRACE
    pyxis: bool = False  # enroot/pyxis: srun --container-image instead of podman run
    container_image: str | None = None  # what pyxis pulls (default: image)
    rootful: bool = False
    uid: int = 1000  # the submitting user (rootful podman runs the trainer as this uid)
    gid: int = 1000


def _check(job: SlurmJob) -> None:
    import re

    if job.nodes < 1:
        raise LaunchError(f"--nodes {job.nodes}: expected 1 or more")
    if job.gpus_per_node < 0:
        raise LaunchError(f"--gpus-per-node {job.gpus_per_node}: expected 0 (CPU) or more")
    if job.partition is not None:
        check_name(job.partition, "--partition")
    if job.time is not None and not re.match(_TIME, job.time):
        raise LaunchError(
            f"--time {job.time!r}: expected a Slurm time limit (MINUTES, HH:MM:SS, D-HH:MM)"
        )
    if not 0 < job.port < 65536:
        raise LaunchError(f"--port {job.port}: expected 1-65535")
    if job.grace < 1:
        raise LaunchError(f"--grace {job.grace}: expected seconds before the limit, 1 or more")
    for flag, path in (("--data", job.data), ("--ckpt", job.ckpt)):
        if path is not None and not path.startswith("/"):
            raise LaunchError(f"{flag} {path!r}: give an absolute path on the shared filesystem")


def node_plan(job: SlurmJob) -> ContainerRun:
    """The plan of one node, with placeholders where the script puts per-node values."""
    req = RunRequest(
        image=job.image,
        trainer_args=job.trainer_args,
        # every GPU of the node through CDI; Slurm's CUDA_VISIBLE_DEVICES (passed through)
        # selects the ones allocated to the job
        gpus="all" if job.gpus_per_node else "none",
        data=job.data,
        ckpt=job.ckpt,
        nnodes=job.nodes,
        node_rank=0,
        rdzv=Rendezvous(_RDZV_HOST, DEFAULT_PORT),
        nproc_per_node=max(job.gpus_per_node, 1),
        rdzv_id=_RDZV_ID,
        local_addr=_LOCAL_ADDR,
        network="host",
        name=_NAME,
    )
    # the compute nodes, as the script assumes them: their directories are not checked here
    # (they are on the cluster's shared filesystem), a CDI spec lists each GPU
    dirs = {
        d: Directory(d, True, True, job.uid, job.gid, 0o777)
        for d in (job.data, job.ckpt)
        if d is not None
    }
    host = LaunchHost(
        engine="podman",
        rootless=not job.rootful,
        uid=job.uid,
        gid=job.gid,
        selinux_enforcing=True,
        cdi_devices=(
            "nvidia.com/gpu=all",
            *(f"nvidia.com/gpu={i}" for i in range(job.gpus_per_node)),
        ),
        gpu_count=job.gpus_per_node,
        dirs=dirs,
    )
    image = ImageInfo(
        id="sha256:" + "0" * 64,
        tags=(job.image,),
        digest=None,
        size=0,
        labels={TRAINER_VERSION_LABEL: "any"},
        env={},
        user="1000:1000",
        entrypoint=(f"{VENV}/bin/python", "-m", "trainer"),
        cmd=("--help",),
    )
    return plan_run(req, host, image)


def _words(argv: list[str]) -> str:
    return " ".join(_VARIABLE_WORDS.get(w) or shlex.quote(w) for w in argv)


def _passthrough() -> list[str]:
    """podman's own passthrough (a name without a value; `*` globs): the job's NCCL_*, TORCH_*,
    GLOO_* and Slurm's CUDA_VISIBLE_DEVICES."""
    return [
        "--env",
        "NCCL_*",
        "--env",
        "TORCH_*",
        "--env",
        "GLOO_*",
        "--env",
        "CUDA_VISIBLE_DEVICES",
    ]


def render_sbatch(job: SlurmJob) -> str:
    """The sbatch script for this job (templates/sbatch.sh.j2); LaunchError on a bad shape."""
    _check(job)
    plan = node_plan(job)
    if job.pyxis:
        assert plan.entrypoint is not None
        inner = [*plan.entrypoint, *plan.command]
        node_command = "exec " + _words(inner)
        mounts = ",".join(
            f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in plan.mounts
        )
        extra = [f"--container-image={job.container_image or job.image}"]
        if mounts:
            extra.append(f"--container-mounts={mounts}")
        extra += ["--no-container-mount-home", "--container-workdir=/workspace"]
        srun_extra = " ".join(shlex.quote(w) for w in extra) + " "
    else:
        argv = cli_line.argv(plan)
        at = argv.index("--stop-signal")
        argv[at:at] = _passthrough()
        node_command = "exec " + _words(argv)
        srun_extra = ""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - a shell script; every value is quoted or validated
    )
    mode = "enroot/pyxis" if job.pyxis else "podman"
    return env.get_template(TEMPLATE.name).render(
        title=f"trainimg slurm {job.cell}: {job.nodes} node(s) x {job.gpus_per_node} GPU(s), "
        f"{mode}",
        version=__version__,
        job_name=f"trainimg-{job.cell}"[:63],
        nodes=job.nodes,
        gpus=job.gpus_per_node,
        partition=job.partition,
        time=job.time,
        grace=job.grace,
        port=job.port,
        node_command=node_command,
        srun_extra=srun_extra,
    )

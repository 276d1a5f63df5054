"""`trainimg slurm`: an sbatch script that runs one container per node (pure rendering).

What a compute node runs is decided when the script runs, not when it is written: the image
comes by digest from a registry, or from an archive on the shared filesystem (`trainimg
export`), never `localhost/` (which exists only where it was built); the GPUs are the ones
Slurm allocated on that node, as CDI names (podman's containers live outside the job's cgroup);
the user is whoever runs the job (rootless podman: --userns=keep-id; root: the image's user);
the rendezvous port follows the job id. The per-node podman line is the plan `trainimg run`
makes (plan.py, cli_line.py); its per-node words become shell variables and arrays. Each
container is named by job, step, node and restart, and removed by a trap of its node's shell;
the job requeues itself only when its run added a checkpoint (slurm_limits.py: the limits).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2

from builder import __version__
from builder.engines.base import ContainerRun, ImageInfo
from builder.launch import cli_line
from builder.launch.expected_image import expected_image
from builder.launch.plan import plan_run
from builder.launch.request import (
    Directory,
    LaunchError,
    LaunchHost,
    Rendezvous,
    RunRequest,
    check_name,
)
from builder.launch.slurm_limits import DEFAULT_MAX_RESTARTS, EXIT_STOPPED_UNSAVED, check_limits
from builder.registry.reference import ReferenceError_, parse_reference
from builder.spec.labels import RUN_LABEL
from builder.spec.layout import CKPT_DIR, WORKDIR

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "sbatch.sh.j2"
DEFAULT_GRACE = 120
PORT_FROM_JOB_ID = "$((20000 + SLURM_JOB_ID % 20000))"
_RDZV_HOST = "trainimg-rdzv-host"
_RDZV_PORT = 29500
_RDZV_ID = "trainimg-rdzv-id"
_NAME = "trainimg-slurm-node"
_LOCAL_ADDR = "trainimg-local-addr"
_IMAGE = "trainimg-image"
_NODE_NAME = '"$container"'  # run_node's: trainimg-JOB-STEP-NODE-rRESTART
# per-node words: what the plan holds -> what the script writes (expanded there)
_VARIABLE_WORDS = {
    "--node-rank=0": '--node-rank="$SLURM_NODEID"',
    f"--rdzv-endpoint={_RDZV_HOST}:{_RDZV_PORT}": '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"',
    f"--rdzv-id={_RDZV_ID}": '--rdzv-id="trainimg-$SLURM_JOB_ID"',
    "--rdzv-conf=is_host=true": '--rdzv-conf=is_host="$is_host"',
    f"--local-addr={_LOCAL_ADDR}": '--local-addr="$local_addr"',
    _NAME: _NODE_NAME,
    f"{RUN_LABEL}={_NAME}": f"{RUN_LABEL}={_NODE_NAME}",
    _IMAGE: '"$IMAGE"',
}
# words the script decides at run time: the plan's GPU and memlock options -> the `opts` array
_RUNTIME_OPTIONS = (("--device", "nvidia.com/gpu=all"), ("--ulimit", "memlock=-1"))
_MEM = r"^\d+[KMGT]?$"
_PATH = re.compile(r"^/[A-Za-z0-9._/+-]+$")
LOCAL_REGISTRIES = ("localhost",)
SHIP_IT = (
    "push it (`trainimg push CELL --registry HOST/REPO` records its digest; then `trainimg "
    "slurm CELL`) or export it to the shared filesystem (`trainimg export CELL -o "
    "/nfs/images/trainimg.tar`, or .sqsh for --pyxis; then --archive PATH)"
)


@dataclass(frozen=True)
class SlurmJob:
    image: str  # registry reference by digest: HOST[:PORT]/REPO@sha256:... (unless archive)
    cell: str
    nodes: int
    gpus_per_node: int
    trainer_args: tuple[str, ...] = ()
    partition: str | None = None
    time: str | None = None
    data: str | None = None
    ckpt: str | None = None
    port: int | None = None  # None: derived from the job id
    grace: int = DEFAULT_GRACE
    pyxis: bool = False  # enroot/pyxis: srun --container-image instead of podman run
    archive: str | None = None  # shared OCI archive (.tar, podman) or enroot image (.sqsh)
    cpus_per_node: int | None = None
    mem: str | None = None  # per node, Slurm's --mem (0: all of it)
    exclusive: bool | None = None  # None: whole nodes when GPUs are asked for
    image_info: ImageInfo | None = None  # the image as built (a cell's labels); default: contract
    max_restarts: int = DEFAULT_MAX_RESTARTS  # requeues after a stop with a new checkpoint


@dataclass(frozen=True)
class NodeImage:
    """What the nodes run (the script's $IMAGE) and where it comes from (a comment)."""

    ref: str
    source: str


def node_image(job: SlurmJob) -> NodeImage:
    """The image reference a compute node can resolve: a registry digest, or a shared archive.
    LaunchError for anything only the build machine has (localhost/, a bare tag)."""
    if job.archive is not None:
        suffix = ".sqsh" if job.pyxis else ".tar"
        if not _PATH.match(job.archive) or not job.archive.endswith(suffix):
            kind = "an enroot .sqsh image" if job.pyxis else "an OCI archive (.tar)"
            raise LaunchError(
                f"--archive {job.archive!r}: give the absolute path of {kind} on the shared "
                f"filesystem (letters, digits, ._/+-), as `trainimg export CELL -o PATH` writes it"
            )
        if job.pyxis:
            return NodeImage(job.archive, f"the enroot image {job.archive} (trainimg export)")
        return NodeImage(f"oci-archive:{job.archive}", f"the OCI archive {job.archive}")
    try:
        ref = parse_reference(job.image, what="image")
    except ReferenceError_ as exc:
        raise LaunchError(f"{exc}; {SHIP_IT}") from None
    host = ref.registry.rsplit(":", 1)[0]
    if host in LOCAL_REGISTRIES:
        raise LaunchError(
            f"image {job.image}: the compute nodes cannot pull {ref.registry}/ (it exists only "
            f"where it was built); {SHIP_IT}"
        )
    if job.pyxis:  # enroot's syntax: REGISTRY#IMAGE:TAG, or @DIGEST (enroot 4.0 or later)
        at = f"@{ref.digest}" if ref.digest else f":{ref.tag or 'latest'}"
        return NodeImage(f"{ref.registry}#{ref.repository}{at}", f"{ref}, imported by enroot")
    if ref.digest is None:
        raise LaunchError(
            f"image {job.image}: no digest, so the nodes could each pull a different image; "
            f"name it HOST/REPO@sha256:..., or {SHIP_IT}"
        )
    return NodeImage(f"{ref.name}@{ref.digest}", f"{ref}, pulled by digest")


def _check(job: SlurmJob) -> None:
    if job.nodes < 1:
        raise LaunchError(f"--nodes {job.nodes}: expected 1 or more")
    if job.gpus_per_node < 0:
        raise LaunchError(f"--gpus-per-node {job.gpus_per_node}: expected 0 (CPU) or more")
    if job.partition is not None:
        check_name(job.partition, "--partition")
    if job.port is not None and not 0 < job.port < 65536:
        raise LaunchError(f"--port {job.port}: expected 1-65535")
    check_limits(job.time, job.grace, job.max_restarts)
    if job.cpus_per_node is not None and job.cpus_per_node < 1:
        raise LaunchError(f"--cpus-per-node {job.cpus_per_node}: expected 1 or more")
    if job.mem is not None and not re.match(_MEM, job.mem):
        raise LaunchError(f"--mem {job.mem!r}: expected a size as Slurm takes it (64G, 0: all)")
    for flag, path in (("--data", job.data), ("--ckpt", job.ckpt)):
        if path is not None and not path.startswith("/"):
            raise LaunchError(f"{flag} {path!r}: give an absolute path on the shared filesystem")


def checkpoint_dir(job: SlurmJob) -> str | None:
    """Where the trainer's checkpoints land on the shared filesystem: --ckpt (mounted at /ckpt,
    the trainer's --ckpt-dir unless the trainer arguments name another), or the directory under
    it they name. None without --ckpt, or for a --ckpt-dir outside /ckpt (it would go with the
    container): then the job has nothing to resume from and does not requeue itself."""
    if job.ckpt is None:
        return None
    given = CKPT_DIR
    args = job.trainer_args
    for i, arg in enumerate(args):
        if arg == "--ckpt-dir" and i + 1 < len(args):
            given = args[i + 1]
        elif arg.startswith("--ckpt-dir="):
            given = arg.split("=", 1)[1]
    inside = posixpath.normpath(given)
    if inside == CKPT_DIR:
        return job.ckpt
    if inside.startswith(CKPT_DIR + "/"):
        return job.ckpt.rstrip("/") + inside[len(CKPT_DIR) :]
    return None


def requeue_note(job: SlurmJob) -> str | None:
    """Why this job's script never requeues it (None when it may): what `trainimg slurm` says."""
    if checkpoint_dir(job) is not None:
        return None
    why = (
        "no --ckpt"
        if job.ckpt is None
        else f"the trainer's --ckpt-dir is not under {CKPT_DIR}, the --ckpt mount"
    )
    return (
        f"the job will never be requeued ({why}: a stop saves nothing that survives the "
        f"container; #SBATCH --no-requeue); a stop before the time limit exits "
        f"{EXIT_STOPPED_UNSAVED} (stopped, nothing saved)"
    )


def node_plan(job: SlurmJob) -> ContainerRun:
    """The plan of one node, with placeholders where the script puts per-node values."""
    req = RunRequest(
        image=_IMAGE,
        trainer_args=job.trainer_args,
        gpus="all" if job.gpus_per_node else "none",
        data=job.data,
        ckpt=job.ckpt,
        nnodes=job.nodes,
        node_rank=0,
        rdzv=Rendezvous(_RDZV_HOST, _RDZV_PORT),
        nproc_per_node=max(job.gpus_per_node, 1),
        rdzv_id=_RDZV_ID,
        local_addr=_LOCAL_ADDR,
        network="host",
        name=_NAME,
        stop_timeout=job.grace,
    )
    # a compute node as the script finds it: its directories are on the shared filesystem
    # (not checked here); who runs it and which GPUs are decided there, at run time (opts)
    dirs = {d: Directory(d, True, True, 0, 0, 0o777) for d in (job.data, job.ckpt) if d is not None}
    host = LaunchHost(
        engine="podman",
        rootless=False,
        uid=0,
        gid=0,
        selinux_enforcing=True,  # labels are a no-op where SELinux is off
        cdi_devices=("nvidia.com/gpu=all",),
        gpu_count=job.gpus_per_node,
        dirs=dirs,
    )
    return plan_run(req, host, job.image_info or expected_image(job.image))


def _words(argv: list[str]) -> str:
    return " ".join(_VARIABLE_WORDS.get(w) or shlex.quote(w) for w in argv)


def _podman_words(plan: ContainerRun) -> list[str]:
    """The node's `podman run` words: the run-time options (GPUs, memlock, user) as "${opts[@]}",
    its environment passed through by name (podman's own passthrough: a name without a value,
    `*` globs), and the resume flag a requeued job adds."""
    argv = cli_line.argv(plan)
    out: list[str] = []
    i = 0
    while i < len(argv):
        if tuple(argv[i : i + 2]) in _RUNTIME_OPTIONS:
            i += 2
            continue
        if argv[i] == "--stop-signal":
            out += ["--env", "NCCL_*", "--env", "TORCH_*", "--env", "GLOO_*"]
        out.append(argv[i])
        i += 1
    at = out.index("--network=host")
    return [*out[:at], "\0opts", *out[at:], "\0resume"]


def _node_command(plan: ContainerRun, pyxis: bool) -> str:
    """Under pyxis the node's shell already is in the container and becomes the trainer
    (exec); under podman it stays, so that its trap can remove the container."""
    if pyxis:
        assert plan.entrypoint is not None
        words = [*plan.entrypoint, *plan.command, "\0resume"]
    else:
        words = _podman_words(plan)
    arrays = {"\0opts": '"${opts[@]}"', "\0resume": '"${resume[@]}"'}
    line = " ".join(arrays.get(w) or _words([w]) for w in words)
    return f"exec {line}" if pyxis else line


def _srun_extra(job: SlurmJob, plan: ContainerRun, image: NodeImage) -> str:
    if not job.pyxis:
        return ""
    mounts = ",".join(
        f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in plan.mounts
    )
    extra = ['--container-image="$IMAGE"']
    if mounts:
        extra.append(shlex.quote(f"--container-mounts={mounts}"))
    extra += ["--no-container-mount-home", f"--container-workdir={WORKDIR}"]
    return " ".join(extra) + " "


def render_sbatch(job: SlurmJob) -> str:
    """The sbatch script for this job (templates/sbatch.sh.j2); LaunchError on a bad shape."""
    _check(job)
    image = node_image(job)
    plan = node_plan(job)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - a shell script; every value is quoted or validated
        comment_start_string="{##",  # bash's ${#array[@]} is not a Jinja comment
        comment_end_string="##}",
    )
    mode = "enroot/pyxis" if job.pyxis else "podman"
    ckpt_dir = checkpoint_dir(job)
    exclusive = job.exclusive if job.exclusive is not None else job.gpus_per_node > 0
    return env.get_template(TEMPLATE.name).render(
        title=f"trainimg slurm {job.cell}: {job.nodes} node(s) x {job.gpus_per_node} GPU(s), "
        f"{mode}",
        version=__version__,
        job_name=f"trainimg-{job.cell}"[:63],
        nodes=job.nodes,
        gpus=job.gpus_per_node,
        cpus=job.cpus_per_node,
        mem=job.mem,
        exclusive=exclusive,
        partition=job.partition,
        time=job.time,
        grace=job.grace,
        requeue=ckpt_dir is not None,
        ckpt_dir=shlex.quote(ckpt_dir) if ckpt_dir is not None else "",
        max_restarts=job.max_restarts,
        unsaved=EXIT_STOPPED_UNSAVED,
        port=job.port if job.port is not None else PORT_FROM_JOB_ID,
        image=shlex.quote(image.ref),
        image_source=image.source,
        pyxis=job.pyxis,
        node_command=_node_command(plan, job.pyxis),
        srun_extra=_srun_extra(job, plan, image),
    )

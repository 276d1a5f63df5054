"""The planner: a RunRequest, this host's facts and the image's metadata -> one ContainerRun.

Pure: no engine, no file system. Every host-dependent choice is made here, with a note that
says why, so `--dry-run` and the SDK run are the same plan (cli_line.py, execute.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from builder.engines.base import ContainerRun, ImageInfo, Mount
from builder.facts.host import CDI_SPEC_DIRS
from builder.launch.request import (
    CKPT,
    DATA,
    Directory,
    GpuRequest,
    LaunchError,
    LaunchHost,
    RunRequest,
)
from builder.launch.slurm_limits import EXIT_STOPPED_UNSAVED
from builder.spec.labels import RUN_LABEL, TRAINER_VERSION_LABEL
from builder.spec.layout import USER_ID

PASSTHROUGH_PREFIXES = ("NCCL_", "TORCH_", "GLOO_")
# which interface NCCL/gloo use: meaningless without a network (and fatal under --network
# none, where the named interface does not exist)
IFNAME_SUFFIX = "_SOCKET_IFNAME"
CDI_GPU = "nvidia.com/gpu"
CDI_FIX = (
    "generate one with `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` "
    "(nvidia-container-toolkit), check it with `nvidia-ctk cdi list`, or run on the CPU with "
    "--gpus none"
)
# the one launcher: torchrun's arguments, the trainer's exit codes (trainer/launch.py)
LAUNCHER = ("-m", "trainer.launch")


def passthrough_env(env: Mapping[str, str], network: str = "host") -> dict[str, str]:
    """The caller's NCCL_*, TORCH_*, GLOO_*, sorted by name; the *_SOCKET_IFNAME ones only when
    the container has a network. CUDA_VISIBLE_DEVICES never: the container sees exactly the
    GPUs it was given, numbered from 0, and a host-side selection would select again."""
    return {
        k: env[k]
        for k in sorted(env)
        if k.startswith(PASSTHROUGH_PREFIXES) and (network != "none" or IFNAME_SUFFIX not in k)
    }


def _gpu_devices(req: RunRequest, host: LaunchHost, notes: list[str]) -> tuple[str, ...]:
    """CDI device names for podman (nvidia.com/gpu=all, =0..N-1, or the ones named), as the
    spec lists them."""
    listed = [d for d in host.cdi_devices if d.startswith(f"{CDI_GPU}=")]
    where = " or ".join(CDI_SPEC_DIRS)
    if not listed:
        raise LaunchError(
            f"--gpus {_said(req.gpus)}: no CDI spec in {where} lists {CDI_GPU} devices, so "
            f"podman cannot give the container a GPU; {CDI_FIX}"
        )
    if req.gpus == "all":
        if f"{CDI_GPU}=all" not in listed:
            raise LaunchError(f"--gpus all: the CDI spec lists no {CDI_GPU}=all; {CDI_FIX}")
        notes.append(f"GPUs: CDI {CDI_GPU}=all (a spec in {where})")
        return (f"{CDI_GPU}=all",)
    wanted = cdi_names(req.gpus)
    missing = [d for d in wanted if d not in listed]
    if missing:
        raise LaunchError(
            f"--gpus {_said(req.gpus)}: the CDI spec lists {', '.join(sorted(listed))}, not "
            f"{', '.join(missing)}; ask for GPUs it lists or regenerate the spec ({CDI_FIX}; "
            "--device-name-strategy=uuid adds the GPU-... names)"
        )
    notes.append(f"GPUs: CDI {', '.join(wanted)}")
    return wanted


def cdi_names(gpus: GpuRequest) -> tuple[str, ...]:
    """The CDI device names `--gpus` asks for (all, the first N, or the ones named)."""
    if gpus == "none":
        return ()
    if gpus == "all":
        return (f"{CDI_GPU}=all",)
    return tuple(f"{CDI_GPU}={i}" for i in (range(gpus) if isinstance(gpus, int) else gpus))


def _said(gpus: GpuRequest) -> str:
    """--gpus as the user wrote it."""
    return ",".join(gpus) if isinstance(gpus, tuple) else str(gpus)


def _docker_gpus(gpus: GpuRequest) -> str:
    """`docker run --gpus` syntax: all, a count, or device=2,3."""
    return f"device={','.join(gpus)}" if isinstance(gpus, tuple) else str(gpus)


def gpus_in_container(req: RunRequest, host: LaunchHost) -> int:
    """How many GPUs the container sees: one worker each."""
    if req.gpus == "none":
        return 0
    if req.gpus == "all":
        return max(host.gpu_count, 1)
    if isinstance(req.gpus, tuple):
        return len(req.gpus)
    assert isinstance(req.gpus, int)
    return req.gpus


def _user(
    req: RunRequest, host: LaunchHost, image: ImageInfo, notes: list[str]
) -> tuple[str | None, str | None, int, int]:
    """(userns, user, uid, gid): who the trainer runs as, and that uid/gid as the host sees it
    (for the volume permission check)."""
    image_uid, _, image_gid = (image.user or "0").partition(":")
    img_uid = int(image_uid) if image_uid.isdigit() else USER_ID
    img_gid = int(image_gid) if image_gid.isdigit() else img_uid
    if host.engine == "podman" and host.rootless:
        notes.append(
            f"rootless podman: --userns=keep-id, so files in {CKPT} belong to you (uid {host.uid})"
        )
        return "keep-id", f"{host.uid}:{host.gid}", host.uid, host.gid
    if host.rootless:  # rootless docker: the image's user maps to a subordinate uid
        notes.append(
            "rootless docker: the image's user maps to a subordinate uid on the host; "
            "checkpoints are not owned by you (use podman for --userns=keep-id)"
        )
        return None, None, -1, -1
    if host.uid != 0:
        notes.append(
            f"rootful {host.engine}: --user {host.uid}:{host.gid}, so files in {CKPT} belong "
            "to you; HOME=/tmp because the image's home belongs to its own user"
        )
        return None, f"{host.uid}:{host.gid}", host.uid, host.gid
    notes.append(f"run as root: the image's user ({img_uid}:{img_gid}) owns what it writes")
    return None, None, img_uid, img_gid


def _check_dir(d: Directory | None, flag: str, uid: int, gid: int, write: bool) -> None:
    if d is None:
        raise LaunchError(f"{flag}: the directory was not examined (internal error)")
    if not d.exists:
        make = f"create it (`mkdir -p {d.path}`)" if write else "give an existing directory"
        raise LaunchError(f"{flag} {d.path}: no such directory; {make}")
    if not d.is_dir:
        raise LaunchError(f"{flag} {d.path}: not a directory")
    if uid < 0:  # rootless docker: cannot tell who the container user is on the host
        return
    bits = 7 if write else 5
    if not d.allows(uid, gid, bits):
        need = "write to" if write else "read"
        perms = "rwx" if write else "rx"
        acl = " and its ACL" if d.acl else ""
        raise LaunchError(
            f"{flag} {d.path}: the container user (uid {uid}, gid {gid}) cannot {need} it "
            f"(owner {d.uid}:{d.gid}, mode {d.mode:o}{acl}); grant it with "
            f"`setfacl -m u:{uid}:{perms} {d.path}`"
            + (f" or `chown {uid}:{gid} {d.path}`" if write else f" or `chmod o+rx {d.path}`")
        )


def _mounts(
    req: RunRequest, host: LaunchHost, uid: int, gid: int, unlabelled: bool, notes: list[str]
) -> tuple[Mount, ...]:
    """/data read-only, never relabelled (a shared dataset's label is the admin's); /ckpt
    relabelled on SELinux-enforcing hosts (:Z private, :z when several containers share it),
    unless the container runs unlabelled (label=disable), where a relabel changes nothing."""
    mounts = []
    if req.data is not None:
        _check_dir(host.dirs.get(req.data), "--data", uid, gid, write=False)
        mounts.append(Mount(req.data, DATA, True, None))
    if req.ckpt is not None:
        _check_dir(host.dirs.get(req.ckpt), "--ckpt", uid, gid, write=True)
        label = None
        if host.selinux_enforcing and not unlabelled:
            label = "z" if req.nnodes > 1 else "Z"
        mounts.append(Mount(req.ckpt, CKPT, False, label))
    if mounts and host.selinux_enforcing:
        if unlabelled:
            notes.append(
                "SELinux is enforcing, the container runs unlabelled (label=disable): the "
                "volumes are used as they are, not relabelled"
            )
        else:
            notes.append(
                f"SELinux is enforcing (/sys/fs/selinux/enforce): {CKPT} is relabelled ("
                + ("z: shared by the nodes" if req.nnodes > 1 else "Z: private")
                + f"); {DATA} is not (label a shared dataset once: `chcon -R -t "
                "container_ro_file_t DIR`)"
            )
    return tuple(mounts)


# the bundled trainer's subcommands (trainer/cli.py; the builder never imports the trainer,
# tests/launch/test_plan.py holds the two equal)
TRAINER_COMMANDS = ("train", "gate", "info")


def _trainer_args(req: RunRequest) -> tuple[str, ...]:
    """`train` unless the user named a trainer command; --ckpt-dir /ckpt when /ckpt is mounted."""
    args = list(req.trainer_args)
    if not args or args[0] not in TRAINER_COMMANDS:
        args.insert(0, "train")
    if (
        req.ckpt is not None
        and args[0] == "train"
        and not any(a == "--ckpt-dir" or a.startswith("--ckpt-dir=") for a in args)
    ):
        args += ["--ckpt-dir", CKPT]
    return tuple(args)


def _launcher(
    req: RunRequest, image: ImageInfo, nproc: int, notes: list[str]
) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(entrypoint, command): the image's own entrypoint, or torchrun for more than one process."""
    args = _trainer_args(req)
    if req.nnodes == 1 and nproc == 1:
        return None, args
    if args[0] != "train":
        raise LaunchError(f"--nnodes/--nproc-per-node: only `train` runs distributed ({args[0]})")
    if not image.entrypoint:
        raise LaunchError(f"image {req.image} has no ENTRYPOINT: it is not a trainimg image")
    python = image.entrypoint[0]
    run = [f"--nnodes={req.nnodes}", f"--nproc-per-node={nproc}"]
    if req.nnodes == 1:
        run.append("--standalone")
        notes.append(f"trainer.launch (torchrun) --standalone: {nproc} processes in one container")
    else:
        assert req.rdzv is not None
        run += [
            f"--node-rank={req.node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={req.rdzv}",
            f"--rdzv-id={req.rdzv_id}",
        ]
        if req.local_addr:
            run.append(f"--local-addr={req.local_addr}")
        if req.node_rank == 0:
            run.append("--rdzv-conf=is_host=true")
        else:
            run.append("--rdzv-conf=is_host=false")
        notes.append(
            f"torchrun: node {req.node_rank} of {req.nnodes}, c10d rendezvous at {req.rdzv} "
            "(node 0 hosts it)"
        )
    return (python, *LAUNCHER), (*run, "--max-restarts=0", "-m", "trainer", *args)


def _nccl(
    req: RunRequest, host: LaunchHost, notes: list[str]
) -> tuple[str | None, str | None, tuple[tuple[str, int, int], ...], tuple[str, ...]]:
    """(ipc, shm size, ulimits, devices): what NCCL needs between GPU processes and nodes. A
    CPU run (gloo, TCP) needs none of it; --shm-size still applies when given. Locked memory
    (NCCL's buffers, InfiniBand's registrations) is raised only where the engine may: rootless
    podman cannot ("error setting rlimit type 8"), so there it stays the user's own limit.
    InfiniBand/RoCE device nodes go in for several nodes, so NCCL does not fall back to TCP."""
    if req.gpus == "none":
        if req.shm_size:
            notes.append(f"--shm-size {req.shm_size}")
        return None, req.shm_size, (), ()
    memlock: tuple[tuple[str, int, int], ...] = ()
    if host.rootless:
        notes.append(
            "rootless: locked memory stays at your own limit (`ulimit -l`; raise it in "
            "/etc/security/limits.conf for NCCL/InfiniBand)"
        )
    else:
        memlock = (("memlock", -1, -1),)
    rdma = host.rdma_devices if req.nnodes > 1 else ()
    if rdma:
        notes.append(f"InfiniBand/RoCE: {', '.join(rdma)} for NCCL between the nodes")
    locked = ", memlock unlimited" if memlock else ""
    if req.shm_size:
        notes.append(f"NCCL: --shm-size {req.shm_size} (instead of --ipc=host){locked}")
        return None, req.shm_size, memlock, rdma
    notes.append(f"NCCL: --ipc=host (shared memory between GPU processes){locked}")
    return "host", None, memlock, rdma


def check_request(req: RunRequest) -> None:
    """What is wrong with the request alone, before anything on the host is read."""
    if req.nnodes < 1:
        raise LaunchError(f"--nnodes {req.nnodes}: expected 1 or more")
    if req.nnodes > 1 and req.rdzv is None:
        raise LaunchError(
            f"--nnodes {req.nnodes} needs --rdzv HOST:PORT: the address of node 0 that every "
            "node can reach, e.g. --rdzv node0:29500 (the same on every node)"
        )
    if not 0 <= req.node_rank < req.nnodes:
        raise LaunchError(
            f"--node-rank {req.node_rank}: expected 0 .. {req.nnodes - 1} for --nnodes {req.nnodes}"
        )
    if req.nproc_per_node is not None and req.nproc_per_node < 1:
        raise LaunchError(f"--nproc-per-node {req.nproc_per_node}: expected 1 or more")
    if req.stop_timeout < 0:
        raise LaunchError(f"--stop-timeout {req.stop_timeout}: expected seconds, 0 or more")


def check_image(req: RunRequest, image: ImageInfo) -> None:
    if TRAINER_VERSION_LABEL not in image.labels:
        raise LaunchError(
            f"image {req.image} has no {TRAINER_VERSION_LABEL} label: it does not bundle the "
            "trainimg trainer; build one with `trainimg build` (or name a matrix cell)"
        )


def plan_run(req: RunRequest, host: LaunchHost, image: ImageInfo) -> ContainerRun:
    check_request(req)
    check_image(req, image)
    notes: list[str] = []
    cdi: tuple[str, ...] = ()
    gpu_request = None
    if req.gpus != "none":
        if host.engine == "podman":
            cdi = _gpu_devices(req, host, notes)
        else:
            gpu_request = _docker_gpus(req.gpus)
            notes.append(f"GPUs: docker device request ({gpu_request}, capability gpu)")
        if "CUDA_VISIBLE_DEVICES" in host.env:
            notes.append(
                f"CUDA_VISIBLE_DEVICES={host.env['CUDA_VISIBLE_DEVICES']} is not passed in: "
                "--gpus chooses the container's GPUs (e.g. --gpus 2,3)"
            )
    nproc = req.nproc_per_node or max(gpus_in_container(req, host), 1)
    userns, user, uid, gid = _user(req, host, image, notes)
    security: tuple[str, ...] = ()
    if cdi and host.selinux_enforcing:
        security = ("label=disable",)
        notes.append("SELinux + CDI: --security-opt label=disable, as NVIDIA's CDI guide says")
    mounts = _mounts(req, host, uid, gid, bool(security), notes)
    network = req.network or ("host" if req.nnodes > 1 else "none")
    env = passthrough_env(host.env, network)
    if user is not None and userns is None:
        env["HOME"] = "/tmp"  # noqa: S108 - the container's own /tmp, not the host's
    env |= dict(req.env)
    ipc, shm, ulimits, devices = _nccl(req, host, notes)
    if network == "host" and req.nnodes > 1:
        notes.append("multi-node: --network host, so NCCL/gloo reach the other nodes directly")
    entrypoint, command = _launcher(req, image, nproc, notes)
    notes.append(stop_note(req))
    return ContainerRun(
        engine=host.engine,
        image=req.image,
        name=req.name,
        command=command,
        entrypoint=entrypoint,
        env=tuple(env.items()),
        mounts=mounts,
        cdi_devices=cdi,
        gpu_request=gpu_request,
        devices=devices,
        ipc=ipc,
        shm_size=shm,
        ulimits=ulimits,
        userns=userns,
        user=user,
        security_opt=security,
        network=network,
        hostname=req.hostname,
        add_hosts=req.add_hosts,
        stop_timeout=req.stop_timeout,
        labels=((RUN_LABEL, req.name),),
        notes=tuple(notes),
    )


def stop_note(req: RunRequest) -> str:
    """What a stop does, as the trainer will: a checkpoint where one is mounted (named by its
    host directory, where the user finds it), nothing saved without --ckpt (the trainer's exit
    4, slurm_limits.EXIT_STOPPED_UNSAVED)."""
    wait = f"stop: SIGTERM, then {req.stop_timeout}s for the trainer to finish its step"
    if req.ckpt is None:
        return f"{wait}; nothing is saved without --ckpt (exit {EXIT_STOPPED_UNSAVED})"
    return f"{wait} and checkpoint into {req.ckpt} (/ckpt in the container; exit 143)"

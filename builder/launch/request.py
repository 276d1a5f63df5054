"""What the user asked `trainimg run` for, and what this host looks like: the planner's inputs.

Both are plain data: hostfacts.py fills LaunchHost from the host, tests fill it by hand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from builder.errors import TrainimgError
from builder.judgement.gpu_identity import GpuIdentity
from builder.spec import layout

DATA = layout.DATA_DIR
CKPT = layout.CKPT_DIR
DEFAULT_STOP_TIMEOUT = 120  # seconds `podman stop` waits after SIGTERM: a checkpoint's time
DEFAULT_RDZV_PORT = 29500  # torchrun's default
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LaunchError(TrainimgError):
    """A run that cannot start as asked; says why and what to do (exit 2)."""


@dataclass(frozen=True)
class Rendezvous:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


GpuRequest = str | int | tuple[str, ...]  # all | none | a count | devices by index or UUID
_GPU_ID = re.compile(r"^(?:\d{1,3}|(?:GPU|MIG)-[0-9A-Fa-f-]{8,64})$")  # as nvidia-smi -L names


def parse_gpus(text: str) -> GpuRequest:
    """`all`, `none`, a positive count (the first N GPUs), or devices by index or UUID:
    `2,3`, `device=2`, `GPU-8f6e...` (docker's --gpus syntax; the CDI spec names them alike)."""
    if text in ("all", "none"):
        return text
    if text.isdigit() and int(text) > 0:  # a bare number counts; device=2 names one
        return int(text)
    ids = (
        []
        if text.isdigit()
        else [x.strip() for x in text.removeprefix("device=").split(",") if x.strip()]
    )
    if ids and len(set(ids)) == len(ids) and all(_GPU_ID.match(i) for i in ids):
        return tuple(ids)
    raise LaunchError(
        f"--gpus {text!r}: expected all, none, a number of GPUs (2: the first two), or devices "
        "by index or UUID (2,3 or device=2 or GPU-8f6e...; `nvidia-smi -L` lists them)"
    )


def parse_rdzv(text: str) -> Rendezvous:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(DEFAULT_RDZV_PORT)
    if not _HOST.match(host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise LaunchError(
            f"--rdzv {text!r}: expected HOST:PORT (a host name or IP address of node 0, a port "
            "1-65535), e.g. --rdzv node0:29500"
        )
    return Rendezvous(host, int(port))


def check_name(text: str, what: str) -> str:
    if not _NAME.match(text):
        raise LaunchError(
            f"{what} {text!r}: use letters, digits, '_', '.', '-' (at most 63, starting with a "
            "letter or digit)"
        )
    return text


def parse_add_host(text: str) -> tuple[str, str]:
    import ipaddress

    name, sep, ip = text.partition(":")
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        ip = ""
    if not sep or not ip or not _HOST.match(name):
        raise LaunchError(f"--add-host {text!r}: expected NAME:IP, e.g. --add-host node0:10.0.0.1")
    return name, ip


def parse_env(items: list[str]) -> dict[str, str]:
    """`--env KEY=VALUE` (repeatable)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.match(key):
            raise LaunchError(f"--env {item!r}: expected NAME=VALUE, e.g. --env NCCL_DEBUG=INFO")
        out[key] = value
    return out


@dataclass(frozen=True)
class RunRequest:
    image: str
    trainer_args: tuple[str, ...] = ()
    gpus: GpuRequest = "none"
    data: str | None = None  # host directory -> /data (read-only)
    ckpt: str | None = None  # host directory -> /ckpt
    nnodes: int = 1
    node_rank: int = 0
    rdzv: Rendezvous | None = None
    nproc_per_node: int | None = None  # default: the GPUs given to the container, else 1
    rdzv_id: str = "trainimg"
    network: str | None = None  # default: host for multi-node, none otherwise
    shm_size: str | None = None  # set: --shm-size instead of --ipc=host
    stop_timeout: int = DEFAULT_STOP_TIMEOUT
    name: str = "trainimg-run"
    hostname: str | None = None
    local_addr: str | None = None  # torchrun --local-addr: this node's address for the others
    add_hosts: tuple[tuple[str, str], ...] = ()  # --add-host NAME:IP (/etc/hosts entries)
    env: Mapping[str, str] = field(default_factory=dict)  # --env KEY=VALUE


# POSIX ACL entry tags (acl(5); the kernel's system.posix_acl_access xattr uses these values)
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 1, 2, 4, 8, 16, 32


@dataclass(frozen=True)
class Directory:
    """A host directory as stat() saw it (exists False: the rest is meaningless), with its
    POSIX ACL entries (tag, permission bits, uid/gid) when it has an extended ACL."""

    path: str
    exists: bool
    is_dir: bool = True
    uid: int = 0
    gid: int = 0
    mode: int = 0o755
    acl: tuple[tuple[int, int, int], ...] = ()

    def allows(self, uid: int, gid: int, bits: int) -> bool:
        """Whether a process of uid/gid (no supplementary groups: what `--user UID:GID`
        gives) gets `bits` (4 r, 2 w, 1 x), as access(2) decides: the owner's bits, a named
        user's entry, the groups' entries (any that grants), others; named users and groups
        limited by the mask (acl(5), "access check algorithm"). Root is never the container
        user, so CAP_DAC_OVERRIDE is not considered."""
        if uid == self.uid:
            return (self.mode >> 6) & bits == bits
        entries = self.acl or (
            (ACL_GROUP_OBJ, (self.mode >> 3) & 7, 0),
            (ACL_OTHER, self.mode & 7, 0),
        )
        mask = next((perm for tag, perm, _ in entries if tag == ACL_MASK), 7)
        for tag, perm, who in entries:
            if tag == ACL_USER and who == uid:
                return perm & mask & bits == bits
        group_perms = [
            perm & mask
            for tag, perm, who in entries
            if (tag == ACL_GROUP_OBJ and gid == self.gid) or (tag == ACL_GROUP and who == gid)
        ]
        if group_perms:
            return any(perm & bits == bits for perm in group_perms)
        other = next((perm for tag, perm, _ in entries if tag == ACL_OTHER), 0)
        return other & bits == bits


@dataclass(frozen=True)
class LaunchHost:
    engine: str  # podman | docker
    rootless: bool  # the engine runs without root (podman rootless: --userns=keep-id)
    uid: int  # the caller
    gid: int
    selinux_enforcing: bool = False
    cdi_devices: tuple[str, ...] = ()  # fully qualified: nvidia.com/gpu=0, nvidia.com/gpu=all
    rdma_devices: tuple[str, ...] = ()  # InfiniBand/RoCE device nodes: /dev/infiniband/*
    gpu_count: int = 0  # NVIDIA devices the driver lists
    driver: str | None = None  # the loaded NVIDIA kernel module's version
    driver_flavour: str | None = None  # open | proprietary (the loaded module's)
    # every device the driver lists, identified as preflight identifies it (PCI id, then name)
    gpus: tuple[GpuIdentity, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # the caller's environment
    dirs: Mapping[str, Directory] = field(default_factory=dict)  # --data / --ckpt, stat()ed

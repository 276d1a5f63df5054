"""What the user asked `trainimg run` for, and what this host looks like: the planner's inputs.

Both are plain data: hostfacts.py fills LaunchHost from the host, tests fill it by hand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from builder.errors import TrainimgError
from builder.nvidia_require.admission import VisibleGpu

DATA = "/data"
CKPT = "/ckpt"
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


def parse_gpus(text: str) -> str | int:
    """`all`, `none` or a positive count."""
    if text in ("all", "none"):
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise LaunchError(f"--gpus {text!r}: expected all, none or a number of GPUs (1, 2, ...)")


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
    gpus: str | int = "none"
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


@dataclass(frozen=True)
class Directory:
    """A host directory as stat() saw it (exists False: the rest is meaningless)."""

    path: str
    exists: bool
    is_dir: bool = True
    uid: int = 0
    gid: int = 0
    mode: int = 0o755

    def allows(self, uid: int, gid: int, bits: int) -> bool:
        """Whether uid/gid gets `bits` (4 r, 2 w, 1 x) from the mode (no ACLs, no root)."""
        if uid == self.uid:
            have = (self.mode >> 6) & 7
        elif gid == self.gid:
            have = (self.mode >> 3) & 7
        else:
            have = self.mode & 7
        return have & bits == bits


@dataclass(frozen=True)
class LaunchHost:
    engine: str  # podman | docker
    rootless: bool  # the engine runs without root (podman rootless: --userns=keep-id)
    uid: int  # the caller
    gid: int
    selinux_enforcing: bool = False
    cdi_devices: tuple[str, ...] = ()  # fully qualified: nvidia.com/gpu=0, nvidia.com/gpu=all
    gpu_count: int = 0  # NVIDIA devices the driver lists
    driver: str | None = None  # the loaded NVIDIA kernel module's version
    driver_flavour: str | None = None  # open | proprietary (the loaded module's)
    gpus: tuple[VisibleGpu, ...] = ()  # as libnvidia-container would judge them (arch, brand)
    env: Mapping[str, str] = field(default_factory=dict)  # the caller's environment
    dirs: Mapping[str, Directory] = field(default_factory=dict)  # --data / --ckpt, stat()ed

"""Read this host for the planner: SELinux, CDI specs, the NVIDIA driver and devices, the caller
and the directories to mount. Read-only; every file is optional (absent = not there)."""

from __future__ import annotations

import contextlib
import os
import stat
import struct
from collections.abc import Mapping
from pathlib import Path

from builder.host.this_host import cdi_devices, host_text, module_flavour, nvidia
from builder.launch.request import Directory, LaunchHost

SELINUX_ENFORCE = "/sys/fs/selinux/enforce"
ACL_XATTR = "system.posix_acl_access"
RDMA_DIR = "/dev/infiniband"


def selinux_enforcing(root: Path = Path("/")) -> bool:
    return (host_text(root / SELINUX_ENFORCE.lstrip("/")) or "0").strip() == "1"


def parse_acl(blob: bytes) -> tuple[tuple[int, int, int], ...]:
    """The kernel's `system.posix_acl_access` value: a version (2) and 8-byte entries of tag,
    permission bits and uid/gid, little-endian. Anything else: no ACL (mode bits alone)."""
    if len(blob) < 4 or (len(blob) - 4) % 8 or struct.unpack_from("<I", blob)[0] != 2:
        return ()
    return tuple((tag, perm & 7, who) for tag, perm, who in struct.iter_unpack("<HHI", blob[4:]))


def directory(path: str) -> Directory:
    try:
        st = os.stat(path)
    except OSError:
        return Directory(path, False)
    acl: tuple[tuple[int, int, int], ...] = ()
    with contextlib.suppress(OSError):  # no ACL, or a filesystem without them
        acl = parse_acl(os.getxattr(path, ACL_XATTR))
    mode = st.st_mode & 0o777
    return Directory(path, True, stat.S_ISDIR(st.st_mode), st.st_uid, st.st_gid, mode, acl)


def rdma_devices(root: Path = Path("/")) -> tuple[str, ...]:
    """The InfiniBand/RoCE device nodes (uverbs, rdma_cm, umad) NCCL's IB transport opens."""
    d = root / RDMA_DIR.lstrip("/")
    with contextlib.suppress(OSError):
        return tuple(
            f"{RDMA_DIR}/{e.name}"
            for e in sorted(d.iterdir(), key=lambda e: e.name)
            if stat.S_ISCHR(e.stat().st_mode)
        )
    return ()


def read_host(
    engine: str,
    rootless: bool,
    dirs: list[str],
    env: Mapping[str, str] | None = None,
    root: Path = Path("/"),
) -> LaunchHost:
    driver, gpus, count = nvidia(root)
    return LaunchHost(
        engine=engine,
        rootless=rootless,
        uid=os.getuid(),
        gid=os.getgid(),
        selinux_enforcing=selinux_enforcing(root),
        cdi_devices=cdi_devices(root) if engine == "podman" else (),
        rdma_devices=rdma_devices(root),
        gpu_count=count,
        driver=driver,
        driver_flavour=module_flavour(root),
        gpus=gpus,
        env=dict(os.environ if env is None else env),
        dirs={d: directory(d) for d in dirs},
    )


def port_in_use(host: str, port: int) -> bool:
    """True when `host:port` is a local address whose port something else already holds (node
    0 would fail to host the rendezvous there). A host that is not local is not ours to test."""
    import socket

    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as exc:
                if exc.errno == 98:  # EADDRINUSE
                    return True
    return False

"""Read this host for the planner: SELinux, CDI specs, the NVIDIA driver and devices, the caller
and the directories to mount. Read-only; every file is optional (absent = not there)."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import struct
from collections.abc import Mapping
from pathlib import Path

from builder.facts import host as host_rules
from builder.facts.host import CDI_SPEC_DIRS
from builder.judgement.gpu_identity import by_name as catalogue_gpu
from builder.launch.gpucheck import DRIVER_FILE
from builder.launch.request import Directory, LaunchHost
from builder.nvidia_require.admission import VisibleGpu
from builder.preflight import parsers

SELINUX_ENFORCE = "/sys/fs/selinux/enforce"
ACL_XATTR = "system.posix_acl_access"
RDMA_DIR = "/dev/infiniband"
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"
_MODEL = re.compile(r"^Model:\s*(.+)$", re.MULTILINE)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def selinux_enforcing(root: Path = Path("/")) -> bool:
    return (_read(root / SELINUX_ENFORCE.lstrip("/")) or "0").strip() == "1"


def cdi_devices(root: Path = Path("/")) -> tuple[str, ...]:
    """`kind=name` of every device in the CDI specs under /etc/cdi and /var/run/cdi."""
    out: list[str] = []
    for directory in CDI_SPEC_DIRS:
        d = root / directory.lstrip("/")
        with contextlib.suppress(OSError):
            for path in sorted(d.iterdir()):
                if path.suffix not in (".yaml", ".yml", ".json"):
                    continue
                text = _read(path)
                spec = parsers.cdi_spec(str(path), text) if text is not None else None
                if spec is None or isinstance(spec, str):
                    continue
                out += [f"{spec.kind}={name}" for name in spec.devices if name]
    return tuple(dict.fromkeys(out))


def nvidia(root: Path = Path("/")) -> tuple[str | None, tuple[VisibleGpu, ...], int]:
    """(driver, GPUs as libnvidia-container judges them, device count) from /proc."""
    module, gpus, count = _nvidia(root)
    return (str(module.version) if module else None), gpus, count


def module_flavour(root: Path = Path("/")) -> str | None:
    """open | proprietary: the loaded module's flavour (its /proc version line)."""
    text = _read(root / DRIVER_FILE.lstrip("/"))
    module = parsers.nvidia_version(text) if text else None
    return module.flavour if module else None


def _nvidia(root: Path) -> tuple[parsers.KernelModule | None, tuple[VisibleGpu, ...], int]:
    text = _read(root / DRIVER_FILE.lstrip("/"))
    module = parsers.nvidia_version(text) if text else None
    gpus: list[VisibleGpu] = []
    count = 0
    with contextlib.suppress(OSError):
        for entry in sorted((root / NVIDIA_GPUS.lstrip("/")).iterdir()):
            count += 1
            info = _read(entry / "information") or ""
            m = _MODEL.search(info)
            model = m[1].strip() if m else ""
            cat = catalogue_gpu(model, None) if model else None
            if cat is not None:
                gpus.append(
                    VisibleGpu(
                        f"{cat.cc[0]}.{cat.cc[1]}", host_rules.libnvc_brand(cat.brand), model
                    )
                )
    # an unidentified device makes per-GPU arch/brand terms unjudgeable: judge the driver alone
    known = tuple(gpus) if len(gpus) == count else ()
    return module, known, count


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

"""The offline base for Debian-family cells: debootstrap -> trimmed rootfs -> `podman import`.

Where no registry is reachable this is the only way to get a base image. The rootfs tarball is
cached (keyed by suite, mirror and package list) so a second machine run only re-imports it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from builder.errors import TrainimgError

Podman = Callable[..., str]

# What a Debian cell's Containerfile expects of its base, since an air-gapped build cannot run
# apt: python3.X with its venv module and headers, and the compiler torch.compile (Inductor's C++,
# Triton's launcher) and extensions need - g++ (with gcc), make, ninja.
INCLUDE = ("python3", "python3-venv", "python3-dev", "g++", "make", "ninja-build")
TRIM = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
    "usr/share/info",
    "var/log",
)


class BaseImageError(TrainimgError):
    pass


@dataclass(frozen=True)
class BaseSpec:
    tag: str
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    include: tuple[str, ...] = INCLUDE

    @property
    def key(self) -> str:
        blob = "|".join((self.suite, self.mirror, *self.include)).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def rootfs_tarball(spec: BaseSpec, cache_dir: Path, log: Callable[[str], None]) -> Path:
    """The cached, trimmed rootfs tarball for `spec`; made with debootstrap when missing."""
    tarball = cache_dir / f"rootfs-{spec.suite}-{spec.key}.tar"
    if tarball.exists():
        return tarball
    if shutil.which("debootstrap") is None:
        raise BaseImageError("debootstrap is not installed: run scripts/setup.sh")
    if os.geteuid() != 0:
        raise BaseImageError("debootstrap needs root to build the offline base")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".rootfs-") as tmp:
        root = Path(tmp) / "root"
        log(f"debootstrap {spec.suite} ({', '.join(spec.include)}) from {spec.mirror}")
        proc = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(spec.include)}",
                spec.suite,
                str(root),
                spec.mirror,
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            raise BaseImageError(f"debootstrap failed ({proc.returncode}):\n{tail}")
        for rel in TRIM:
            target = root / rel
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
        part = Path(tmp) / "rootfs.tar"
        subprocess.run(
            ["tar", "--numeric-owner", "--sort=name", "-C", str(root), "-cf", str(part), "."],
            check=True,
            timeout=600,
        )
        os.replace(part, tarball)
    return tarball


def make_offline_base(
    spec: BaseSpec,
    cache_dir: Path,
    podman: Podman,
    *,
    force: bool = False,
    log: Callable[[str], None] = lambda _msg: None,
) -> bool:
    """Import the base as `spec.tag` unless it exists; returns True when it was (re)made."""
    if _exists(podman, spec.tag) and not force:
        log(f"{spec.tag} exists")
        return False
    tarball = rootfs_tarball(spec, cache_dir, log)
    log(f"podman import {tarball.name} -> {spec.tag}")
    podman(
        "import",
        "--change",
        'CMD ["/bin/bash"]',
        "--change",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change",
        f"LABEL io.trainimg.base.suite={spec.suite}",
        str(tarball),
        spec.tag,
    )
    return True


def _exists(podman: Podman, tag: str) -> bool:
    try:
        podman("image", "inspect", "--format", "{{.Id}}", tag)
    except TrainimgError:
        return False
    return True

"""The offline base for Debian-family cells: debootstrap -> security and point-release
updates -> trimmed, normalized rootfs -> a docker-archive loaded through the engine's API
(podman or Docker Engine).

Where no registry is reachable this is the only way to get a base image. debootstrap fetches
one suite; the security (`<suite>-security`) and updates (`<suite>-updates`) suites are then
added and upgraded from inside the root, and the newest `Date:` of the Release files used is
recorded (label `io.trainimg.base.lists-date`, and so in every cell's lock record): a base is
as fresh as that date, whatever day it was loaded. The rootfs tarball is cached (keyed by
the recipe, suites, mirrors and package list) so a second machine run only loads it again.

Reproducible: the same apt lists give the same rootfs bytes (rootfs_normalize takes the build
host and day out; tar sorts names and clamps install-time mtimes to the lists date), and the
same rootfs the same image id in any store (base_archive). Measured: two debootstraps of
bookworm on one machine gave byte-identical 405 MB tarballs (benchmarks/base_repro.py).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from builder.build.base_archive import BaseConfig, oci_arch, write_archive
from builder.build.rootfs_normalize import epoch_of, normalize_root
from builder.build.streamed import run_streamed
from builder.engines.roles import ImageStore
from builder.errors import TrainimgError
from builder.facts.oses import DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR, DISTROS
from builder.progress import SILENT, Progress, size
from builder.spec.labels import (
    BASE_LISTS_DATE_LABEL,
    BASE_RECIPE_LABEL,
    BASE_SUITE_LABEL,
    BASE_SUITES_LABEL,
)

# What a Debian cell's Containerfile expects of its base, since an air-gapped build cannot run
# apt: python3.X with its venv module and headers, and the compiler torch.compile (Inductor's C++,
# Triton's launcher) and extensions need - g++ (with gcc), make, ninja.
INCLUDE = ("python3", "python3-venv", "python3-dev", "g++", "make", "ninja-build")
# The recipe's own version, in its key: a change of what the rootfs holds (rootfs_normalize)
# remakes cached tarballs and bases
RECIPE = "2"
ROOTFS_TRIM = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
    "usr/share/info",
    "var/log",
)
TOOL_TIMEOUT_S = 1800


class BaseImageError(TrainimgError):
    pass


@dataclass(frozen=True)
class BaseSpec:
    tag: str
    suite: str = DISTROS["debian12"].codename
    mirror: str = DEBIAN_MIRROR
    security_mirror: str = DEBIAN_SECURITY_MIRROR
    include: tuple[str, ...] = INCLUDE

    @property
    def suites(self) -> tuple[str, ...]:
        return (self.suite, f"{self.suite}-updates", f"{self.suite}-security")

    @property
    def key(self) -> str:
        blob = "|".join((RECIPE, *self.suites, self.mirror, self.security_mirror, *self.include))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def sources_list(self) -> str:
        return (
            f"deb {self.mirror} {self.suite} main\n"
            f"deb {self.mirror} {self.suite}-updates main\n"
            f"deb {self.security_mirror} {self.suite}-security main\n"
        )


def release_date(texts: list[str]) -> str:
    """The newest `Date:` of apt Release/InRelease files, as UTC ISO 8601 (pure)."""
    dates = []
    for text in texts:
        for line in text.splitlines():
            if line.startswith("Date:"):
                when = email.utils.parsedate_to_datetime(line.removeprefix("Date:").strip())
                dates.append(when.astimezone(dt.UTC))
                break
    if not dates:
        raise BaseImageError("no Date: in the apt Release files: cannot tell how fresh the base is")
    return max(dates).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def tree_bytes(root: Path) -> int:
    """The bytes of the regular files under `root` (what a heartbeat says of a new root)."""
    total = 0
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:  # a directory that went away (or is not readable) while debootstrap ran
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def _tool(
    argv: list[str],
    what: str,
    progress: Progress,
    root: Path,
    env: dict[str, str] | None = None,
) -> None:
    """Run one step of making the root, its lines through `progress` and its size the
    heartbeat's measure; a failure says its last 15 lines."""
    with progress.step(what, lambda: f"{size(tree_bytes(root))} written") as step:
        try:
            done = run_streamed(argv, step, timeout=TOOL_TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            raise BaseImageError(f"{what} did not finish in {TOOL_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise BaseImageError(f"{what} failed ({done.returncode}):\n{done.tail_text}")


def _chroot(root: Path, progress: Progress, *args: str) -> None:
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    _tool(["chroot", str(root), *args], f"{' '.join(args)} in the new root", progress, root, env)


def rootfs_tarball(
    spec: BaseSpec,
    cache_dir: Path,
    log: Callable[[str], None],
    progress: Progress = SILENT,
) -> Path:
    """The cached, trimmed rootfs tarball for `spec` (its lists date in `<tarball>.json`);
    made with debootstrap and upgraded from the updates and security suites when missing."""
    tarball = cache_dir / f"rootfs-{spec.suite}-{spec.key}.tar"
    if tarball.exists() and _meta(tarball).exists():
        return tarball
    if shutil.which("debootstrap") is None:
        raise BaseImageError("debootstrap is not installed: run scripts/setup.sh")
    if os.geteuid() != 0:
        raise BaseImageError("debootstrap needs root to build the offline base")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".rootfs-") as tmp:
        root = Path(tmp) / "root"
        log(f"debootstrap {spec.suite} ({', '.join(spec.include)}) from {spec.mirror}")
        debootstrap = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(spec.include)}",
            spec.suite,
            str(root),
            spec.mirror,
        ]
        _tool(debootstrap, f"debootstrap {spec.suite}", progress, root)
        (root / "etc/apt/sources.list").write_text(spec.sources_list())
        log(f"apt-get update && upgrade from {', '.join(spec.suites)}")
        _chroot(root, progress, "apt-get", "update", "-qq")
        _chroot(root, progress, "apt-get", "-y", "-qq", "upgrade")
        lists = root / "var/lib/apt/lists"
        date = release_date(
            [p.read_text(errors="replace") for p in sorted(lists.glob("*Release")) if p.is_file()]
        )
        for rel in ROOTFS_TRIM:
            target = root / rel
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
        normalize_root(root, date)
        part = Path(tmp) / "rootfs.tar"
        with progress.step("tar the rootfs", lambda: f"{size(part.stat().st_size)} written"):
            subprocess.run(tar_command(root, part, date), check=True, timeout=600)
        _meta(tarball).write_text(json.dumps({"lists_date": date, "suites": spec.suites}) + "\n")
        os.replace(part, tarball)
    return tarball


def tar_command(root: Path, out: Path, lists_date: str) -> list[str]:
    """GNU tar of `root` whose bytes depend on the tree alone: names sorted, numeric owners, no
    atime/ctime (the gnu format keeps mtime only) and every mtime after the lists date clamped to
    it (the files made at install time, the directories they went into)."""
    return [
        "tar",
        "--format=gnu",
        "--numeric-owner",
        "--sort=name",
        f"--mtime=@{epoch_of(lists_date)}",
        "--clamp-mtime",
        "-C",
        str(root),
        "-cf",
        str(out),
        ".",
    ]


def _meta(tarball: Path) -> Path:
    return tarball.with_name(tarball.name + ".json")


def lists_date(tarball: Path) -> str:
    try:
        return str(json.loads(_meta(tarball).read_text())["lists_date"])
    except (OSError, ValueError, KeyError) as exc:
        raise BaseImageError(f"{_meta(tarball)}: unreadable ({exc}); delete the tarball") from None


def base_config(spec: BaseSpec, date: str) -> BaseConfig:
    """The config a base gets (the same through either engine)."""
    return BaseConfig(
        cmd=("/bin/bash",),
        env=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",),
        labels={
            BASE_SUITE_LABEL: spec.suite,
            BASE_SUITES_LABEL: "+".join(spec.suites),
            BASE_LISTS_DATE_LABEL: date,
            BASE_RECIPE_LABEL: spec.key,
        },
        created_by=f"trainimg base: debootstrap {' '.join(spec.suites)} ({spec.key})",
    )


def make_offline_base(
    spec: BaseSpec,
    cache_dir: Path,
    engine: ImageStore,
    *,
    force: bool = False,
    log: Callable[[str], None] = lambda _msg: None,
    progress: Progress = SILENT,
) -> bool:
    """Load the base as `spec.tag` unless it exists; returns True when it was (re)made. Its
    image id is a function of the rootfs tarball alone (base_archive), checked after the load."""
    if engine.image_exists(spec.tag) and not force:
        recipe = engine.inspect_image(spec.tag).labels.get(BASE_RECIPE_LABEL)
        if recipe == spec.key:
            log(f"{spec.tag} exists")
            return False
        log(f"{spec.tag} exists but was made from another recipe ({recipe}): remaking it")
    tarball = rootfs_tarball(spec, cache_dir, log, progress)
    date = lists_date(tarball)
    log(f"load {tarball.name} -> {spec.tag}")
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".archive-") as tmp:
        archive = Path(tmp) / "base.tar"
        image_id = write_archive(
            tarball, archive, spec.tag, base_config(spec, date), date, oci_arch()
        )
        with progress.step(f"load {spec.tag}", lambda: f"{size(tarball.stat().st_size)} tarball"):
            engine.load_image(archive)
    loaded = engine.inspect_image(spec.tag).id
    if loaded != image_id:
        raise BaseImageError(
            f"{spec.tag}: the engine loaded image {loaded}, not {image_id} (the sha256 of the "
            "config written): it rewrote the config, so the base would not be reproducible"
        )
    return True

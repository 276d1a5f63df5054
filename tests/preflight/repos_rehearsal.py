"""The `--repos` rehearsal's parts: stand-in RPMs of NVIDIA's EL packages (real NEVRAs, the
provides NVIDIA's specs declare, empty payloads) built with rpmbuild, createrepo_c'd into
repositories, served over loopback HTTP by a server started and stopped by pid, and Debian's
own dnf pointed at them through a `dnf` first on PATH that adds only the sandbox's options
(--config, --installroot, reposdir, cachedir: nothing of this machine's dnf is read or
written). The probe's argv is preflight's, unchanged."""

from __future__ import annotations

import os
import selectors
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

RUN_S = 60  # every subprocess here ends within this

DRIVER = "580.95.05"
RUNNING = "5.14.0-503.35.1.el9_5.x86_64"  # el9-h100's running kernel
NEXT_WITH_KMOD = "5.14.0-570.12.1.el9_6.x86_64"  # NVIDIA published a kmod for it
NEXT_ERRATA = "5.14.0-570.17.1.el9_6.x86_64"  # an errata kernel: no kmod yet


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    release: str
    arch: str = "x86_64"
    epoch: int | None = None
    provides: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()

    def spec(self) -> str:
        lines = [
            f"Name: {self.name}",
            f"Version: {self.version}",
            f"Release: {self.release}",
            *([f"Epoch: {self.epoch}"] if self.epoch is not None else []),
            "Summary: stand-in for the rehearsal of trainimg preflight --repos",
            "License: none",
            f"BuildArch: {self.arch}",
            *(f"Provides: {p}" for p in self.provides),
            *(f"Requires: {r}" for r in self.requires),
            "%description",
            "An empty stand-in with a real NEVRA.",
            "%files",
            "",
        ]
        return "\n".join(lines)


def precompiled_kmod(kernel: str) -> Package:
    """kmod-nvidia-<driver>-<kernel version>-<release without dist> as NVIDIA's
    yum-packaging-precompiled-kmod kmod-nvidia.spec names it (Epoch 3, Release 2<dist>)."""
    version, rest = kernel.split("-", 1)
    release, dist = rest.rsplit(".", 1)[0].split(".el", 1)
    return Package(
        f"kmod-nvidia-{DRIVER}-{version}-{release}",
        DRIVER,
        f"2.el{dist}",
        epoch=3,
        provides=(f"nvidia-kmod = 3:{DRIVER}", f"kernel-modules = {kernel}"),
        requires=(f"(kernel = {kernel.rsplit('.', 1)[0]} if kernel)",),
    )


def kernel_devel(kernel: str) -> Package:
    version, rest = kernel.split("-", 1)
    release = rest.rsplit(".", 1)[0]
    return Package("kernel-devel", version, release, provides=(f"kernel-devel-uname-r = {kernel}",))


DRIVER_PKG = Package(
    "nvidia-driver", DRIVER, "1.el9", epoch=3, requires=(f"nvidia-kmod = 3:{DRIVER}",)
)
# The same driver, requiring a package its repository lacks (as when the driver's packages are
# published one by one): repoquery finds everything, the transaction does not resolve.
DRIVER_PKG_UNMET = Package(
    "nvidia-driver",
    DRIVER,
    "1.el9",
    epoch=3,
    requires=(f"nvidia-kmod = 3:{DRIVER}", f"nvidia-kmod-common = 3:{DRIVER}"),
)
DKMS_KMOD = Package(
    "kmod-nvidia-latest-dkms",
    DRIVER,
    "1.el9",
    epoch=3,
    provides=(f"nvidia-kmod = 3:{DRIVER}",),
    requires=("dkms",),
)
DKMS = Package("dkms", "3.1.5", "1.el9", arch="noarch")

# The nvidia-driver module's streams for the branch (artifacts left out: dnf's modular
# filtering then hides nothing, and `dnf module list` lists them).
MODULES_YAML = "".join(
    f"""---
document: modulemd
version: 2
data:
  name: nvidia-driver
  stream: "{stream}"
  version: 20251001000000
  context: "00000000"
  arch: x86_64
  summary: NVIDIA driver ({stream})
  description: stand-in stream
  license:
    module: [MIT]
  profiles:
    default:
      rpms: [nvidia-driver]
...
"""
    for stream in ("580", "580-dkms", "580-open")
)


def _run(argv: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=RUN_S)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])


def build_repo(work: Path, name: str, packages: list[Package], modules: bool = False) -> Path:
    """rpmbuild each package, createrepo_c them into `work/www/name`."""
    top, repo = work / f"rpmbuild-{name}", work / "www" / name
    top.mkdir(parents=True)
    for pkg in packages:
        spec = top / f"{pkg.name}.spec"
        spec.write_text(pkg.spec())
        _run(["rpmbuild", "-bb", "--quiet", "--nodeps", "--define", f"_topdir {top}", str(spec)])
    repo.mkdir(parents=True)
    for rpm in (top / "RPMS").rglob("*.rpm"):
        shutil.copy(rpm, repo)
    _run(["createrepo_c", "-q", str(repo)])
    if modules:
        modulemd = work / f"modules-{name}.yaml"
        modulemd.write_text(MODULES_YAML)
        _run(["modifyrepo_c", "--mdtype=modules", str(modulemd), str(repo / "repodata")])
    return repo


class Server:
    """`python3 -m http.server` on 127.0.0.1, an ephemeral port; stopped by its pid."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            ["python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "-d", str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.port = self._port(deadline=time.monotonic() + 10)

    def _port(self, deadline: float) -> int:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if sel.select(timeout=left):
                line = self.proc.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (...)"
                if "port" in line:
                    return int(line.split("port", 1)[1].split()[0])
                if not line:
                    break
        self.stop()
        raise AssertionError("the loopback HTTP server did not start within 10 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, 9)
                self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def sandboxed_dnf(work: Path, name: str, baseurl: str) -> Path:
    """A directory holding `dnf`: Debian's /usr/bin/dnf with its own config, install root,
    repositories and cache under `work/name` (nothing of this machine's dnf is used)."""
    root = work / name
    bindir, reposdir, cache, installroot = (root / d for d in ("bin", "repos.d", "cache", "root"))
    for d in (bindir, reposdir, cache, installroot):
        d.mkdir(parents=True, exist_ok=True)
    (reposdir / "nvidia.repo").write_text(
        f"[cuda-rhel9-x86_64]\nname=stand-in of NVIDIA's cuda-rhel9-x86_64\nbaseurl={baseurl}\n"
        "gpgcheck=0\nenabled=1\n"
    )
    conf = root / "dnf.conf"
    conf.write_text(f"[main]\nreposdir={reposdir}\ncachedir={cache}\ngpgcheck=0\n")
    opts = [
        f"--config={conf}",
        f"--installroot={installroot}",
        f"--setopt=reposdir={reposdir}",
        f"--setopt=cachedir={cache}",
        "--releasever=9",
        "--forcearch=x86_64",
        "--setopt=module_platform_id=platform:el9",
    ]
    wrapper = bindir / "dnf"
    wrapper.write_text("#!/bin/sh\nexec /usr/bin/dnf " + shlex.join(opts) + ' "$@"\n')
    wrapper.chmod(0o755)
    return bindir

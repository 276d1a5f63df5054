"""A private Docker Engine for the tests: Debian's `dockerd` (package docker.io) with its own
data root, exec root, unix socket, pid file and config, stopped by its pid afterwards.

It runs without systemd and without touching the host's network: no iptables, no bridge,
cgroupfs, overlay2, a nofile ulimit the machine allows (podman's defaults fail here for the
same reason: builder/engines/local_podman.py). dockerd starts its own managed containerd under
the exec root, in namespaces of its own, so it never shares one with another engine on the
machine. Stopping it unmounts whatever it left mounted under its directory (netns bind mounts,
overlay mounts of a container that was not cleanly removed), so the checkout can always be
deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DOCKERD = "/usr/sbin/dockerd"  # Debian's; /usr/local/bin/docker may be an unrelated binary
SOCKET_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


def mounts_under(directory: Path) -> list[str]:
    """Mount points at or below `directory` (from /proc/self/mountinfo), deepest first."""
    root = str(directory.resolve())
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == root or point.startswith(root + "/"):
            found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def unmount_all(directory: Path) -> list[str]:
    """Unmount every mount below `directory`; returns those that could not be unmounted."""
    for point in mounts_under(directory):
        if subprocess.run(["umount", point], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    return mounts_under(directory)


@dataclass
class Dockerd:
    root: Path
    nofile: str = "4096:4096"
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    started_in: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        if len(str(self.socket)) > SOCKET_MAX:
            raise ValueError(f"dockerd socket path too long for a unix socket: {self.socket}")

    @property
    def socket(self) -> Path:
        return self.root / "d.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pidfile(self) -> Path:
        return self.root / "dockerd.pid"

    @property
    def log(self) -> Path:
        return self.root / "dockerd.log"

    def command(self) -> list[str]:
        ns = "trainimg-" + hashlib.sha256(str(self.root).encode()).hexdigest()[:8]
        return [
            DOCKERD,
            "--data-root",
            str(self.root / "data"),
            "--exec-root",
            str(self.root / "exec"),
            "--host",
            self.url,
            "--pidfile",
            str(self.pidfile),
            "--config-file",
            str(self.root / "daemon.json"),
            "--containerd-namespace",
            ns,
            "--containerd-plugins-namespace",
            f"{ns}-plugins",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-masq=false",
            "--bridge=none",
            "--userland-proxy=false",
            "--exec-opt",
            "native.cgroupdriver=cgroupfs",
            "--storage-driver",
            "overlay2",
            "--default-ulimit",
            f"nofile={self.nofile}",
        ]

    def start(self, timeout: float = 60) -> str:
        """Start dockerd and wait until /_ping answers; returns its unix:// URL."""
        from builder.engines.discover import unix_ping

        if shutil.which(DOCKERD) is None:
            raise RuntimeError(f"{DOCKERD} is not installed: run scripts/setup.sh (docker.io)")
        for sub in ("data", "exec"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "daemon.json").write_text(json.dumps({}) + "\n")
        self.socket.unlink(missing_ok=True)
        started = time.monotonic()
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
                raise RuntimeError(f"dockerd exited ({self._proc.returncode}):\n{tail}")
            if unix_ping(self.socket):
                self.started_in = time.monotonic() - started
                return self.url
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"dockerd did not answer on {self.url} in {timeout:.0f}s; see {self.log}"
        )

    def stop(self) -> list[str]:
        """SIGTERM to its pid (SIGKILL to its process group after 20 s), then unmount what it
        left under its directory; returns mounts that are still there (should be none)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return unmount_all(self.root)

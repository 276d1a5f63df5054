"""An isolated podman for machines like CI's: its own config, storage and API service.

On a Debian 12 sandbox without systemd, podman works only with runc, cgroupfs, file events and
modest ulimits (measured here; the settings below say why each is needed). This writes that
configuration under one directory, points CONTAINERS_CONF / CONTAINERS_STORAGE_CONF at it, and can
serve the libpod and Docker-compatible APIs on a socket there. It never touches the host's own
podman state. When it is done (`release`) it unmounts what its storage mounted: podman's overlay
driver bind-mounts the graph root onto itself and mounts each running container's `merged`
directory, and those mounts outlive every podman process, so without this `rm -rf` of the
store fails with "Device or resource busy".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.engines.base import EngineError

_CONTAINERS_CONF = """\
# Written by trainimg (builder/engines/local_podman.py) for an isolated podman.
[containers]
# The sandbox lacks CAP_SYS_RESOURCE: podman's default 1048576 limits make runc fail.
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
log_driver = "json-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "{root}/run/libpod"

[network]
# Set explicitly: a store that falls back to CNI leaves a cni-podman0 bridge that silently
# swallows netavark's traffic on the same subnet.
network_backend = "netavark"
network_config_dir = "{root}/networks"
default_network = "{network}"
"""

_STORAGE_CONF = """\
[storage]
driver = "overlay"
graphroot = "{root}/storage"
runroot = "{runroot}"
"""


def _runroot(root: Path) -> Path:
    """Storage's runroot: short, on a runtime directory. With a runroot of 51 characters or
    more, podman 4.3 waits 20 s for every container to exit ("Exceeded conmon timeout"; measured
    here), so it cannot live under a checkout's .cache/."""
    h = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    for base in ("/run", os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir()):
        if base and os.access(base, os.W_OK):
            return Path(base) / "trainimg" / h / "storage"
    raise EngineError("no writable runtime directory for podman's runroot (/run, $TMPDIR)")


def _network(root: Path) -> tuple[str, str, str]:
    """A network name, bridge and /24 of its own per root, so two stores never collide."""
    h = int(hashlib.sha256(str(root).encode()).hexdigest()[:4], 16)
    return f"trainimg-{h:04x}", f"tim{h:04x}", f"10.{89 + (h >> 8) % 8}.{h % 256}"


@dataclass
class LocalPodman:
    root: Path
    _service: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    @property
    def socket_path(self) -> Path:
        return self.root / "run" / "podman.sock"

    @property
    def runroot(self) -> Path:
        return _runroot(self.root)

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def service_pid(self) -> int | None:
        """The pid of the service this object started (None when it started none)."""
        return self._service.pid if self._service is not None else None

    def env(self) -> dict[str, str]:
        return {
            "CONTAINERS_CONF": str(self.root / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf"),
        }

    def configure(self) -> dict[str, str]:
        """Write the configuration (idempotent) and export it to this process; returns the env."""
        if shutil.which("podman") is None:
            raise EngineError("podman is not installed: run scripts/setup.sh (it installs podman)")
        name, bridge, prefix = _network(self.root)
        for sub in ("run/libpod", "storage", "networks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        runroot = self.runroot
        runroot.mkdir(parents=True, exist_ok=True)
        files = {
            "containers.conf": _CONTAINERS_CONF.format(root=self.root, network=name),
            "storage.conf": _STORAGE_CONF.format(root=self.root, runroot=runroot),
            f"networks/{name}.json": json.dumps(
                {
                    "name": name,
                    "id": hashlib.sha256(name.encode()).hexdigest(),
                    "driver": "bridge",
                    "network_interface": bridge,
                    "created": "2026-01-01T00:00:00Z",
                    "subnets": [{"subnet": f"{prefix}.0/24", "gateway": f"{prefix}.1"}],
                    "ipv6_enabled": False,
                    "internal": False,
                    "dns_enabled": False,
                    "ipam_options": {"driver": "host-local"},
                },
                indent=2,
            ),
        }
        for rel, text in files.items():
            path = self.root / rel
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        env = self.env()
        os.environ.update(env)
        return env

    def start_service(self, timeout: float = 30, *, tmp_dir: Path | None = None) -> str:
        """Serve the APIs on the socket (unless already served); returns its unix:// URL.
        `tmp_dir`: where the service keeps each build's context, uploaded and unpacked (its
        TMPDIR; default /var/tmp) - a tmpfs keeps a 4 GB cu128 context twice off the disk."""
        self.configure()
        if self._ping():
            return self.url
        self.socket_path.unlink(missing_ok=True)
        log = (self.root / "run" / "service.log").open("ab")
        env = {**os.environ, **self.env()}
        if tmp_dir is not None:
            tmp_dir.mkdir(parents=True, exist_ok=True)
            env["TMPDIR"] = str(tmp_dir)
        self._service = subprocess.Popen(
            ["podman", "system", "service", "--time=0", self.url],
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._service.poll() is not None:
                raise EngineError(
                    f"podman system service exited ({self._service.returncode}); "
                    f"see {self.root / 'run' / 'service.log'}"
                )
            if self._ping():
                return self.url
            time.sleep(0.1)
        self.stop_service()
        raise EngineError(f"podman system service did not answer on {self.url} in {timeout:.0f}s")

    def stop_service(self, *, release: bool = True) -> None:
        """Stop the service this object started, then (unless told not to) `release` the store:
        a store left mounted is a checkout that `rm -rf` cannot remove."""
        if self._service is not None and self._service.poll() is None:
            os.killpg(self._service.pid, signal.SIGTERM)
            try:
                self._service.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._service.pid, signal.SIGKILL)
                self._service.wait()
        self._service = None
        if release:
            self.release()

    def processes(self) -> list[int]:
        """Pids of the podman tools (podman, conmon, netavark, ...) working on this store, found
        by the store's paths in their command line or CONTAINERS_*CONF environment."""
        return store_processes((self.root, self.runroot))

    def mounts(self) -> list[Path]:
        """Mount points under the store (graph root, containers' merged dirs, shm), deepest
        first."""
        return mounts_under((self.root, self.runroot))

    def release(self, *, force: bool = False, wait: float = 5) -> list[Path]:
        """Unmount what the store's storage mounted, once no podman tool works on it; returns
        what it unmounted. With force (a store only its owner uses, as the tests'), the store's
        running containers and remaining tools are stopped first. Without force, a store still in
        use (a podman command, a running container) after `wait` seconds is left as it is: its last
        user releases it."""
        if force:
            if shutil.which("podman") is not None:
                self.podman("stop", "--all", "--time", "2", check=False, timeout=120)
            _terminate(self.processes())
        else:  # a container's cleanup (`podman container cleanup`) may still be finishing
            deadline = time.monotonic() + wait
            while self.processes():
                if time.monotonic() > deadline:
                    return []
                time.sleep(0.2)
        done: list[Path] = []
        for point in self.mounts():
            proc = subprocess.run(["umount", str(point)], capture_output=True, check=False)
            if proc.returncode != 0:  # busy: detach it now, the kernel frees it when unused
                proc = subprocess.run(["umount", "-l", str(point)], capture_output=True)
            if proc.returncode == 0:
                done.append(point)
        return done

    def _ping(self) -> bool:
        if not self.socket_path.exists():
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2)
                s.connect(str(self.socket_path))
                s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
                head = s.recv(64)
        except OSError:
            return False
        return head.startswith(b"HTTP/1.") and b" 200 " in head

    def podman(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        """Run the podman CLI against this store; returns stdout."""
        proc = subprocess.run(
            ["podman", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env()},
        )
        if check and proc.returncode != 0:
            raise EngineError(f"podman {' '.join(args[:3])} failed: {proc.stderr.strip()[-2000:]}")
        return proc.stdout


ROOT_ENV = "TRAINIMG_PODMAN_ROOT"

_TOOLS = frozenset(
    {"podman", "conmon", "netavark", "aardvark-dns", "catatonit", "runc", "crun", "slirp4netns"}
)


def _unescape(field_: str) -> str:
    """/proc/self/mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field_)


def _under(path: str, roots: Sequence[Path]) -> bool:
    return any(path == str(r) or path.startswith(f"{r}/") for r in roots)


def mounts_under(
    roots: Sequence[Path], mountinfo: Path = Path("/proc/self/mountinfo")
) -> list[Path]:
    """Mount points at or below any of roots, deepest first (the order they can be unmounted)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    points = {_unescape(line.split()[4]) for line in lines if len(line.split()) > 4}
    found = [Path(p) for p in points if _under(p, roots)]
    return sorted(found, key=lambda p: (-len(p.parts), str(p)))


def store_processes(roots: Sequence[Path], proc: Path = Path("/proc")) -> list[int]:
    """Pids of podman's tools whose command line or CONTAINERS_*CONF names a path under roots."""
    me = os.getpid()
    found: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not argv or Path(os.fsdecode(argv[0])).name not in _TOOLS:
                continue
            words = [os.fsdecode(a) for a in argv]
            environ = (entry / "environ").read_bytes().split(b"\0")
            words += [
                os.fsdecode(e).split("=", 1)[1]
                for e in environ
                if e.startswith((b"CONTAINERS_CONF=", b"CONTAINERS_STORAGE_CONF="))
            ]
        except OSError:  # it exited, or is not ours to read
            continue
        if any(_under(w, roots) or any(f"{r}/" in w for r in roots) for w in words):
            found.append(int(entry.name))
    return found


def _terminate(pids: Sequence[int], timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL what is still there after timeout."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.1)
        pids = [p for p in pids if Path(f"/proc/{p}").exists()]
        if not pids:
            return


def podman_cli(local: LocalPodman | None) -> Callable[..., str]:
    """A podman CLI runner: the isolated store's when given, else podman as configured here."""
    if local is not None:
        return local.podman

    def run(*args: str, timeout: float = 600, check: bool = True) -> str:
        if shutil.which("podman") is None:
            raise EngineError("podman is not installed: run scripts/setup.sh")
        proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise EngineError(f"podman {' '.join(args[:3])} failed: {proc.stderr.strip()[-2000:]}")
        return proc.stdout

    return run

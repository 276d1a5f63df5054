"""Real OpenSSH hosts for the fleet tests: one sshd per network namespace.

Each host is a network namespace (`h29-<tag>-<i>`) joined to this machine by one veth pair
(a /30 under a 10.222.N.0/24 no route touches: tests/launch/slurm_cluster.py's `_free_subnet`),
running Debian's sshd in the foreground (`-D -e`, LogLevel VERBOSE) with its own host key and
config, in a mount namespace of its own where a copy of /etc/passwd adds the test user
`h29u` (uid 64029) with a home of the test's own: nothing is added to this machine's passwd.
The client side is an ssh_config the test passes with `--ssh-config` (its own known_hosts,
key and user), so ~/.ssh of the caller is neither read nor written. Two ways to stop answering
mid-run: `drop(i)` makes the host's namespace drop every packet it receives (nftables), and
`stop(i)` SIGSTOPs every sshd process of the host (listener and sessions): a hung sshd whose
kernel still keeps the TCP connection open.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.launch.slurm_cluster import _free_subnet

TOOLS = ("sshd", "ssh", "ssh-keygen", "ip", "unshare", "nft")
SSHD = "/usr/sbin/sshd"
USER, UID = "h29u", 64029


def missing_tools() -> list[str]:
    found = [t for t in TOOLS if shutil.which(t) or Path(f"/usr/sbin/{t}").exists()]
    return [t for t in TOOLS if t not in found]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30)


def _keygen(path: Path) -> str:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path))
    return (path.with_suffix(".pub")).read_text().strip()


def tree(root: Path) -> dict[str, str]:
    """Every path under `root` with its type, mode, owner and (for files) sha256."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        rel = str(p.relative_to(root))
        what = f"{st.st_mode:o} {st.st_uid}:{st.st_gid}"
        if p.is_file() and not p.is_symlink():
            what += " " + hashlib.sha256(p.read_bytes()).hexdigest()
        out[rel] = what
    return out


@dataclass
class SshdHosts:
    root: Path
    count: int
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    host_keys: list[str] = field(default_factory=list)
    # the homes live where the test user can reach them (pytest's tmp directories are 0700)
    homes: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="h29-homes-")))

    def ns(self, i: int) -> str:
        return f"h29-{self.tag}-{i}"

    def addr(self, i: int) -> str:
        return f"{self.subnet}.{4 * i + 2}"

    def home(self, i: int) -> Path:
        return self.homes / f"home{i}"

    @property
    def user_key(self) -> Path:
        return self.root / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"

    def up(self, known: list[int], timeout: float = 20) -> None:
        """Start every host; `known` lists those whose host key the client's known_hosts has."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.homes.chmod(0o755)
        self.subnet = self.subnet or _free_subnet()
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        public = _keygen(self.user_key)
        passwd = self.root / "passwd"
        for i in range(self.count):
            self._network(i)
            self._home(i, public)
            passwd.write_text(
                Path("/etc/passwd").read_text() + f"{USER}:x:{UID}:{UID}::{self.home(i)}:/bin/sh\n"
            )
            self.procs.append(self._sshd(i, passwd))
        self.known_hosts.write_text("".join(f"{self.addr(i)} {self.host_keys[i]}\n" for i in known))
        self.ssh_config.write_text(
            f"Host *\n  User {USER}\n  IdentityFile {self.user_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
        )
        deadline = time.monotonic() + timeout
        for i in range(self.count):
            while "Server listening" not in self.log(i):
                if self.procs[i].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"sshd {i} did not start: {self.log(i)}")
                time.sleep(0.05)

    def _network(self, i: int) -> None:
        ns, outside = self.ns(i), f"h29-{self.tag}-{i}"
        _run("ip", "netns", "add", ns)
        self.netns.append(ns)
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "addr", "add", f"{self.subnet}.{4 * i + 1}/30", "dev", outside)
        _run("ip", "link", "set", outside, "up")
        _run("ip", "-n", ns, "addr", "add", f"{self.addr(i)}/30", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")

    def _home(self, i: int, public: str) -> None:
        """The user's home: its key, and rc files that would leave a mark if any shell read
        them (a ~/.bashrc as a pyenv or conda install writes one)."""
        home = self.home(i)
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "authorized_keys").write_text(public + "\n")
        for rc in (".bashrc", ".profile", ".bash_profile", ".shrc"):
            (home / rc).write_text(f'echo "{rc} was read" >> "$HOME/rc-was-read"\n')
        for p in (home, *home.rglob("*")):
            os.chown(p, UID, UID)
        home.chmod(0o700)
        (home / ".ssh").chmod(0o700)

    def _sshd(self, i: int, passwd: Path) -> subprocess.Popen[bytes]:
        d = self.root / f"sshd{i}"
        d.mkdir()
        self.host_keys.append(" ".join(_keygen(d / "host_key").split()[:2]))
        own = d / "passwd"
        shutil.copy(passwd, own)
        (d / "sshd_config").write_text(
            f"ListenAddress {self.addr(i)}\nHostKey {d / 'host_key'}\nPidFile none\n"
            "UsePAM no\nLogLevel VERBOSE\nPasswordAuthentication no\nAcceptEnv none\n"
            "MaxStartups 20\n"
        )
        line = f"mount --bind {own} /etc/passwd && exec {SSHD} -D -e -f {d / 'sshd_config'}"
        return subprocess.Popen(
            ["ip", "netns", "exec", self.ns(i), "unshare", "--mount", "sh", "-c", line],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(d / "log").open("wb"),
            start_new_session=True,
        )

    def log(self, i: int) -> str:
        return (self.root / f"sshd{i}" / "log").read_text(errors="replace")

    def sessions(self, i: int) -> int:
        return self.log(i).count("Starting session:")

    def _pids(self, i: int) -> list[int]:
        """The sshd listener of host i and every process below it."""
        pids = [self.procs[i].pid]
        for pid in pids:
            kids = Path(f"/proc/{pid}/task/{pid}/children")
            with contextlib.suppress(OSError):
                pids += [int(k) for k in kids.read_text().split()]
        return pids

    def stop(self, i: int) -> None:
        for pid in self._pids(i):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def drop(self, i: int) -> None:
        """Host i's network drops every packet it receives from now on (nftables in its
        namespace): nothing answers, not even with a reset."""
        ns = self.ns(i)
        _run("ip", "netns", "exec", ns, "nft", "add", "table", "inet", "h29")
        _run("ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "h29", "in",
             "{ type filter hook input priority 0; policy drop; }")  # fmt: skip

    def down(self) -> None:
        for i, proc in enumerate(self.procs):
            for pid in reversed(self._pids(i)):  # sessions first, then the listener
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                    os.kill(pid, signal.SIGCONT)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        shutil.rmtree(self.homes, ignore_errors=True)
        for ns in self.netns:  # removing a namespace removes its end of the veth, and so ours
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)

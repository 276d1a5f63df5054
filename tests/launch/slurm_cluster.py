"""A real two-node Slurm cluster on this one machine, for tests/launch/test_slurm_cluster.py.

Debian's slurm-wlm (22.05) and munge run without systemd: munged in the foreground with its own
key, socket and state; slurmctld and two slurmd, each with `-D` (no daemonizing) and this
cluster's slurm.conf (SLURM_CONF; its own ports, StateSaveLocation, SlurmdSpoolDir,
ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, SlurmUser=root). Credentials live
30 s (`AuthInfo=...,cred_expire=30`, slurm.conf(5); the default is 120 s): a requeued job is held
back that long plus one second before it may start again, which is Slurm's own guard against
launching it while its old credential is still revoked on a node.

Each daemon lives in a network namespace the test makes, with its own host name (a UTS
namespace) and address; the namespaces are joined by a bridge in a hub namespace, and one veth
pair joins the hub to this machine's namespace (the registry and the test talk to the cluster
over it). Nothing but that one interface is added outside the namespaces, and every name is
prefixed h22-. Everything is stopped by pid and removed by name; `down()` returns what it found
left (processes in the namespaces, namespaces, links) so the test can assert there is none.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = ("slurmctld", "slurmd", "munged", "sbatch", "scontrol", "ip", "nsenter", "unshare")
SLURMCTLD_PORT, SLURMD_PORT = 16817, 16818  # inside the cluster's own namespaces


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=60)


def _free_subnet() -> str:
    """A /24 under 10.222.0.0/16 that no route on this machine touches: '10.222.N'."""
    routes = _run("ip", "-4", "route", "show", "table", "all").stdout
    used = [
        ipaddress.ip_network(w, strict=False) for w in routes.split() if "/" in w and w[0].isdigit()
    ]
    for n in range(100, 250):
        net = ipaddress.ip_network(f"10.222.{n}.0/24")
        if not any(net.overlaps(u) for u in used) and f"10.222.{n}." not in routes:
            return f"10.222.{n}"
    raise RuntimeError("no free 10.222.N.0/24 on this machine")


@dataclass
class SlurmCluster:
    root: Path
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: str = ""
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    netns: list[str] = field(default_factory=list)
    # what a job's user must reach - slurm.conf, munge's socket, slurmd's spool (each job's copy
    # of its script) - in a directory anyone may read: the test's tmp directory is root's alone
    # (0700), and a job may run as another user
    public: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="h22-public-", dir="/tmp"))
    )

    @property
    def name(self) -> str:
        return f"h22-{self.tag}"

    @property
    def nodes(self) -> tuple[str, str]:
        return (f"{self.name}-n0", f"{self.name}-n1")

    @property
    def host_addr(self) -> str:
        """This machine's address on the cluster's link (where the registry listens)."""
        return f"{self.subnet}.1"

    @property
    def ctl_addr(self) -> str:
        return f"{self.subnet}.254"

    @property
    def conf(self) -> Path:
        return self.public / "slurm.conf"

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def node_addr(self, i: int) -> str:
        return f"{self.subnet}.{i + 2}"

    # --- up ----------------------------------------------------------------------------------

    def up(self, timeout: float = 60) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.subnet = self.subnet or _free_subnet()
        self._network()
        self._munge()
        self._write_conf()
        hub = f"{self.name}-hub"
        self._daemon(
            "slurmctld", hub, f"{self.name}-ctl", ["slurmctld", "-D", "-f", str(self.conf)]
        )
        for i, node in enumerate(self.nodes):
            ns = f"{self.name}-{'n' + str(i)}"
            self._daemon(node, ns, node, ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for what, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{what} exited ({proc.returncode}); see {self.root}")
            out = self.ctl("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout.split()
            if out.count("idle") == len(self.nodes):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the nodes did not come up in {timeout:.0f}s; see {self.root}")

    def _network(self) -> None:
        hub = f"{self.name}-hub"
        for ns in (hub, f"{self.name}-n0", f"{self.name}-n1"):
            _run("ip", "netns", "add", ns)
            self.netns.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", hub, "addr", "add", f"{self.ctl_addr}/24", "dev", "br0")
        _run("ip", "-n", hub, "link", "set", "br0", "up")
        for i in (0, 1):
            node_ns = f"{self.name}-n{i}"
            _run("ip", "-n", hub, "link", "add", f"n{i}", "type", "veth", "peer", "name", "eth0",
                 "netns", node_ns)  # fmt: skip
            _run("ip", "-n", hub, "link", "set", f"n{i}", "master", "br0", "up")
            _run("ip", "-n", node_ns, "addr", "add", f"{self.node_addr(i)}/24", "dev", "eth0")
            _run("ip", "-n", node_ns, "link", "set", "eth0", "up")
        # this machine's end: the only interface added outside the namespaces
        _run("ip", "link", "add", self.name, "type", "veth", "peer", "name", "host", "netns", hub)
        _run("ip", "-n", hub, "link", "set", "host", "master", "br0", "up")
        _run("ip", "addr", "add", f"{self.host_addr}/24", "dev", self.name)
        _run("ip", "link", "set", self.name, "up")

    def _munge(self) -> None:
        self.public.chmod(0o755)
        d = self.root / "munge"
        d.mkdir(mode=0o700, exist_ok=True)
        key = d / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self.procs["munged"] = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}",
             f"--socket={self.public}/munge.socket", f"--pid-file={d}/pid",
             f"--log-file={d}/log", f"--seed-file={d}/seed"],
            stdout=subprocess.DEVNULL, stderr=(self.root / "munged.err").open("ab"),
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not (self.public / "munge.socket").exists():
            if self.procs["munged"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start; see {self.root / 'munged.err'}")
            time.sleep(0.05)

    def _write_conf(self) -> None:
        r = self.root
        (r / "state").mkdir(exist_ok=True)
        (self.public / "spool").mkdir(exist_ok=True)
        nodes = "\n".join(
            f"NodeName={n} NodeAddr={self.node_addr(i)} CPUs=2 RealMemory=2000 State=UNKNOWN"
            for i, n in enumerate(self.nodes)
        )
        self.conf.write_text(
            f"""ClusterName={self.name}
SlurmctldHost={self.name}-ctl({self.ctl_addr})
SlurmUser=root
SlurmctldPort={SLURMCTLD_PORT}
SlurmdPort={SLURMD_PORT}
AuthType=auth/munge
AuthInfo=socket={self.public}/munge.socket,cred_expire=30
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={self.public}/spool/%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PlugStackConfig=/dev/null
MailProg=/bin/true
KillWait=10
{nodes}
PartitionName={self.name} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        )

    def _daemon(self, what: str, netns: str, hostname: str, argv: list[str]) -> None:
        """`argv` in namespace `netns` with its own host name; nsenter, unshare and sh exec
        into it, so the pid is the daemon's."""
        line = " ".join(argv)
        self.procs[what] = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{netns}", "unshare", "--uts", "--",
             "sh", "-c", f"hostname {hostname} && exec {line}"],
            stdout=subprocess.DEVNULL, stderr=(self.root / f"{what}.err").open("ab"),
            env={**os.environ, **self.env()}, start_new_session=True,
        )  # fmt: skip

    # --- use ---------------------------------------------------------------------------------

    def ctl(
        self, *argv: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm client command (sbatch, scontrol, squeue, ...) from this machine."""
        full = {**os.environ, **(env or {}), **self.env()}
        done = subprocess.run(argv, capture_output=True, text=True, env=full, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.returncode}: {done.stderr.strip()}")
        return done

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as KEY -> VALUE."""
        text = self.ctl("scontrol", "show", "job", "-o", job_id).stdout
        return dict(w.split("=", 1) for w in text.split() if "=" in w)

    def logs(self, lines: int = 40) -> str:
        """The last lines of slurmctld's and each slurmd's log: what a failing test shows."""
        out = []
        for name in ["slurmctld", *(f"slurmd-{n}" for n in self.nodes)]:
            log = self.root / f"{name}.log"
            text = log.read_text(errors="replace").splitlines() if log.exists() else []
            out.append(f"--- {name}.log ---\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    # --- down --------------------------------------------------------------------------------

    def down(self) -> list[str]:
        """Stop everything by pid, remove the namespaces and the link; what was left behind
        (processes still in a namespace, namespaces, links) - empty when all went."""
        with contextlib.suppress(Exception):
            self.ctl("scancel", "--full", "--partition", self.name, check=False)
        left: list[str] = []
        for ns in self.netns[1:]:  # job steps and containers live in the node namespaces
            self._await_empty(ns, 30)
        for what in [w for w in self.procs if w != "munged"] + ["munged"]:
            proc = self.procs[what]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    left.append(f"{what} (pid {proc.pid}) ignored SIGTERM")
        if _run("ip", "link", "del", self.name, check=False).returncode != 0:
            left.append(f"link {self.name} was gone before its namespace")
        for ns in self.netns:
            pids = _run("ip", "netns", "pids", ns, check=False).stdout.split()
            if pids:
                left.append(f"processes in {ns}: {', '.join(pids)}")
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
            _run("ip", "netns", "del", ns, check=False)
        shutil.rmtree(self.public, ignore_errors=True)
        listed = _run("ip", "netns", "list").stdout
        left += [f"netns {ns}" for ns in self.netns if ns in listed.split()]
        if _run("ip", "link", "show", self.name, check=False).returncode == 0:
            left.append(f"link {self.name}")
        self.netns.clear()
        return left

    def _await_empty(self, ns: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        daemons = {p.pid for p in self.procs.values()}
        while time.monotonic() < deadline:
            pids = {int(p) for p in _run("ip", "netns", "pids", ns, check=False).stdout.split()}
            if not pids - daemons:
                return
            time.sleep(0.5)

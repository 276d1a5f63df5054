"""Host access: a pytest-testinfra Host behind the read-only allow-list.

testinfra gives one interface over this machine (`local://`), ssh (`ssh://user@host`,
`paramiko://`), containers (`podman://NAME`) and ansible; its backends are thin exec wrappers.
ReadOnlyHost is the only way preflight talks to a host: `run(*argv)` checks the argv against
`allowlist`, renders it quoted under a timeout, and returns an Output that says plainly whether
the command was missing, timed out or failed. A transport failure raises HostUnreachable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from builder.host.shown import shown
from builder.preflight import allowlist
from builder.preflight.ssh_transport import DeadlineSsh, ProbeTimeout, SshOptions

# Exit statuses of the first probe (`uname -r`, present on every Linux) that mean the host was
# not reached: ssh's own failure (255), podman exec of a container that is gone (125), and a
# transport program that is not installed here (127, e.g. no ssh client).
_TRANSPORT_RC = {255: "ssh", 125: "podman exec", 127: "the connection", 1: "the connection"}


class HostUnreachable(ConnectionError):
    """The host could not be reached at all; the message says how the connection failed."""


@dataclass(frozen=True)
class Output:
    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def missing(self) -> bool:
        """The program is not installed (the shell's or timeout's "command not found")."""
        return self.rc == 127

    @property
    def timed_out(self) -> bool:
        return self.rc in (124, 137)

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    @property
    def short(self) -> str:
        """The program and, when brief, its first argument (`dkms status`, `nvidia-smi`)."""
        first = self.argv[1:2]
        return " ".join([self.argv[0], *(a for a in first if len(a) <= 16 and "/" not in a)])

    def why(self) -> str:
        """Why the probe gave nothing usable, in words (empty when it succeeded)."""
        if self.ok:
            return ""
        if self.missing:
            return f"`{self.argv[0]}` is not installed (command not found)"
        if self.timed_out:
            return f"`{self.short}` timed out after {allowlist.TIMEOUT_S} s"
        detail = (self.stderr.strip() or self.stdout.strip()).splitlines()
        first = detail[0] if detail else "no output"
        return f"`{self.short}` failed (exit {self.rc}): {first}"


def _text(result: Any, stream: str) -> str:
    # testinfra's CommandResult.stdout may call back into the host (to guess an encoding) when
    # output is not ASCII: that would run a command outside the allow-list. Decode here.
    raw = getattr(result, f"_{stream}", None)
    if raw is None:
        raw = getattr(result, stream, "")
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return str(raw)


def _reason(exc: Exception) -> str:
    """A transport failure in words: testinfra's ssh backend raises RuntimeError(CommandResult),
    whose repr is no reason; its stderr is ("ssh: connect to host ... Connection refused")."""
    arg = exc.args[0] if exc.args else None
    if arg is not None and hasattr(arg, "rc"):
        via = "ssh" if getattr(arg, "rc", None) == 255 else "the connection"
        # ssh's own failure is on stderr; what stdout holds is the probe's, cut off
        err = _text(arg, "stderr").strip()
        text = (err or ("" if via == "ssh" else _text(arg, "stdout").strip())).splitlines()
        said = shown(text[-1] if text else "no output (the connection dropped)", 300)
        return f"{via} failed (exit {arg.rc}): {said}{_ssh_hint(_text(arg, 'stderr'))}"
    return f"{type(exc).__name__}: {exc}"


def _ssh_hint(stderr: str) -> str:
    """What to do about the ssh failures an operator meets first (BatchMode turns a prompt into
    one of these)."""
    if "Host key verification failed" in stderr or "HOST IDENTIFICATION HAS CHANGED" in stderr:
        return (
            " (the host key is unknown or changed, and preflight never asks: check the key "
            "out of band, e.g. `ssh-keyscan -p PORT HOST` against the host's own "
            "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`, then add it to known_hosts)"
        )
    if "Permission denied" in stderr:
        return " (BatchMode: no password is asked; use a key the host accepts)"
    if "not responding" in stderr or "timed out" in stderr:
        return " (the host stopped answering: see --connect-timeout and --server-alive-*)"
    return ""


# Seconds a probe may take on this side beyond its --timeout: the host's own `timeout -k 5`
# ends a slow program within --timeout + 5 s; past this, the transport itself is stuck.
PROBE_GRACE_S = 10


@dataclass
class ReadOnlyHost:
    host: Any  # testinfra.host.Host (or anything with the same run(command) method)
    name: str
    timeout: int = allowlist.TIMEOUT_S
    log: list[Output] = field(default_factory=list)
    deadline: float | None = None  # time.monotonic() by which the host must be done
    host_timeout: int | None = None  # the per-host deadline in seconds, for messages
    bounded: bool = False  # the transport takes run(line, timeout=S) (DeadlineSsh)

    def progress(self) -> str:
        """How far the host got, in words (for a host given up mid-run)."""
        if not self.log:
            return "no probe answered"
        return f"{len(self.log)} probe(s) answered, the last `{self.log[-1].short}`"

    def _wait(self, argv: tuple[str, ...], timeout: int) -> float:
        """Seconds this probe may take on this side; raises once the host's deadline passed."""
        wait = float(timeout + PROBE_GRACE_S)
        if self.deadline is None:
            return wait
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise HostUnreachable(
                f"{self.name}: the per-host deadline ({self.host_timeout} s, --host-timeout) "
                f"passed before `{' '.join(argv[:2])}`; {self.progress()}"
            )
        return min(wait, left)

    def run(self, *argv: str, timeout: int | None = None) -> Output:
        """One allowed probe under `timeout -k 5 S` (S: `timeout`, default the host's)."""
        seconds = self.timeout if timeout is None else timeout
        line = allowlist.probe_line(argv, seconds)
        wait = self._wait(argv, seconds)
        try:
            result = self.host.run(line, timeout=wait) if self.bounded else self.host.run(line)
        except ProbeTimeout as exc:
            raise HostUnreachable(
                f"{self.name}: stopped answering: `{' '.join(argv[:2])}` got {exc} on this "
                f"side; {self.progress()}"
            ) from exc
        except Exception as exc:  # ssh exit 255, paramiko/winrm errors, a vanished socket
            if not self.log:
                raise HostUnreachable(f"{self.name}: {_reason(exc)}") from exc
            raise HostUnreachable(
                f"{self.name}: the connection failed mid-run: {_reason(exc)}; {self.progress()}"
            ) from exc
        out = Output(tuple(argv), int(result.rc), _text(result, "stdout"), _text(result, "stderr"))
        self.log.append(out)
        return out

    def close(self) -> None:
        """End what the transport keeps open (an ssh master connection)."""
        backend = getattr(self.host, "backend", None)
        if isinstance(backend, DeadlineSsh):
            backend.close()

    def read(self, path: str) -> Output:
        return self.run("cat", path)

    def reach(self) -> Output:
        """The first probe: `uname -r`, present on every Linux. Raises HostUnreachable when it
        does not succeed: the transport failed (ssh 255, podman 125, docker 1 for a container
        that does not exist, 127 when the client is missing), or the host is not usable."""
        out = self.run("uname", "-r")
        if not out.ok:
            via = _TRANSPORT_RC.get(out.rc, "the first probe (`uname -r`)")
            raise HostUnreachable(f"{self.name}: {via} failed (exit {out.rc}): {out.why()}")
        return out


def connect(spec: str, timeout: int = allowlist.TIMEOUT_S) -> ReadOnlyHost:
    """A ReadOnlyHost for a testinfra host spec (`local://`, `ssh://u@h`, `podman://name`...)."""
    import testinfra  # imported here: the pure modules of preflight never need it

    try:
        host = testinfra.get_host(spec)
    except Exception as exc:  # an unknown scheme, a malformed spec, a missing ansible
        raise HostUnreachable(f"{spec}: {type(exc).__name__}: {exc}") from exc
    return ReadOnlyHost(host, spec, timeout)


def connect_validated(
    conn: Any,
    timeout: int = allowlist.TIMEOUT_S,
    control_dir: str | None = None,
    ssh: SshOptions | None = None,
    host_timeout: int | None = None,
) -> ReadOnlyHost:
    """A ReadOnlyHost for an inventory Connection: testinfra's backend gets each validated
    field as an argument; no URL is built or parsed, so no value can become a backend option
    (`ansible_port="1?ssh_config=FILE"` never reaches ssh: the inventory refuses it). Over ssh,
    the probes share one connection (a master socket in `control_dir`, ssh's ControlPath):
    a host costs one connection, not one per probe; ssh runs with deadlines and never prompts
    (builder/preflight/ssh_transport.py). `host_timeout` starts the host's deadline now."""
    import os

    import testinfra.backend
    import testinfra.host

    kwargs: dict[str, Any] = {}
    if conn.sudo:
        kwargs["sudo"] = True
        if conn.sudo_user:
            kwargs["sudo_user"] = conn.sudo_user
    name = conn.display
    try:
        if conn.backend == "local":
            backend = testinfra.backend.get_backend_class("local")("", **kwargs)
        elif conn.backend == "ssh":
            backend = DeadlineSsh(
                conn.host,
                conn.user,
                conn.port,
                os.path.expanduser(conn.identity_file) if conn.identity_file else "",
                tuple(getattr(conn, "ssh_args", ())),
                f"{control_dir}/%C" if control_dir is not None else None,
                ssh,
                **kwargs,
            )
        elif conn.backend == "paramiko" and getattr(conn, "ssh_args", ()):
            raise HostUnreachable(
                f"{name}: ansible_ssh_common_args/ansible_ssh_extra_args are ssh's: use "
                "ansible_connection=ssh (paramiko would drop them)"
            )
        elif conn.backend == "paramiko":
            host = f"[{conn.host}]" if ":" in conn.host else conn.host
            hostspec = (f"{conn.user}@" if conn.user else "") + host
            hostspec += f":{conn.port}" if conn.port else ""
            if conn.identity_file:
                kwargs["ssh_identity_file"] = os.path.expanduser(conn.identity_file)
            backend = testinfra.backend.get_backend_class(conn.backend)(hostspec, **kwargs)
        else:
            backend = testinfra.backend.get_backend_class(conn.backend)(conn.host, **kwargs)
    except Exception as exc:  # a missing paramiko, an unknown backend
        raise HostUnreachable(f"{name}: {type(exc).__name__}: {exc}") from exc
    deadline = time.monotonic() + host_timeout if host_timeout else None
    return ReadOnlyHost(
        testinfra.host.Host(backend),
        name,
        timeout,
        deadline=deadline,
        host_timeout=host_timeout,
        bounded=isinstance(backend, DeadlineSsh),
    )

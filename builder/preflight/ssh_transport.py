"""ssh for preflight: never a prompt, never a wait without an end, no rc file on the far side.

A testinfra ssh backend (so hosts stay behind a testinfra `Host`) whose ssh runs as an argv
list (no shell on this side), with `BatchMode=yes` (no password or host-key prompt: an unknown
key fails that host), `ConnectTimeout`, `ServerAliveInterval`/`ServerAliveCountMax` (a host
that stops answering mid-run drops its connection), stdin from /dev/null in a session of its
own (no terminal to prompt on), and a deadline on this side for every probe: past it, ssh is
killed and the probe raises ProbeTimeout. `StrictHostKeyChecking` is left to the user's ssh
configuration. On the host, sshd runs the user's login shell with `-c`; the probe line is
handed from there to `env -i PATH=... /bin/sh -c`, which reads no rc file (a bash of ours
never starts, so ~/.bashrc is not sourced by preflight; docs/preflight.md says what a login
shell of bash reads before any command).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from dataclasses import dataclass
from typing import Any

from testinfra.backend.base import CommandResult
from testinfra.backend.ssh import SshBackend

# The PATH a probe runs with: the system's directories only, never the user's.
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How long `ssh -O exit` (closing a host's master connection) may take.
CLOSE_TIMEOUT_S = 5


@dataclass(frozen=True)
class SshOptions:
    """How ssh is run for every host (the CLI's --connect-timeout, --server-alive-*,
    --ssh-config). A host that stops answering is dropped after about
    alive_interval * alive_count seconds."""

    connect_timeout: int = 10
    alive_interval: int = 5
    alive_count: int = 3
    config: str | None = None  # ssh -F FILE: the operator's own, never an inventory's


class ProbeTimeout(TimeoutError):
    """ssh gave no answer within the probe's deadline on this side (and was killed)."""


def remote_command(line: str) -> str:
    """What the login shell on the host runs: the probe line under `/bin/sh -c` with a fixed
    PATH and nothing else from the environment but HOME and USER (podman finds the user's
    store by HOME)."""
    return (
        f'exec env -i PATH={SAFE_PATH} HOME="$HOME" USER="$USER" LC_ALL=C '
        f"/bin/sh -c {shlex.quote(line)}"
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    # a grandchild (ssh's ControlPersist master) may hold the pipes: do not wait on it long
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=CLOSE_TIMEOUT_S)


class DeadlineSsh(SshBackend):  # type: ignore[misc]  # testinfra ships no type information
    """testinfra's ssh backend, run as an argv with deadlines (see the module docstring)."""

    NAME = "ssh"

    def __init__(
        self,
        host: str,
        user: str = "",
        port: int | None = None,
        identity_file: str = "",
        ssh_args: tuple[str, ...] = (),
        control_path: str | None = None,
        options: SshOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(f"[{host}]" if ":" in host else host, **kwargs)
        self.address = host
        self.user = user
        self.port = port
        self.identity_file = identity_file
        self.ssh_args = ssh_args
        self.control_path = control_path
        self.options = options or SshOptions()

    def get_sudo_command(self, command: str, sudo_user: str | None) -> str:
        # -n: sudo fails rather than asks for a password (there is no terminal to ask on)
        if sudo_user is None:
            return str(self.quote("sudo -n /bin/sh -c %s", command))
        return str(self.quote("sudo -n -u %s /bin/sh -c %s", sudo_user, command))

    def base_argv(self) -> list[str]:
        o = self.options
        argv = ["ssh"]
        if o.config:
            argv += ["-F", o.config]
        argv += [
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={o.connect_timeout}",
            "-o", f"ServerAliveInterval={o.alive_interval}",
            "-o", f"ServerAliveCountMax={o.alive_count}",
        ]  # fmt: skip
        if self.control_path:
            argv += ["-o", "ControlMaster=auto", "-o", "ControlPersist=30s"]
            argv += ["-o", f"ControlPath={self.control_path}"]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.identity_file:
            argv += ["-i", self.identity_file]
        return argv + list(self.ssh_args)

    def ssh_argv(self, command: str) -> list[str]:
        return [*self.base_argv(), "--", self.address, remote_command(command)]

    def run(
        self, command: str, *args: str, timeout: float | None = None, **kwargs: Any
    ) -> CommandResult:
        argv = self.ssh_argv(self.get_command(command, *args))
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # no controlling terminal: nothing can prompt
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise ProbeTimeout(f"no answer within {timeout:.3g} s") from None
        result = self.result(proc.returncode, self.encode(command), out, err)
        if proc.returncode == 255:  # ssh's own failure, as testinfra's backend reports it
            raise RuntimeError(result)
        return result

    def close(self) -> None:
        """Ask the host's master connection to exit (it would linger for ControlPersist)."""
        if not self.control_path:
            return
        argv = [*self.base_argv(), "-O", "exit", "--", self.address]
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=CLOSE_TIMEOUT_S,
                start_new_session=True,
            )

"""A ContainerRun as the `podman run` / `docker run` command line a user can paste (pure)."""

from __future__ import annotations

import shlex

from builder.engines.base import ContainerRun


def _limit(n: int) -> str:
    return str(n)


def argv(run: ContainerRun) -> list[str]:
    out = [run.engine, "run", "--rm", "--name", run.name]
    for key, value in run.labels:
        out += ["--label", f"{key}={value}"]
    if run.userns:
        out.append(f"--userns={run.userns}")
    if run.user:
        out += ["--user", run.user]
    out.append(f"--network={run.network}")
    if run.hostname:
        out += ["--hostname", run.hostname]
    for name, ip in run.add_hosts:
        out += ["--add-host", f"{name}:{ip}"]
    if run.ipc:
        out.append(f"--ipc={run.ipc}")
    if run.shm_size:
        out.append(f"--shm-size={run.shm_size}")
    for name, soft, hard in run.ulimits:
        out += ["--ulimit", f"{name}={_limit(soft)}" + ("" if soft == hard else f":{hard}")]
    for device in (*run.cdi_devices, *run.devices):
        out += ["--device", device]
    if run.gpu_request:
        out += ["--gpus", run.gpu_request]
    for opt in run.security_opt:
        out += ["--security-opt", opt]
    for m in run.mounts:
        out += ["--volume", f"{m.source}:{m.target}:{','.join(m.options)}"]
    for key, value in run.env:
        out += ["--env", f"{key}={value}"]
    out += ["--stop-signal", run.stop_signal, "--stop-timeout", str(run.stop_timeout)]
    if run.entrypoint is not None:
        # the CLI takes one entrypoint word (or JSON); the rest go in front of the command
        out += ["--entrypoint", run.entrypoint[0]]
        return [*out, run.image, *run.entrypoint[1:], *run.command]
    return [*out, run.image, *run.command]


def shell_line(run: ContainerRun) -> str:
    """One line, every word shell-quoted (shlex), that runs exactly this plan."""
    return shlex.join(argv(run))

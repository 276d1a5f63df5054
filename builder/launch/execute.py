"""Run a ContainerRun through the SDKs: create, start, stream its output, wait, remove.

The Engine interface (builder/engines/base.py) runs containers to completion and returns their
logs; a training run needs more: its output as it comes, the trainer's exit code, Ctrl-C or
SIGTERM passed on to the trainer (which checkpoints and exits 130/143), and options the Engine
does not carry (CDI devices, ipc, ulimits, userns, stop timeout). So this edge opens its own
client of the same kind on the same endpoint (engine.name, engine.base_url): a small adapter
per SDK, no change to the engines. The container is removed in a `finally`, whatever happens.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import IO, Any, Protocol

from builder.engines.base import Engine, EngineError
from builder.launch.plan import ContainerRun

Write = Callable[[bytes], None]
UNLIMITED = 2**64 - 1


def _rlimit(n: int) -> int:
    """libpod takes rlimits as uint64: unlimited (-1 on the CLI) is 2**64 - 1."""
    return n if n >= 0 else UNLIMITED


# (ContainerRun field, SDK keyword) of the plain options both SDKs name alike: host settings
# (docker: create_host_config) and container settings (docker: create_container)
_HOST_OPTIONS = (("ipc", "ipc_mode"), ("shm_size", "shm_size"), ("userns", "userns_mode"))
_CONTAINER_OPTIONS = (("user", "user"), ("hostname", "hostname"))


def _set_options(run: ContainerRun, options: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The options that are set, under their SDK keywords; an unset one keeps the default."""
    return {keyword: getattr(run, field) for field, keyword in options if getattr(run, field)}


def podman_kwargs(run: ContainerRun) -> dict[str, Any]:
    """podman-py `containers.create` keyword arguments for this plan (pure)."""
    kw: dict[str, Any] = {
        "name": run.name,
        "command": list(run.command),
        "environment": dict(run.env),
        "labels": dict(run.labels),
        "network_mode": run.network,
        "stop_signal": int(signal.Signals[run.stop_signal]),  # libpod takes the number
        "stop_timeout": run.stop_timeout,
        "ulimits": [{"Name": n, "Soft": _rlimit(s), "Hard": _rlimit(h)} for n, s, h in run.ulimits],
        "volumes": {
            m.source: {"bind": m.target, "extended_mode": list(m.options)} for m in run.mounts
        },
    }
    if run.entrypoint is not None:
        kw["entrypoint"] = list(run.entrypoint)
    if run.add_hosts:
        kw["extra_hosts"] = dict(run.add_hosts)
    kw.update(_set_options(run, _HOST_OPTIONS + _CONTAINER_OPTIONS))
    if run.cdi_devices:
        kw["devices"] = list(run.cdi_devices)
    if run.security_opt:  # libpod takes SELinux options without the CLI's "label=" prefix
        kw["security_opt"] = [o.removeprefix("label=") for o in run.security_opt]
    return kw


def docker_kwargs(run: ContainerRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """(create_container, create_host_config) keyword arguments of the docker SDK's low-level
    API for this plan (pure; the high-level API cannot set a stop timeout)."""
    from docker.types import DeviceRequest, Ulimit

    host: dict[str, Any] = {
        "binds": {m.source: {"bind": m.target, "mode": ",".join(m.options)} for m in run.mounts},
        "network_mode": run.network,
        "ulimits": [Ulimit(name=n, soft=s, hard=h) for n, s, h in run.ulimits],
    }
    if run.add_hosts:
        host["extra_hosts"] = dict(run.add_hosts)
    host.update(_set_options(run, _HOST_OPTIONS))
    if run.security_opt:
        host["security_opt"] = list(run.security_opt)
    if run.gpu_request:
        count = -1 if run.gpu_request == "all" else int(run.gpu_request)
        host["device_requests"] = [DeviceRequest(count=count, capabilities=[["gpu"]])]
    create: dict[str, Any] = {
        "name": run.name,
        "command": list(run.command),
        "environment": dict(run.env),
        "labels": dict(run.labels),
        "stop_signal": run.stop_signal,
        "stop_timeout": run.stop_timeout,
    }
    if run.entrypoint is not None:
        create["entrypoint"] = list(run.entrypoint)
    create.update(_set_options(run, _CONTAINER_OPTIONS))
    return create, host


class RunClient(Protocol):
    def rootless(self) -> bool: ...
    def create(self, run: ContainerRun) -> str: ...
    def start(self, cid: str) -> None: ...
    def logs(self, cid: str, stderr: bool) -> Iterator[bytes]: ...
    def wait(self, cid: str) -> int: ...
    def kill(self, cid: str, sig: str) -> None: ...
    def remove(self, cid: str) -> None: ...
    def close(self) -> None: ...


class _Podman:
    def __init__(self, url: str) -> None:
        import podman

        self._client = podman.PodmanClient(base_url=url, timeout=None)

    def rootless(self) -> bool:
        info = self._client.info()  # type: ignore[no-untyped-call]
        return bool(((info.get("host") or {}).get("security") or {}).get("rootless"))

    def create(self, run: ContainerRun) -> str:
        return str(self._client.containers.create(run.image, **podman_kwargs(run)).id)

    def start(self, cid: str) -> None:
        self._client.containers.get(cid).start()

    def logs(self, cid: str, stderr: bool) -> Iterator[bytes]:
        out = self._client.containers.get(cid).logs(
            stream=True, follow=True, stdout=not stderr, stderr=stderr
        )
        return iter(out) if not isinstance(out, bytes) else iter((out,))

    def wait(self, cid: str) -> int:
        return int(self._client.containers.get(cid).wait())

    def kill(self, cid: str, sig: str) -> None:
        self._client.containers.get(cid).kill(signal=sig)

    def remove(self, cid: str) -> None:
        from podman import errors as perr

        with contextlib.suppress(perr.NotFound):
            self._client.containers.get(cid).remove(force=True, v=True)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]


class _Docker:
    def __init__(self, url: str) -> None:
        import docker

        from builder.engines.docker import API_VERSION

        self._api: Any = docker.APIClient(base_url=url, version=API_VERSION, timeout=None)

    def rootless(self) -> bool:
        return any("rootless" in str(o) for o in self._api.info().get("SecurityOptions") or ())

    def create(self, run: ContainerRun) -> str:
        create, host = docker_kwargs(run)
        config = self._api.create_host_config(**host)
        return str(self._api.create_container(run.image, host_config=config, **create)["Id"])

    def start(self, cid: str) -> None:
        self._api.start(cid)

    def logs(self, cid: str, stderr: bool) -> Iterator[bytes]:
        return iter(self._api.logs(cid, stream=True, follow=True, stdout=not stderr, stderr=stderr))

    def wait(self, cid: str) -> int:
        return int(self._api.wait(cid).get("StatusCode", -1))

    def kill(self, cid: str, sig: str) -> None:
        self._api.kill(cid, signal=sig)

    def remove(self, cid: str) -> None:
        from docker import errors as derr

        with contextlib.suppress(derr.NotFound):
            self._api.remove_container(cid, force=True, v=True)

    def close(self) -> None:
        self._api.close()


def client_for(engine: Engine) -> RunClient:
    """A run client of the engine's kind on the engine's endpoint (the adapter to Engine)."""
    if engine.name == "podman":
        return _Podman(engine.base_url)
    return _Docker(engine.base_url)


@contextlib.contextmanager
def _forward_signals(send: Callable[[str], None]) -> Iterator[None]:
    """SIGINT/SIGTERM to trainimg become the same signal to the container, once each; the
    trainer then finishes its step, checkpoints and exits 130/143, which is what we return."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        threading.Thread(target=send, args=(name,), daemon=True).start()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _pump(open_stream: Callable[[], Iterator[bytes]], write: Write, ended: threading.Event) -> None:
    """Copy the container's stream to `write`. A follow request made just after start can
    end at once, empty (podman 4.3: measured here), so an empty stream is asked for again
    until the container has ended; a stream that delivered anything is read to its end."""
    while True:
        got = False
        with contextlib.suppress(Exception):  # the stream breaks when the container goes
            for chunk in open_stream():
                got = True
                write(chunk)
        if got or ended.is_set():
            return
        ended.wait(0.2)


def _writer(stream: IO[str]) -> Write:
    def write(data: bytes) -> None:
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
        else:
            stream.write(data.decode("utf-8", errors="replace"))
            stream.flush()

    return write


def execute(
    client: RunClient,
    run: ContainerRun,
    *,
    out: Write | None = None,
    err: Write | None = None,
    on_started: Callable[[str], None] | None = None,
) -> int:
    """Create and start the container, stream stdout/stderr, return the trainer's exit code.
    The container is removed whatever happens (an engine error, Ctrl-C)."""
    out = out or _writer(sys.stdout)
    err = err or _writer(sys.stderr)
    cid = None
    try:
        try:
            cid = client.create(run)
            client.start(cid)
        except Exception as exc:  # the SDKs raise their own APIError types
            why = _explain(exc)
            raise EngineError(f"{run.engine}: could not start {run.image}: {why}") from None
        if on_started is not None:
            on_started(cid)
        started = cid
        ended = threading.Event()
        pumps = [
            threading.Thread(
                target=_pump,
                args=(functools.partial(client.logs, started, s), w, ended),
                daemon=True,
            )
            for s, w in ((False, out), (True, err))
        ]
        for t in pumps:
            t.start()
        with _forward_signals(lambda sig: _quiet(client.kill, started, sig)):
            code = client.wait(started)
        ended.set()
        for t in pumps:
            t.join(timeout=30)
        return code
    finally:
        if cid is not None:
            _remove(client, cid, run)


def _remove(client: RunClient, cid: str, run: ContainerRun) -> None:
    try:
        client.remove(cid)
    except Exception as exc:  # the engine went away meanwhile: say what is left behind
        raise EngineError(
            f"{run.engine}: could not remove container {run.name} ({_explain(exc)}); remove it "
            f"with `{run.engine} rm -f {run.name}`"
        ) from None


def _quiet(fn: Callable[[str, str], None], cid: str, sig: str) -> None:
    with contextlib.suppress(Exception):
        fn(cid, sig)


def _explain(exc: Exception) -> str:
    return str(getattr(exc, "explanation", None) or exc).strip()

"""Find a container engine to talk to, in a fixed, documented order (docs/build.md).

1. `--url URL` (with `--engine` choosing the SDK; podman when not given)
2. CONTAINER_HOST (podman's own variable)           -> podman  (docker SDK with --engine docker)
3. DOCKER_HOST                                      -> docker  (ignored for --engine podman)
4. $TRAINIMG_PODMAN_ROOT: an isolated podman store; its API service is started here when no
   service answers on its socket, and stopped again when the command ends
5. the usual sockets: rootful podman (/run/podman/podman.sock), rootless podman
   ($XDG_RUNTIME_DIR/podman/podman.sock), Docker (/var/run/docker.sock, rootless
   $XDG_RUNTIME_DIR/docker.sock). The docker SDK may use a podman socket; podman-py only podman's.
6. the checkout's own isolated store, `.cache/podman` of the nearest directory (the current one
   or above) holding matrix.yaml, when scripts/demo.sh made it there; used like 4. It is only
   found, never created: a host with its own engine (1-3, 5) keeps using that engine.
   TRAINIMG_PODMAN_ROOT set to an empty string turns 4 and 6 off.

An explicitly named endpoint (1-3) that does not answer is an error naming it; it does not
fall through. Nothing reachable -> EngineUnavailable (exit 2) saying how to start one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.engines import service_users
from builder.engines.base import EngineError, EngineUnavailable
from builder.engines.local_podman import ROOT_ENV, LocalPodman
from builder.engines.roles import Engine

# Engine.name of each SDK engine: what --engine and Endpoint.kind choose between.
ENGINE_NAMES = ("podman", "docker")

# The URL schemes the two SDKs connect through (podman-py: unix, tcp, ssh, http+unix; the
# docker SDK: unix, tcp, ssh, http, https).
URL_SCHEMES = ("unix", "tcp", "ssh", "http", "https", "http+unix")
URL_FORMS = "unix:///PATH/TO.sock, tcp://HOST:PORT or ssh://USER@HOST"

ROOTFUL_PODMAN = Path("/run/podman/podman.sock")
DOCKER_SOCKETS = (Path("/var/run/docker.sock"), Path("/run/docker.sock"))

CHECKOUT_STORE = Path(".cache") / "podman"

HOW_TO_START = (
    "start one, e.g.:\n"
    "  scripts/demo.sh        # makes this checkout's isolated podman store (.cache/podman), "
    "which every trainimg command here then finds\n"
    "  export TRAINIMG_PODMAN_ROOT=$PWD/.cache/podman   # trainimg starts an isolated podman "
    "service itself (scripts/setup.sh installs podman)\n"
    "  podman system service --time=0 unix:///run/podman/podman.sock &   # or a rootful service\n"
    "  export CONTAINER_HOST=unix:///run/podman/podman.sock              # ...and point at it"
)


@dataclass
class Endpoint:
    kind: str  # which SDK: podman | docker
    url: str
    source: str  # where it was found, for messages: "--url", "CONTAINER_HOST", ...
    local: LocalPodman | None = field(default=None, repr=False)
    started: bool = False  # True when this process started the service (and must stop it)
    started_at: float = 0.0
    joined: bool = False  # True when this process counts as a user of the isolated service

    def connect(self) -> Engine:
        if self.kind == "podman":
            from builder.engines.podman import PodmanEngine

            return PodmanEngine(self.url)
        from builder.engines.docker import DockerEngine

        return DockerEngine(self.url)

    def close(self) -> None:
        """Stop the isolated service when this process is its last user (two trainimg commands
        on one store share it: engines/service_users.py). A build the service was running when
        it stopped (Ctrl-C) leaves buildah's working container in storage, and a container it
        started may still run: those created since this command began are removed, and the
        store is released (unmounted), so nothing stray is left behind."""
        if not (self.joined and self.local is not None):
            return
        self.joined = False
        with service_users.locked(self.local.root):
            last = service_users.leave(self.local.root)  # the last user stops it, by its pid
        if not last:
            return  # another trainimg command still uses the service (it outlives us)
        self.local.stop_service(release=False)  # reap our own child, if we started it
        self.started = False
        with contextlib.suppress(EngineError, ValueError, OSError, subprocess.SubprocessError):
            listed = json.loads(self.local.podman("ps", "--all", "--external", "--format", "json"))
            stray = [
                c["Id"]
                for c in listed
                if int(c.get("Created", 0)) >= self.started_at
                and (
                    c.get("State") == "running"
                    or (
                        c.get("State") == "storage"
                        and any("-working-container" in n for n in c.get("Names", ()))
                    )
                )
            ]
            if stray:
                self.local.podman("rm", "--force", "--time", "1", *stray, check=False)
        self.local.release()


def unix_ping(path: Path, timeout: float = 2.0) -> bool:
    """True when an API answers GET /_ping with 200 on this unix socket."""
    if not path.is_socket():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
            head = s.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.") and b" 200 " in head


def url_problem(url: str) -> str | None:
    """What is wrong with an engine URL (--url, CONTAINER_HOST, DOCKER_HOST); None: nothing.
    Without this, `127.0.0.1:1` reached an SDK (a traceback) or an `export` line (env)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return f"has no scheme: write {URL_FORMS}"
    if scheme not in URL_SCHEMES:
        return f"{scheme}:// is not a scheme the engines speak ({', '.join(URL_SCHEMES)})"
    if not rest.strip("/"):
        return f"names no socket or host: write {URL_FORMS}"
    return None


def _shown(text: str, limit: int = 120) -> str:
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


def _reachable(url: str) -> bool:
    if url.startswith("unix://"):
        return unix_ping(Path(url.removeprefix("unix://")))
    return True  # tcp:// and ssh:// are tried by the SDK itself (connect checks the version)


@dataclass(frozen=True)
class _Candidate:
    kind: str
    url: str
    source: str
    explicit: bool


def _candidates(
    engine: str | None,
    url: str | None,
    env: Mapping[str, str],
    docker_sockets: Sequence[Path],
    rootful_podman: Path,
) -> list[_Candidate]:
    out: list[_Candidate] = []
    if url:
        return [_Candidate(engine or "podman", url, "--url", True)]
    if env.get("CONTAINER_HOST"):
        out.append(_Candidate(engine or "podman", env["CONTAINER_HOST"], "CONTAINER_HOST", True))
    if env.get("DOCKER_HOST") and engine != "podman":
        out.append(_Candidate("docker", env["DOCKER_HOST"], "DOCKER_HOST", True))
    if out:
        return out[:1]
    podmans = [(rootful_podman, "rootful podman socket")]
    runtime_dir = env.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        podmans.append((Path(runtime_dir) / "podman" / "podman.sock", "rootless podman socket"))
    dockers = [(p, "docker socket") for p in docker_sockets]
    if runtime_dir:
        dockers.append((Path(runtime_dir) / "docker.sock", "rootless docker socket"))
    if engine == "docker":
        sockets = [("docker", p, s) for p, s in dockers] + [("docker", p, s) for p, s in podmans]
    elif engine == "podman":
        sockets = [("podman", p, s) for p, s in podmans]
    else:
        sockets = [("podman", p, s) for p, s in podmans] + [("docker", p, s) for p, s in dockers]
    return [_Candidate(k, f"unix://{p}", f"{s} {p}", False) for k, p, s in sockets]


def checkout_store(cwd: Path | None = None) -> Path | None:
    """The isolated store of the checkout around cwd (`<dir with matrix.yaml>/.cache/podman`),
    when one was made there (its storage.conf exists); None otherwise."""
    here = (cwd or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "matrix.yaml").is_file():
            store = d / CHECKOUT_STORE
            return store if (store / "storage.conf").is_file() else None
    return None


@dataclass(frozen=True)
class Choice:
    """Where discovery leads, before anything is started: an engine URL, or an isolated store
    (whose service discover() starts)."""

    kind: str
    url: str
    source: str
    store: Path | None = None


@dataclass(frozen=True)
class EngineSearch:
    """What discovery is asked (--engine, --url) and where it looks: the one parameter list of
    locate() and discover(). Tests point the places at temporary paths; env None is os.environ,
    and only then (or with cwd given) is the checkout's own store looked for."""

    engine: str | None = None
    url: str | None = None
    env: Mapping[str, str] | None = None
    docker_sockets: Sequence[Path] = DOCKER_SOCKETS
    rootful_podman: Path = ROOTFUL_PODMAN
    cwd: Path | None = None


def locate(search: EngineSearch = EngineSearch()) -> Choice:
    """The engine the documented order leads to; starts and creates nothing."""
    engine, url, cwd = search.engine, search.url, search.cwd
    if engine is not None and engine not in ENGINE_NAMES:
        raise EngineError(f"unknown engine {engine!r}: choose {' or '.join(ENGINE_NAMES)}")
    env = os.environ if search.env is None else search.env
    candidates = _candidates(engine, url, env, search.docker_sockets, search.rootful_podman)
    if candidates and candidates[0].explicit:
        c = candidates[0]
        problem = url_problem(c.url)
        if problem is not None:
            said = (
                f"--url {_shown(c.url)}" if c.source == "--url" else f"{c.source}={_shown(c.url)}"
            )
            raise EngineError(f"{said}: {problem}")
        if not _reachable(c.url):
            raise EngineUnavailable(
                f"no engine answers at {c.url} (from {c.source}); " + HOW_TO_START
            )
        return Choice(c.kind, c.url, c.source)
    root = env.get(ROOT_ENV)
    if root:
        local = LocalPodman(Path(root))
        return Choice(engine or "podman", local.url, ROOT_ENV, local.root)
    for c in candidates:
        if _reachable(c.url):
            return Choice(c.kind, c.url, c.source)
    # An explicit env without cwd (a test's) looks at no checkout: only the real one does.
    look = root is None and (cwd is not None or env is os.environ)
    store = checkout_store(cwd) if look else None
    if store is not None:
        local = LocalPodman(store)
        return Choice(engine or "podman", local.url, f"checkout store {local.root}", local.root)
    tried = ", ".join(c.source for c in candidates) or "nothing"
    raise EngineUnavailable(
        "no container engine is reachable (tried CONTAINER_HOST, DOCKER_HOST, "
        f"{ROOT_ENV}, {tried}, ./{CHECKOUT_STORE}); " + HOW_TO_START
    )


def discover(
    search: EngineSearch = EngineSearch(), log: Callable[[str], None] = lambda _msg: None
) -> Endpoint:
    """The first reachable engine in the documented order; starts the service of the isolated
    podman store ($TRAINIMG_PODMAN_ROOT or the checkout's) when that is where the order leads
    (Endpoint.close stops it and releases the store)."""
    choice = locate(search)
    if choice.store is None:
        return Endpoint(choice.kind, choice.url, choice.source)
    local = LocalPodman(choice.store)
    since = int(time.time())
    with service_users.locked(local.root):  # one starter at a time; users counted
        answering = unix_ping(local.socket_path)
        try:
            found = local.start_service()
        except EngineError as exc:
            raise EngineUnavailable(f"{choice.source}: {exc}") from None
        except BaseException:
            local.stop_service()  # Ctrl-C while it starts: leave no service behind
            raise
        service_users.join(local.root, local.service_pid)
    if not answering:
        log(f"started an isolated podman service on {found} ({choice.source})")
    return Endpoint(choice.kind, found, choice.source, local, not answering, since, joined=True)


def isolated_store(env: Mapping[str, str] | None = None) -> LocalPodman | None:
    """The isolated store the podman CLI steps of a command (`trainimg base`) should use: the
    one discovery leads to, configured; None when discovery leads to the host's own engine (or
    to none: the podman CLI then reports that itself)."""
    try:
        choice = locate(EngineSearch("podman", env=env))
    except EngineError:
        return None
    if choice.store is None:
        return None
    local = LocalPodman(choice.store)
    local.configure()
    return local


@contextlib.contextmanager
def engine_session(preference: str | None, url: str | None = None) -> Iterator[Engine]:
    """An engine for one command; afterwards it is closed, and an isolated podman service that
    discovery started for this command ($TRAINIMG_PODMAN_ROOT) is stopped."""
    endpoint = discover(EngineSearch(preference, url))
    try:
        engine = endpoint.connect()
        try:
            yield engine
        finally:
            engine.close()
    finally:
        endpoint.close()

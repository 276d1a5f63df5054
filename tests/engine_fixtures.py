"""Fixtures of the build tests: small throw-away projects, a fake engine API on a unix socket,
unique image repositories that are removed afterwards, and the CLI run in-process."""

from __future__ import annotations

import json
import secrets
import shutil
import socketserver
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.engines.local_podman import LocalPodman
from tests.conftest import CACHE
from tests.engines.dockerd import DOCKERD, Dockerd
from tests.helpers import REPO, CliResult, MakeProject, RunCli, repo_refs
from tests.matrices import copy_templates
from tests.registry.server import REGISTRY as REGISTRY_BIN
from tests.registry.server import Registry


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """`trainimg ARGS...` in this process; its exit code and captured output."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = cli.main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def make_project(tmp_path: Path, run_cli: RunCli) -> MakeProject:
    """A copy of this project's matrix and templates in a temporary directory, with the Debian
    template replaced by `template` (and matrix.yaml edited by `matrix_edit`), rendered.
    Returns its matrix.yaml."""

    def make(template: str | None = None, matrix_edit: Callable[[str], str] | None = None) -> Path:
        root = tmp_path / f"project-{secrets.token_hex(3)}"
        copy_templates(root)
        text = (REPO / "matrix.yaml").read_text()
        (root / "matrix.yaml").write_text(matrix_edit(text) if matrix_edit else text)
        if template is not None:
            (root / "images" / "templates" / "debian.Containerfile.j2").write_text(template)
        result = run_cli("render", "--matrix", str(root / "matrix.yaml"))
        assert result.code == 0, result.err
        return root / "matrix.yaml"

    return make


@pytest.fixture
def repo(local_podman: LocalPodman) -> Iterator[str]:
    """A fresh image repository name; every image tagged into it is untagged afterwards."""
    name = f"localhost/trainimg-t{secrets.token_hex(4)}"
    yield name
    refs = repo_refs(local_podman, name)
    if refs:
        local_podman.podman("rmi", "--force", *refs, check=False)


# --- a fake engine API ----------------------------------------------------------------------


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up after its 500 is not news


@dataclass
class FakeApi:
    url: str
    requests: list[str]


FakeApiFactory = Callable[[Path], FakeApi]


@pytest.fixture
def fake_apis() -> Iterator[FakeApiFactory]:
    """Start engine APIs on unix sockets that answer /_ping and /version and fail every build
    with a 500 and a message, as a broken service would; all stopped afterwards."""
    servers: list[_UnixHTTPServer] = []

    def start(sock: Path) -> FakeApi:
        seen: list[str] = []
        server = _UnixHTTPServer(str(sock), _handler(seen))
        servers.append(server)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        return FakeApi(f"unix://{sock}", seen)

    try:
        yield start
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


@pytest.fixture
def fake_api(tmp_path: Path, fake_apis: FakeApiFactory) -> FakeApi:
    return fake_apis(tmp_path / "fake.sock")


def _handler(seen: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            seen.append(f"GET {self.path}")
            if self.path.endswith("/_ping"):
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")
            elif self.path.endswith("/version"):
                self._send(200, {"Version": "fake-1.0", "ApiVersion": "1.41"})
            else:
                self._send(404, {"message": "no such image", "cause": "no such image"})

        def do_POST(self) -> None:
            seen.append(f"POST {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            elif self.headers.get("Transfer-Encoding") == "chunked":
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    self.rfile.read(size + 2)
                    if size == 0:
                        break
            msg = "fake engine failure: no space left on device"
            self._send(500, {"message": msg, "cause": msg, "response": 500})

    return Handler


# --- a private Docker Engine and registries --------------------------------------------------


@pytest.fixture(scope="session")
def dockerd() -> Iterator[Dockerd]:
    """Debian's dockerd with its own dirs under the test cache; stopped by its pid after the
    session, and nothing of it may stay mounted."""
    if shutil.which(DOCKERD) is None:
        pytest.skip("dockerd (docker.io) is not installed: run scripts/setup.sh")
    daemon = Dockerd(CACHE / "dockerd")
    daemon.start()
    try:
        yield daemon
    finally:
        left = daemon.stop()
        assert left == [], f"dockerd left mounts behind: {left}"


@pytest.fixture(scope="session")
def dockerd_base(dockerd: Dockerd) -> str:
    """The offline base, imported into the private Docker Engine through the docker SDK (the
    rootfs tarball is the one the podman fixtures cached); the engine's unix:// URL."""
    from builder.build.base_image import BaseSpec, make_offline_base
    from builder.engines.docker import DockerEngine
    from tests.conftest import BASE_TAG

    engine = DockerEngine(dockerd.url)
    try:
        make_offline_base(BaseSpec(tag=BASE_TAG), CACHE / "base", engine)
    finally:
        engine.close()
    return dockerd.url


@pytest.fixture
def registries(tmp_path: Path) -> Iterator[Callable[..., Registry]]:
    """Start docker-registry instances (auth and TLS optional); all stopped afterwards."""
    if shutil.which(REGISTRY_BIN) is None:
        pytest.skip("docker-registry is not installed: run scripts/setup.sh")
    started: list[Registry] = []

    def start(**kw: Any) -> Registry:
        reg = Registry(tmp_path / f"registry-{len(started)}", **kw)
        started.append(reg)
        reg.start()
        return reg

    try:
        yield start
    finally:
        for reg in started:
            reg.stop()
            shutil.rmtree(reg.root / "data", ignore_errors=True)  # pushed images: GBs

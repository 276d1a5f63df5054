"""A private registry for the tests: Debian's `docker-registry` (CNCF distribution 2.8) on
127.0.0.1 with a free port, its own storage, deletes enabled, and optionally htpasswd auth
(bcrypt, from apache2-utils' htpasswd) and TLS from a throwaway CA (openssl). Stopped by pid.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

REGISTRY = "/usr/bin/docker-registry"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 it signed: (ca, cert, key)."""
    directory.mkdir(parents=True, exist_ok=True)
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=trainimg test CA", "-keyout", "ca.key", "-out", "ca.crt", cwd=directory)  # fmt: skip
    (directory / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", "server.key", "-out", "server.csr", cwd=directory)  # fmt: skip
    _run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "server.crt",
         cwd=directory)  # fmt: skip
    return directory / "ca.crt", directory / "server.crt", directory / "server.key"


@dataclass
class Registry:
    root: Path
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    port: int = 0
    ca: Path | None = None
    address: str = "127.0.0.1"  # where it listens (tests/launch's Slurm nodes: their private link)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def host(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}"

    def config(self) -> str:
        cfg: dict[str, object] = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.root / "data")},
                "delete": {"enabled": True},
            },
            "http": {"addr": self.host},
        }
        if self.tls:
            self.ca, cert, key = make_ca(self.root / "tls")
            cfg["http"] = {"addr": self.host, "tls": {"certificate": str(cert), "key": str(key)}}
        if self.user:
            assert self.password is not None
            out = subprocess.run(
                ["htpasswd", "-nbB", self.user, self.password],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            (self.root / "htpasswd").write_text(out.strip() + "\n")
            cfg["auth"] = {
                "htpasswd": {"realm": "trainimg-test", "path": str(self.root / "htpasswd")}
            }
        return json.dumps(cfg)  # JSON is YAML

    def start(self, timeout: float = 30) -> str:
        """Start it; returns HOST:PORT once /v2/ answers (200, or 401 with auth)."""
        if shutil.which(REGISTRY) is None:
            raise RuntimeError(f"{REGISTRY} is not installed: run scripts/setup.sh")
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        (self.root / "config.yml").write_text(self.config())
        log = (self.root / "registry.log").open("ab")
        self._proc = subprocess.Popen(
            [REGISTRY, "serve", str(self.root / "config.yml")],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited; see {self.root / 'registry.log'}")
            try:
                r = requests.get(f"{self.url}/v2/", timeout=2, verify=str(self.ca or True))
                if r.status_code in (200, 401):
                    return self.host
            except requests.exceptions.RequestException:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"docker-registry did not answer on {self.url}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def auth_file(self, path: Path, password: str | None = None) -> Path:
        """A containers-auth.json / docker config.json that logs in to this registry."""
        secret = f"{self.user}:{password or self.password}".encode()
        auths = {self.host: {"auth": base64.b64encode(secret).decode()}}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"auths": auths}))
        return path


def matrix_with_registry_base(text: str, ref: str) -> str:
    """A test copy of matrix.yaml whose debian12 base comes from a registry (`ref`) instead of
    `trainimg base`. The air-gapped CUDA groups (cu128, cu130) go: their CUDA user-space rule
    holds only for a locally made base."""
    local = "    base: localhost/trainimg-base:bookworm\n    local: true\n"
    assert local in text
    out = text.replace(local, f"    base: {ref}\n")
    return re.sub(r"(?m)^  - name: offline-cu1\d\d\n(?:^(?:    |$).*\n?)*", "", out)

"""One store the user can reach, and nothing left behind.

Discovery finds a checkout's isolated store (`.cache/podman`) only when the host has no engine of
its own and never creates it; `trainimg env` points plain podman at it through a real shell; and
a store that built and ran containers leaves no mount, no process and a removable checkout once
released."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from builder.commands.env_cmd import exports
from builder.engines.base import EngineUnavailable
from builder.engines.discover import (
    CHECKOUT_STORE,
    DOCKER_SOCKETS,
    ROOTFUL_PODMAN,
    Choice,
    EngineSearch,
    discover,
    locate,
)
from builder.engines.local_podman import LocalPodman, mounts_under, store_processes
from tests.engine_fixtures import FakeApiFactory
from tests.helpers import REPO

ENGINE_VARS = ("CONTAINER_HOST", "DOCKER_HOST", "TRAINIMG_PODMAN_ROOT", "TRAINIMG_ENGINE")
HOST_ENGINE = any(p.exists() for p in (ROOTFUL_PODMAN, *DOCKER_SOCKETS))


def _checkout(base: Path, *, store: bool) -> Path:
    """A directory that looks like a checkout (matrix.yaml), with or without the demo's store."""
    base.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "matrix.yaml", base / "matrix.yaml")
    if store:
        (base / CHECKOUT_STORE).mkdir(parents=True)
        (base / CHECKOUT_STORE / "storage.conf").write_text("[storage]\n")
    return base


def _locate(tmp_path: Path, cwd: Path, **env: str) -> Choice:
    return locate(
        EngineSearch(
            env=env,
            cwd=cwd,
            docker_sockets=[tmp_path / "docker.sock"],
            rootful_podman=tmp_path / "podman.sock",
        )
    )


def test_checkout_store_is_found_last_and_never_made(
    tmp_path: Path, fake_apis: FakeApiFactory
) -> None:
    co = _checkout(tmp_path / "co", store=True)
    (co / "sub" / "dir").mkdir(parents=True)
    choice = _locate(tmp_path, co / "sub" / "dir")
    assert choice.store == (co / CHECKOUT_STORE).resolve()
    assert choice.source == f"checkout store {choice.store}"
    # The host's own engine wins: a rootful podman socket that answers.
    rootful = fake_apis(tmp_path / "podman.sock")
    assert _locate(tmp_path, co).url == rootful.url
    assert _locate(tmp_path / "elsewhere", co).store == choice.store
    # TRAINIMG_PODMAN_ROOT names another store; set empty, it turns the checkout's off.
    other = _locate(tmp_path / "x", co, TRAINIMG_PODMAN_ROOT=str(tmp_path / "mine"))
    assert other.store == tmp_path / "mine"
    with pytest.raises(EngineUnavailable, match=r"\.cache/podman"):
        _locate(tmp_path / "x", co, TRAINIMG_PODMAN_ROOT="")
    # A checkout without the demo's store: an error, and no store appears.
    bare = _checkout(tmp_path / "bare", store=False)
    with pytest.raises(EngineUnavailable, match=r"scripts/demo\.sh"):
        _locate(tmp_path / "x", bare)
    assert not (bare / ".cache").exists()


def test_env_exports_are_shell_quoted() -> None:
    odd = Path("/srv/it's a checkout/.cache/podman")
    lines = exports(Choice("podman", "unix:///x", "checkout store", odd))
    assert "export TRAINIMG_PODMAN_ROOT='/srv/it'\"'\"'s a checkout/.cache/podman'" in lines
    assert lines[-1] == "unset CONTAINER_HOST DOCKER_HOST"
    sneaky = exports(Choice("podman", "unix:///x\ntouch /tmp/owned", "CONTAINER_HOST"))
    assert all(line.startswith(("#", "export ")) for line in sneaky), sneaky
    assert sneaky[-1] == "export CONTAINER_HOST='unix:///x\ntouch /tmp/owned'"
    assert exports(Choice("docker", "tcp://h:2375", "DOCKER_HOST")) == [
        "# trainimg's engine: docker at tcp://h:2375 (DOCKER_HOST).",
        "export DOCKER_HOST=tcp://h:2375",
    ]


def _which(tool: str) -> str:
    return shutil.which(tool) or f"/bin/{tool}"


def _mini_rootfs(dest: Path) -> Path:
    """A tarball of bash, sleep and true with their shared libraries: a tiny importable image."""
    tar_path = dest / "mini.tar"
    files: set[str] = set()
    for tool in ("bash", "sleep", "true"):
        binary = _which(tool)
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
        files |= {binary, *(w for w in ldd.stdout.split() if w.startswith("/"))}
    with tarfile.open(tar_path, "w") as tar:
        for f in sorted(files):
            tar.add(Path(f).resolve(), arcname=f.lstrip("/"))
    return tar_path


def _engine_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENGINE_VARS}
    env.pop("CONTAINERS_CONF", None)
    env.pop("CONTAINERS_STORAGE_CONF", None)
    return {**env, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}", **extra}


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.skipif(HOST_ENGINE, reason="this host has its own engine socket: it would win")
def test_a_used_store_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman/runc not installed: run scripts/setup.sh")
    # configure() exports this store's configuration to the process: put the session's back
    # after (testinfra's podman:// backend, run later, reads it from the environment)
    for var in LocalPodman(tmp_path).env():
        monkeypatch.delenv(var, raising=False)
    # Short paths: podman 4.3's runroot/socket limits (local_podman._runroot).
    co = _checkout(Path(f"/tmp/tis-{os.getpid()}") / "co", store=False)
    try:
        local = LocalPodman(co / CHECKOUT_STORE)
        local.configure()
        env = _engine_env(XDG_RUNTIME_DIR=str(tmp_path))
        # `trainimg env` in a real shell points plain podman at the store.
        (co / "sub").mkdir()
        script = (
            'eval "$(trainimg env)" && podman import -q "$1" localhost/mini:1'
            ' && podman info --format "{{.Store.GraphRoot}}"'
        )
        shell = subprocess.run(
            ["bash", "-c", script, "-", str(_mini_rootfs(tmp_path))],
            cwd=co / "sub",
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert shell.returncode == 0, shell.stderr
        assert shell.stdout.splitlines()[-1] == str(local.root / "storage")
        # A trainimg-style session: discovery starts the service, containers run through it
        # (one left running, as a Ctrl-C would), the podman CLI runs one too.
        endpoint = discover(EngineSearch(env=env, cwd=co))
        assert endpoint.started and endpoint.local is not None
        import podman

        with podman.PodmanClient(base_url=endpoint.url) as client:
            client.containers.run("localhost/mini:1", [_which("true")], remove=True)
            client.containers.run("localhost/mini:1", [_which("sleep"), "300"], detach=True)
        assert mounts_under([co]), "a running container mounts its merged dir"
        release = ["trainimg", "env", "--release"]
        busy = subprocess.run(release, cwd=co, env=env, capture_output=True, text=True)
        assert busy.returncode == 1 and "in use by pid" in busy.stderr, busy
        endpoint.close()
        assert mounts_under([co, local.runroot]) == []
        assert store_processes([local.root, local.runroot]) == []
        done = subprocess.run(release, cwd=co, env=env, capture_output=True, text=True)
        assert (done.returncode, done.stdout) == (0, f"{local.root}: unmounted 0 mount(s)\n")
        proc_mounts = Path("/proc/mounts").read_text()
        assert str(co) not in proc_mounts
        copy = co.parent / "copy"
        shutil.copytree(co, copy, symlinks=True)
        shutil.rmtree(copy)
        shutil.rmtree(co)  # would raise "Device or resource busy" with a mount left
    finally:
        if co.exists():
            LocalPodman(co / CHECKOUT_STORE).release(force=True)
        shutil.rmtree(co.parent, ignore_errors=True)

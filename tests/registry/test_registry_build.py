"""The registry path end to end, through each engine: the offline base is pushed to a real
registry (htpasswd auth), a test copy of the matrix is pinned to it by digest, the CPU cell is
built with --pull by that digest, pushed under its cell and build-hash tags with the digests
recorded in the lock file, and the build-hash tags no record references are pruned. The
password appears nowhere: not in output, lock, labels or image history. Bad input: a wrong
password, a missing tag, an unreachable registry exit 2 naming the registry and the cell, with
nothing recorded. The pull by digest changes the name the session's podman service gives the
base in every later build's history: test_cold_rebuild.py runs before this module."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.build import lock
from builder.engines.docker import DockerEngine
from builder.engines.podman import PodmanEngine
from builder.engines.sdk import SdkEngine
from builder.registry import auth
from builder.registry.client import RegistryClient
from builder.registry.reference import parse_reference
from tests.conftest import BASE_TAG
from tests.engines.test_engines_build import engine_url
from tests.helpers import CPU_CELL, REPO, MakeProject, RunCli
from tests.registry.server import Registry, matrix_with_registry_base

pytestmark = [pytest.mark.engine, pytest.mark.slow]

SDKS: dict[str, type[SdkEngine]] = {"podman": PodmanEngine, "dockerd": DockerEngine}


@dataclass
class Pinned:
    reg: Registry
    matrix: Path
    base_ref: str
    digest: str


@pytest.fixture
def make_pinned(
    registries: Callable[..., Registry],
    make_project: MakeProject,
    run_cli: RunCli,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[str], Pinned]:
    """A registry with auth holding the offline base, pushed from the store of engine `kind`
    (so a pull by digest gives that engine its own base back, layer cache and all),
    credentials in REGISTRY_AUTH_FILE and DOCKER_CONFIG, and a test matrix whose debian12 is
    pinned to it and rendered."""

    def make(kind: str) -> Pinned:
        url = engine_url(kind, request)
        reg = registries(user="builder", password=secrets.token_urlsafe(16))
        monkeypatch.setenv("REGISTRY_AUTH_FILE", str(reg.auth_file(tmp_path / "auth.json")))
        docker_config = reg.auth_file(tmp_path / "docker" / "config.json")
        monkeypatch.setenv("DOCKER_CONFIG", str(docker_config.parent))
        base_ref = f"{reg.host}/trainimg-base:bookworm"
        engine = SDKS[kind](url)
        try:
            engine.tag(BASE_TAG, base_ref)
            engine.push(base_ref, auth.lookup(reg.host), tls_verify=False)
            engine.remove_image(base_ref)
        finally:
            engine.close()
        matrix = make_project(matrix_edit=lambda t: matrix_with_registry_base(t, base_ref))
        r = run_cli("pin", "debian12", "--matrix", str(matrix))
        assert r.code == 0, r.err
        r2 = run_cli("render", "--matrix", str(matrix))
        assert r2.code == 0, r2.err
        digest = r.out.split("@", 1)[1].split()[0]
        return Pinned(reg, matrix, base_ref, digest)

    return make


@pytest.mark.parametrize("kind", sorted(SDKS))
def test_pinned_build_push_and_prune(
    kind: str,
    make_pinned: Callable[[str], Pinned],
    request: pytest.FixtureRequest,
    wheelhouse: Path,
    run_cli: RunCli,
    tmp_path: Path,
) -> None:
    pinned = make_pinned(kind)
    url = engine_url(kind, request)
    engine_args = ["--engine", "docker" if kind == "dockerd" else "podman", "--url", url]
    lock_path = tmp_path / "lock.json"
    repo = f"localhost/trainimg-pinned-{kind}"
    m = ["--matrix", str(pinned.matrix)]
    password = pinned.reg.password
    assert password
    outputs: list[str] = []

    def cli(*args: str) -> int:
        r = run_cli(*args)
        outputs.extend((r.out, r.err))
        return r.code

    build = ["build", *m, *engine_args, "--pull", "--wheelhouse", str(wheelhouse), "--trainer",
             str(REPO / "trainer"), "--lock", str(lock_path), "--repository", repo]  # fmt: skip
    assert cli(*build) == 0, outputs[-1]
    rec = lock.read(lock_path)[CPU_CELL]
    assert rec.base_image == f"{pinned.base_ref}@{pinned.digest}"
    assert rec.base_digest == pinned.digest
    assert rec.labels["io.trainimg.base.pinned"] == "true"

    target = f"{pinned.reg.host}/trainimg-{kind}"
    push = ["push", CPU_CELL, *m, *engine_args, "--registry", target, "--lock", str(lock_path)]
    assert cli(*push) == 0, outputs[-1]
    # a line per blob as the engine streams it (tests/data/transfer_streams has the shapes)
    per_blob = (
        r"Copying blob sha256:"
        if kind == "podman"
        else r"[0-9a-f]{12}: (Pushed|Layer already exists|Mounted from)"
    )
    assert re.search(per_blob, outputs[-1]), outputs[-1][-2000:]
    rec = lock.read(lock_path)[CPU_CELL]
    refs = sorted([f"{target}:{CPU_CELL}", f"{target}:{rec.build_hash}"])
    assert sorted(rec.pushed) == refs
    client = RegistryClient(pinned.reg.host, auth.lookup(pinned.reg.host))
    try:
        for ref in refs:
            assert rec.pushed[ref] == client.manifest_digest(parse_reference(ref))
        assert client.tags(f"trainimg-{kind}") == sorted([CPU_CELL, rec.build_hash])
    finally:
        client.close()

    # The password is nowhere: output, lock, labels, history.
    engine = SDKS[kind](url)
    try:
        history = engine.history(rec.image_id)
        info = engine.inspect_image(rec.image_id)
        # prune: an unreferenced build-hash tag goes, the referenced one and the cell tag stay
        engine.tag(rec.image_id, f"{repo}:{'0' * 16}")
        assert cli("prune", *m, *engine_args, "--repository", repo, "--lock", str(lock_path)) == 0
        tags = engine.image_tags(repo)
    finally:
        engine.close()
    assert history and any("io.trainimg.build.hash" in h for h in history)
    haystack = "\n".join([*outputs, lock_path.read_text(), json.dumps(dict(info.labels)), *history])
    assert password not in haystack
    assert f"removed {repo}:{'0' * 16}" in outputs[-2]
    assert tags == sorted([CPU_CELL, rec.build_hash])


def test_bad_registry_input_exits_2_and_records_nothing(
    make_pinned: Callable[[str], Pinned],
    podman_service: str,
    wheelhouse: Path,
    run_cli: RunCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pinned = make_pinned("podman")
    lock_path = tmp_path / "lock.json"
    m = ["--matrix", str(pinned.matrix)]
    build = ["build", *m, "--engine", "podman", "--url", podman_service, "--pull",
             "--wheelhouse", str(wheelhouse), "--trainer", str(REPO / "trainer"),
             "--lock", str(lock_path), "--repository", "localhost/trainimg-bad"]  # fmt: skip
    password = pinned.reg.password
    assert password

    # a wrong password: the pull is refused, naming the cell and the registry
    bad = pinned.reg.auth_file(tmp_path / "bad.json", "wrong")
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(bad))
    r = run_cli(*build)
    assert r.code == 2, r.err
    assert f"cell {CPU_CELL}" in r.err and pinned.reg.host in r.err
    assert "Traceback" not in r.err and password not in r.err
    assert not lock_path.exists()

    # credentials in a build argument: refused before anything runs, the secret not echoed
    r = run_cli(*build, "--build-arg", f"PIP_INDEX_URL=https://u:{password}@pypi.example/simple")
    assert r.code == 2 and "PIP_INDEX_URL" in r.err and password not in r.err

    # push: wrong password (checked before anything moves), then an unreachable registry
    target = f"{pinned.reg.host}/trainimg-bad"
    push = ["push", CPU_CELL, *m, "--engine", "podman", "--url", podman_service,
            "--lock", str(lock_path), "--registry", target]  # fmt: skip
    r = run_cli(*push)
    assert r.code == 2 and f"no record in {lock_path}" in r.err
    pinned.reg.stop()
    r = run_cli(*build)
    assert r.code == 2 and f"{pinned.reg.host}" in r.err
    assert not lock_path.exists()


def test_engine_version_is_reported(dockerd_base: str) -> None:
    """The Docker Engine the tests start is Debian's 20.10 (API 1.41), the one docs/build.md
    documents; a newer or older one would change what the classic builder accepts."""
    engine = DockerEngine(dockerd_base)
    try:
        assert engine.version().startswith("20.10.")
    finally:
        engine.close()

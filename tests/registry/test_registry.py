"""A real registry (Debian's docker-registry): push the offline base through podman-py, resolve
it over the Registry v2 API with htpasswd auth and TLS from a throwaway CA, pin a test copy of
the matrix to it, and the bad inputs: wrong password, missing tag, unreachable registry,
untrusted certificate. The password never shows in an error."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from builder.engines.base import EngineError
from builder.engines.credentials import Credentials
from builder.engines.podman import PodmanEngine
from builder.registry import auth
from builder.registry.client import RegistryClient, RegistryError
from builder.registry.reference import parse_reference
from tests.helpers import CPU_CELL, MakeProject, RunCli
from tests.registry.server import Registry, matrix_with_registry_base

pytestmark = [pytest.mark.engine]

BASE_REPO = "trainimg-base"


@pytest.fixture
def podman_engine(podman_service: str) -> Iterator[PodmanEngine]:
    engine = PodmanEngine(podman_service)
    try:
        yield engine
    finally:
        engine.close()


def push_base(engine: PodmanEngine, base: str, reg: Registry, creds: Credentials | None) -> str:
    ref = f"{reg.host}/{BASE_REPO}:bookworm"
    engine.tag(base, ref)
    try:
        engine.push(ref, creds, tls_verify=False)
    finally:
        engine.remove_image(ref)
    return ref


def test_push_and_resolve_with_auth_and_tls(
    registries: Callable[..., Registry],
    podman_engine: PodmanEngine,
    offline_base: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    password = secrets.token_urlsafe(12)
    reg = registries(user="tester", password=password, tls=True)
    assert reg.ca is not None
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(reg.auth_file(tmp_path / "auth.json")))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(reg.ca))
    creds = auth.lookup(reg.host)
    assert creds is not None and creds.password == password
    assert password not in repr(creds) and password not in str(creds)

    ref = push_base(podman_engine, offline_base, reg, creds)
    client = RegistryClient(reg.host, creds, insecure=False)  # TLS verified against the CA
    try:
        digest = client.manifest_digest(parse_reference(ref))
        assert digest.startswith("sha256:") and len(digest) == 71
        assert client.tags(BASE_REPO) == ["bookworm"]
        with pytest.raises(RegistryError, match=rf"{reg.host} has no {BASE_REPO}:nope") as err:
            client.manifest_digest(parse_reference(f"{reg.host}/{BASE_REPO}:nope"))
        assert password not in str(err.value)
        other = "sha256:" + "0" * 64
        with pytest.raises(RegistryError, match="no such repository or tag"):
            client.manifest_digest(parse_reference(f"{reg.host}/{BASE_REPO}@{other}"))
    finally:
        client.close()

    wrong = Credentials(reg.host, "tester", "not-" + password, "test")
    bad = RegistryClient(reg.host, wrong, insecure=False)
    with pytest.raises(RegistryError, match=rf"registry {reg.host} refused .*tester") as err:
        bad.ping()
    assert "not-" + password not in str(err.value)
    anonymous = RegistryClient(reg.host, None, insecure=False)
    with pytest.raises(RegistryError, match="wants credentials and none are known"):
        anonymous.ping()
    with pytest.raises(EngineError, match="push"):  # the engine refuses the wrong password too
        push_base(podman_engine, offline_base, reg, wrong)

    monkeypatch.delenv("REQUESTS_CA_BUNDLE")  # the throwaway CA is not trusted
    untrusted = RegistryClient(reg.host, creds, insecure=False)
    with pytest.raises(RegistryError, match=rf"registry {reg.host} is unreachable .*CA"):
        untrusted.ping()


def test_unreachable_registry(registries: Callable[..., Registry]) -> None:
    reg = registries()
    reg.stop()
    client = RegistryClient(reg.host)
    with pytest.raises(RegistryError, match=rf"registry {reg.host} is unreachable"):
        client.ping()


def test_pin_writes_the_digest_and_render_uses_it(
    registries: Callable[..., Registry],
    podman_engine: PodmanEngine,
    offline_base: str,
    make_project: MakeProject,
    run_cli: RunCli,
) -> None:
    reg = registries()
    ref = push_base(podman_engine, offline_base, reg, None)
    matrix = make_project(matrix_edit=lambda t: matrix_with_registry_base(t, ref))
    before = matrix.read_text()

    # An OS whose registry is not reachable: exit 2, the matrix is left as it was.
    r = run_cli("pin", "--matrix", str(matrix))
    assert r.code == 2, r.err
    assert "quay.io" in r.err or "registry.access.redhat.com" in r.err
    assert matrix.read_text() == before

    r = run_cli("pin", "debian12", "--matrix", str(matrix))
    assert r.code == 0, r.err
    digest = r.out.split("@", 1)[1].split()[0]
    after = matrix.read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=False) if a != b
    ]
    assert len(after.splitlines()) == len(before.splitlines()) + 1  # one line added, no other
    assert f"    base: {ref}\n    digest: {digest}\n" in after
    assert changed and changed[0][1] == f"    digest: {digest}"
    r = run_cli("pin", "debian12", "--matrix", str(matrix))  # again: nothing to change
    assert r.code == 0 and "(unchanged)" in r.out and matrix.read_text() == after

    r = run_cli("render", "--matrix", str(matrix))
    assert r.code == 0, r.err
    text = (matrix.parent / "images" / CPU_CELL / "Containerfile").read_text()
    assert f"FROM {ref}@{digest} " in text or f"FROM {ref}@{digest}\n" in text
    assert 'io.trainimg.base.pinned="true"' in text

    r = run_cli("pin", "debian12", "--matrix", str(matrix.parent / "nope.yaml"))
    assert r.code == 2

    missing = make_project(
        matrix_edit=lambda t: matrix_with_registry_base(t, f"{reg.host}/{BASE_REPO}:nope")
    )
    r = run_cli("pin", "debian12", "--matrix", str(missing))
    assert r.code == 2 and f"registry {reg.host} has no {BASE_REPO}:nope" in r.err

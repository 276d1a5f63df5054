"""`trainimg push --sign` to a local registry, then `podman pull` under the policy `trainimg
policy` wrote: the signed image is accepted; an unsigned image and a tampered manifest are
refused. The SBOM and the provenance are pushed beside the image. A throwaway GPG key in a
temporary GNUPGHOME signs (its agent is stopped afterwards); podman reads the policy and
registries.d from a temporary HOME (~/.config/containers, where podman looks first)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from builder.engines.local_podman import LocalPodman
from builder.engines.podman import PodmanEngine
from tests.build.helpers import CPU_CELL, RunCli
from tests.build.registry import Registry

pytestmark = pytest.mark.integration  # runs gpg, podman and trainimg's CLI end to end
UID = "trainimg test signer <signer@trainimg.invalid>"


@pytest.fixture
def gpg_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A throwaway signing key without a passphrase: (fingerprint, armored public key)."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("GNUPGHOME", str(home))
    gpg = ["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
    try:
        subprocess.run([*gpg, "--quick-gen-key", UID, "default", "sign", "1d"],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        listing = subprocess.run(["gpg", "--with-colons", "--list-secret-keys"], check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
        fpr = next(ln.split(":")[9] for ln in listing.splitlines() if ln.startswith("fpr:"))
        pub = tmp_path / "signer.pub.asc"
        pub.write_bytes(subprocess.run(["gpg", "--armor", "--export", fpr], check=True,
                                       capture_output=True).stdout)  # fmt: skip
        yield fpr, pub
    finally:  # the agent gpg (and gpgme, signing for podman) started for this home
        subprocess.run(["gpgconf", "--kill", "all"], check=False, capture_output=True)


def _pull(local: LocalPodman, ref: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", "pull", "--tls-verify=false", ref],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **local.env()},
    )


@pytest.fixture
def registry_repo(
    registries: Callable[..., Registry], local_podman: LocalPodman
) -> Iterator[tuple[Registry, str]]:
    """A registry and the repository the test pushes to; every local name of it untagged after."""
    reg = registries()
    repo = f"{reg.host}/team/trainimg"
    yield reg, repo
    # the names only (the image is cpu_image); podman 4.3's reference filter does not take a
    # HOST:PORT repository reliably, so every name is listed and ours picked
    names = local_podman.podman("images", "--format", "{{.Repository}}:{{.Tag}}").split()
    for ref in names:
        if ref.startswith(f"{repo}:"):
            local_podman.podman("untag", ref, ref, check=False)


def test_push_sign_then_pull_under_the_policy(
    run_cli: RunCli,
    registry_repo: tuple[Registry, str],
    local_podman: LocalPodman,
    podman_service: str,
    cpu_image: str,
    wheelhouse: Path,
    gpg_key: tuple[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fpr, pub = gpg_key
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    reg, repo = registry_repo
    lock = tmp_path / "lock.json"
    url = ["--url", podman_service]
    r = run_cli("build", *url, "--wheelhouse", str(wheelhouse), "--lock", str(lock))
    assert r.code == 0, r.err

    # without a registries.d entry nothing is pushed
    r = run_cli("push", CPU_CELL, "--registry", repo, "--sign", "--sign-by", fpr,
                "--lock", str(lock), *url)  # fmt: skip
    assert r.code == 2 and "trainimg policy" in r.err
    assert requests.get(f"{reg.url}/v2/team/trainimg/tags/list", timeout=10).status_code == 404

    sigs = tmp_path / "signatures"
    r = run_cli("policy", "--registry", repo, "--key", str(pub), "--signatures", str(sigs),
                "--dest", str(home / ".config" / "containers"))  # fmt: skip
    assert r.code == 0, r.err
    r = run_cli("push", CPU_CELL, "--registry", repo, "--sign", "--sign-by", fpr,
                "--lock", str(lock), *url)  # fmt: skip
    assert r.code == 0, r.out + r.err
    assert len(list(sigs.rglob("signature-1"))) == 1  # one manifest, signed under both tags
    tags = requests.get(f"{reg.url}/v2/team/trainimg/tags/list", timeout=10).json()["tags"]
    sbom_tag = next(t for t in tags if t.endswith(".sbom"))
    assert any(t.endswith(".att") for t in tags)
    manifest = requests.get(
        f"{reg.url}/v2/team/trainimg/manifests/{sbom_tag}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=10,
    ).json()
    assert manifest["artifactType"] == "application/vnd.cyclonedx+json"
    blob = requests.get(
        f"{reg.url}/v2/team/trainimg/blobs/{manifest['layers'][0]['digest']}", timeout=10
    ).json()
    assert blob["bomFormat"] == "CycloneDX"
    assert any(c.get("name") == "torch" for c in blob["components"])

    signed = _pull(local_podman, f"{repo}:{CPU_CELL}")
    assert signed.returncode == 0, signed.stderr

    # an unsigned image of the same repository: refused
    engine = PodmanEngine(podman_service)
    try:
        engine.tag("localhost/trainimg-base:bookworm", f"{repo}:unsigned")
        engine.push(f"{repo}:unsigned", tls_verify=False)
        engine.remove_image(f"{repo}:unsigned")
    finally:
        engine.close()
    unsigned = _pull(local_podman, f"{repo}:unsigned")
    assert unsigned.returncode != 0
    assert "signature" in unsigned.stderr.lower(), unsigned.stderr

    # the signed tag's manifest altered in the registry: refused
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    mf = requests.get(f"{reg.url}/v2/team/trainimg/manifests/{CPU_CELL}", headers=accept,
                      timeout=10)  # fmt: skip
    altered = json.loads(mf.content)
    altered["annotations"] = {"org.example.tampered": "yes"}
    put = requests.put(
        f"{reg.url}/v2/team/trainimg/manifests/{CPU_CELL}",
        data=json.dumps(altered).encode(),
        headers={"Content-Type": mf.headers["Content-Type"]},
        timeout=10,
    )
    assert put.status_code == 201, put.text
    tampered = _pull(local_podman, f"{repo}:{CPU_CELL}")
    assert tampered.returncode != 0
    assert "signature" in tampered.stderr.lower(), tampered.stderr

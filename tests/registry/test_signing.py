"""`trainimg push --sign` to a local registry, then `podman pull` under the policy `trainimg
policy` wrote: the signed image is accepted (one manifest, a signature for each tag it was
pushed as); an unsigned image, a tampered manifest and an image signed under another tag whose
manifest is put under the cell tag are refused (matchRepoDigestOrExact). The SBOM and the
provenance are pushed beside the image. A throwaway GPG key in a temporary GNUPGHOME signs (its
agent is stopped afterwards); podman reads the policy and registries.d from a temporary HOME
(~/.config/containers, where podman looks first)."""

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
from tests.helpers import CPU_CELL, RunCli
from tests.registry.server import Registry

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


def _identities(sig_dir: Path) -> list[str]:
    """The docker-reference each simple signing signature in `sig_dir` was made for (gpg reads
    the signed payload: containers/image docs/containers-signature.5.md)."""
    out = []
    for f in sorted(sig_dir.glob("signature-*")):
        payload = subprocess.run(["gpg", "--batch", "--decrypt", str(f)], check=True,
                                 capture_output=True, timeout=60).stdout  # fmt: skip
        out.append(json.loads(payload)["critical"]["identity"]["docker-reference"])
    return out


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
    # one manifest, a signature for each tag: the hash tag's push did not replace the cell's
    (sig_dir,) = {f.parent for f in sigs.rglob("signature-*")}
    assert sorted(f.name for f in sig_dir.iterdir()) == ["signature-1", "signature-2"]
    rec = json.loads(lock.read_text())["cells"][CPU_CELL]
    assert _identities(sig_dir) == [f"{repo}:{CPU_CELL}", f"{repo}:{rec['build_hash']}"]
    _the_sbom_is_attached(reg)

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

    _retagged_is_refused(local_podman, reg, repo, fpr)


def _retagged_is_refused(local_podman: LocalPodman, reg: Registry, repo: str, fpr: str) -> None:
    """The base image signed as another tag of the repository, its manifest then put under the
    cell tag: the signature is valid, but for :base-signed, so the cell tag refuses it."""
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    signed_push = subprocess.run(
        ["podman", "push", "--tls-verify=false", "--sign-by", fpr,
         "localhost/trainimg-base:bookworm", f"docker://{repo}:base-signed"],
        capture_output=True, text=True, timeout=600, env={**os.environ, **local_podman.env()},
    )  # fmt: skip
    assert signed_push.returncode == 0, signed_push.stderr
    other = requests.get(f"{reg.url}/v2/team/trainimg/manifests/base-signed", headers=accept,
                         timeout=10)  # fmt: skip
    put = requests.put(
        f"{reg.url}/v2/team/trainimg/manifests/{CPU_CELL}",
        data=other.content,
        headers={"Content-Type": other.headers["Content-Type"]},
        timeout=10,
    )
    assert put.status_code == 201, put.text
    retagged = _pull(local_podman, f"{repo}:{CPU_CELL}")
    assert retagged.returncode != 0, retagged.stdout
    assert "signature" in retagged.stderr.lower(), retagged.stderr
    assert _pull(local_podman, f"{repo}:base-signed").returncode == 0  # signed for that tag


def _the_sbom_is_attached(reg: Registry) -> None:
    """The SBOM (and the provenance) went beside the image under cosign's tag scheme."""
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

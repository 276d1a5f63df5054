"""Where trainimg finds what podman uses for a registry: credentials (podman login's file
first), certs.d CAs and client pairs, and the signature policy and registries.d it writes."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
import yaml

from builder.registry import auth, certs, policy, signing
from builder.registry.reference import parse_reference


def _auth(path: Path, host: str, user: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    token = base64.b64encode(f"{user}:secret".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": token}}}))


def test_podman_login_without_a_runtime_dir_is_found(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    files = auth.auth_files(env)
    assert files[0] == Path(f"/run/containers/{os.getuid()}/auth.json")
    assert files[1] == tmp_path / ".config" / "containers" / "auth.json"
    assert files[2] == tmp_path / ".docker" / "config.json"


def test_the_order_is_podmans(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    _auth(tmp_path / ".docker" / "config.json", "reg.example:5000", "docker-user")
    _auth(tmp_path / ".config" / "containers" / "auth.json", "reg.example:5000", "config-user")
    assert auth.lookup("reg.example:5000", env).username == "config-user"  # type: ignore[union-attr]
    _auth(tmp_path / "run" / "containers" / "auth.json", "reg.example:5000", "login-user")
    found = auth.lookup("reg.example:5000", env)
    assert found is not None and found.username == "login-user"
    assert found.source == str(tmp_path / "run" / "containers" / "auth.json")
    assert "secret" not in repr(found) and "secret" not in str(found)


def test_certs_d_as_podman_reads_it(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    d = tmp_path / ".config" / "containers" / "certs.d" / "reg.example:5000"
    d.mkdir(parents=True)
    (d / "ca.crt").write_text(
        "-----BEGIN CERTIFICATE-----\nPRIVATE CA\n-----END CERTIFICATE-----\n"
    )
    (d / "client.cert").write_text("cert")
    (d / "client.key").write_text("key")
    tls = certs.lookup_tls("reg.example:5000", env)
    assert tls.directory == d
    assert tls.cas == (d / "ca.crt",)
    assert tls.client == (d / "client.cert", d / "client.key")
    bundle = certs.verify_bundle(tls, {**env, "REQUESTS_CA_BUNDLE": str(d / "client.cert")})
    assert isinstance(bundle, str)
    try:
        text = Path(bundle).read_text()
        assert "PRIVATE CA" in text and "cert" in text
    finally:
        Path(bundle).unlink()
    assert certs.lookup_tls("other:5000", env).cas == ()
    assert certs.verify_bundle(certs.lookup_tls("other:5000", env)) is True


REPO = parse_reference("127.0.0.1:5000/team/trainimg")


def test_the_policy_requires_the_key_for_the_repository_only(tmp_path: Path) -> None:
    doc = json.loads(policy.policy_json(REPO, tmp_path / "pub.asc"))
    assert doc["default"] == [{"type": "insecureAcceptAnything"}]
    (rule,) = doc["transports"]["docker"]["127.0.0.1:5000/team/trainimg"]
    assert rule == {
        "type": "signedBy",
        "keyType": "GPGKeys",
        "keyPath": str(tmp_path / "pub.asc"),
        "signedIdentity": {"type": "matchRepoDigestOrExact"},
    }
    strict = json.loads(policy.policy_json(REPO, tmp_path / "pub.asc", reject_others=True))
    assert strict["default"] == [{"type": "reject"}]


def test_registries_d_names_where_signatures_are(tmp_path: Path) -> None:
    url = policy.lookaside_url(str(tmp_path / "sigs"))
    assert url == (tmp_path / "sigs").as_uri()
    assert policy.lookaside_url("https://sigs.example/x") == "https://sigs.example/x"
    d = tmp_path / "registries.d"
    d.mkdir()
    (d / "a.yaml").write_text(policy.registries_d(REPO, url))
    data = yaml.safe_load((d / "a.yaml").read_text())
    assert data["docker"][REPO.name] == {"sigstore": url, "sigstore-staging": url}
    assert policy.staging_for(REPO, [d]) == url
    assert policy.staging_for(parse_reference("127.0.0.1:5000/other/x"), [d]) is None


def test_signing_without_a_registries_d_entry_is_refused_before_anything_moves(
    tmp_path: Path,
) -> None:
    with pytest.raises(signing.SigningError, match="trainimg policy"):
        signing.check_staging(parse_reference("127.0.0.1:1/nowhere/x"), {"HOME": str(tmp_path)})


def _registries_d(home: Path, lookaside: str, staging: str | None = None) -> None:
    d = home / ".config" / "containers" / "registries.d"
    d.mkdir(parents=True)
    (d / "trainimg.yaml").write_text(policy.registries_d(REPO, lookaside, staging))


def test_a_lookaside_podman_cannot_write_is_refused_before_anything_moves(tmp_path: Path) -> None:
    _registries_d(tmp_path, "https://sigs.example.org/sigs")  # no --staging: read-only
    with pytest.raises(signing.SigningError, match="only to a file:// directory") as err:
        signing.check_staging(REPO, {"HOME": str(tmp_path)})
    assert "'https://sigs.example.org/sigs'" in str(err.value) and "--staging" in str(err.value)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    home = tmp_path / "h2"
    _registries_d(home, "https://sigs.example.org/sigs", (blocked / "sigs").as_uri())
    with pytest.raises(signing.SigningError, match="is not a writable directory"):
        signing.check_staging(REPO, {"HOME": str(home)})
    home = tmp_path / "h3"
    _registries_d(home, "https://sigs.example.org/sigs", (tmp_path / "new" / "sigs").as_uri())
    assert signing.check_staging(REPO, {"HOME": str(home)}) == tmp_path / "new" / "sigs"


def test_a_later_tags_signature_never_replaces_an_earlier_ones(tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    where = signing.signature_dir(tmp_path, REPO, digest)
    assert where == tmp_path / f"{REPO.repository}@sha256={'ab' * 32}"
    where.mkdir(parents=True)
    (where / "signature-1").write_bytes(b"signed as :cell")
    before = signing.read_signatures(tmp_path, REPO)
    assert before == {where.name: [b"signed as :cell"]}
    (where / "signature-1").write_bytes(b"signed as :hash")  # what podman's next push leaves
    assert signing.keep_signatures(where, before[where.name]) == 2
    assert (where / "signature-1").read_bytes() == b"signed as :cell"
    assert (where / "signature-2").read_bytes() == b"signed as :hash"
    again = signing.read_signatures(tmp_path, REPO)[where.name]
    (where / "signature-1").write_bytes(b"signed as :hash")  # the same tag pushed again
    (where / "signature-2").unlink()
    assert signing.keep_signatures(where, again) == 2  # no duplicate


def test_policy_without_dest_writes_podmans_per_user_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builder.cli import main

    key = tmp_path / "key.asc"
    key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    args = ["policy", "--registry", "reg:5000/r", "--key", str(key)]
    assert main([*args, "--signatures", str(tmp_path / "sigs")]) == 0
    written = json.loads((tmp_path / "xdg" / "containers" / "policy.json").read_text())
    assert "reg:5000/r" in json.dumps(written)
    assert (tmp_path / "xdg" / "containers" / "registries.d" / "trainimg-reg-5000.yaml").is_file()

"""The registry code's pure parts and small effects, without a registry: references, insecure
registries, credentials files, the matrix pin edit, which tags prune takes, credentials in
build arguments, the lists date of the base, and a pull whose digest does not match."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from builder.build import prune
from builder.build.base_image import BaseImageError, release_date
from builder.build.lock import BuildRecord
from builder.engines.base import ImageInfo
from builder.errors import TrainimgError
from builder.registry import auth, pin, pull, reference
from tests.fake_engine import FakeEngine
from tests.helpers import REPO

DIGEST = "sha256:" + "ab" * 32


def test_references() -> None:
    r = reference.parse_reference(f"127.0.0.1:5000/team/base:bookworm@{DIGEST}")
    assert (r.registry, r.repository, r.tag, r.digest) == ("127.0.0.1:5000", "team/base",
                                                           "bookworm", DIGEST)  # fmt: skip
    assert r.reference == DIGEST and str(r) == f"127.0.0.1:5000/team/base:bookworm@{DIGEST}"
    assert reference.parse_reference("debian:bookworm").name == "docker.io/library/debian"
    assert reference.parse_reference("localhost/x").registry == "localhost"
    for bad in ("quay.io/UPPER:1", "quay.io/x@sha256:12", "quay.io/x:$(id)", "quay.io/a b"):
        with pytest.raises(TrainimgError, match=r"expected HOST|digest|tag"):
            reference.parse_reference(bad)


def test_insecure_registries() -> None:
    assert reference.is_insecure("127.0.0.1:5000", {})
    assert reference.is_insecure("localhost:5000", {})
    assert reference.is_insecure("[::1]:5000", {})
    assert not reference.is_insecure("quay.io", {})
    assert reference.is_insecure("reg.lan:5000", {reference.INSECURE_ENV: "a.lan, reg.lan:5000"})


def _auths(path: Path, host: str, user: str, password: str, **extra: object) -> Path:
    secret = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auths": {host: {"auth": secret}}, **extra}))
    return path


def test_credentials_lookup_order_and_secrecy(tmp_path: Path) -> None:
    first = _auths(tmp_path / "auth.json", "reg:5000", "podman-user", "p1")
    runtime = tmp_path / "run"
    _auths(runtime / "containers" / "auth.json", "reg:5000", "runtime-user", "p2")
    _auths(tmp_path / "docker" / "config.json", "https://reg:5000/v1/", "docker-user", "p3")
    env = {"REGISTRY_AUTH_FILE": str(first), "XDG_RUNTIME_DIR": str(runtime),
           "DOCKER_CONFIG": str(tmp_path / "docker")}  # fmt: skip
    creds = auth.lookup("reg:5000", env)
    assert creds is not None and (creds.username, creds.password) == ("podman-user", "p1")
    assert "p1" not in repr(creds) and "p1" not in str(creds)
    del env["REGISTRY_AUTH_FILE"]
    assert auth.lookup("reg:5000", env).username == "runtime-user"  # type: ignore[union-attr]
    del env["XDG_RUNTIME_DIR"]
    assert auth.lookup("reg:5000", env).username == "docker-user"  # type: ignore[union-attr]
    assert auth.lookup("other:1", env) is None
    helper = tmp_path / "helper" / "config.json"
    helper.parent.mkdir()
    helper.write_text(json.dumps({"auths": {"reg:5000": {}}, "credsStore": "secretservice"}))
    with pytest.raises(auth.CredentialsError, match="credential helper"):
        auth.lookup("reg:5000", {"DOCKER_CONFIG": str(helper.parent)})
    # credHelpers only (ECR, GCR): named, not "log in"
    ecr = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
    helper.write_text(json.dumps({"credHelpers": {ecr: "ecr-login"}}))
    with pytest.raises(auth.CredentialsError, match="docker-credential-ecr-login"):
        auth.lookup(ecr, {"DOCKER_CONFIG": str(helper.parent)})
    assert auth.lookup("other:1", {"DOCKER_CONFIG": str(helper.parent)}) is None


def test_credentials_in_build_args_are_refused_without_echo() -> None:
    auth.refuse_credentials_in_buildargs({"PIP_INDEX_URL": "https://pypi.org/simple"})
    with pytest.raises(auth.CredentialsError, match="PIP_EXTRA_INDEX_URL") as err:
        auth.refuse_credentials_in_buildargs(
            {"PIP_EXTRA_INDEX_URL": "https://bot:s3cr3t@pypi.example/simple"}
        )
    assert "s3cr3t" not in str(err.value)


def test_pin_edits_only_the_digest() -> None:
    text = (REPO / "matrix.yaml").read_text()
    out = pin.set_digest(text, "rocky9", DIGEST)
    changed = [(a, b) for a, b in zip(text.splitlines(), out.splitlines(), strict=True) if a != b]
    assert changed == [("    digest: null", f"    digest: {DIGEST}")]
    commented = pin.set_digest(text, "centos-stream9", DIGEST)
    assert f"    digest: {DIGEST}            # no registry reachable" in commented
    added = pin.set_digest(text, "debian12", DIGEST)  # no digest line yet: added under base
    assert f"    base: localhost/trainimg-base:bookworm\n    digest: {DIGEST}\n" in added
    assert len(added.splitlines()) == len(text.splitlines()) + 1
    assert pin.set_digest(out, "rocky9", None) == text
    with pytest.raises(pin.PinError, match=r"oses\.nope not found"):
        pin.set_digest(text, "nope", DIGEST)


def _record(chash: str, pushed: dict[str, str] | None = None) -> BuildRecord:
    return BuildRecord("sha256:" + "0" * 64, ["r:cell", f"r:{chash}"], None, 1, "b", None, {},
                       "2.13.0", None, "podman", "t", chash, pushed or {})  # fmt: skip


def test_prune_takes_only_unreferenced_build_hash_tags() -> None:
    records = {"a": _record("1" * 16), "b": _record("2" * 16, {"reg/x:" + "3" * 16: DIGEST})}
    tags = ["cell", "latest", "1" * 16, "2" * 16, "3" * 16, "4" * 16, "5" * 15]
    assert prune.stale(tags, records) == ["4" * 16]


def test_release_date_is_the_newest_list() -> None:
    texts = ["Origin: Debian\nDate: Sat, 09 Nov 2024 10:00:00 UTC\n",
             "Date: Fri, 29 Nov 2024 00:53:13 UTC\nValid-Until: x\n"]  # fmt: skip
    assert release_date(texts) == "2024-11-29T00:53:13Z"
    with pytest.raises(BaseImageError, match="Date"):
        release_date(["Origin: Debian\n"])


class _LyingRegistryEngine(FakeEngine):
    """An engine whose pull succeeds but stores content under another digest."""

    def image_exists(self, ref: str) -> bool:
        return "@" not in ref

    def inspect_image(self, ref: str) -> ImageInfo:
        return ImageInfo("sha256:" + "1" * 64, (), "sha256:" + "cd" * 32, 0, {}, {}, "", (), ())


def test_a_pull_whose_digest_does_not_match_is_refused() -> None:
    engine = _LyingRegistryEngine()
    with pytest.raises(pull.PullError, match=r"cell c1: base .* arrived with digest sha256:cdcd"):
        pull.pull_base(engine, f"127.0.0.1:5000/base:1@{DIGEST}", "c1")
    assert engine.store.pulls == [f"127.0.0.1:5000/base:1@{DIGEST}"]

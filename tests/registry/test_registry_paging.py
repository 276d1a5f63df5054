"""Tags on every page: a real registry (Debian's docker-registry) behind a loopback proxy that
pages `tags/list` at 2 tags as Quay pages at 100 (tests/registry/paging_proxy.py). The client
lists every page, followed by Link or by n/last; `prune --registry` keeps every manifest a
tag on any page names, so a cell tag on page 3 keeps the manifest a stale build-hash tag on
page 1 shares. A next page on another host, or pages that loop, fail the listing (exit 2)
and nothing is deleted. A first-page-only client deletes the cell tag's manifest here."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.build import lock
from builder.registry.client import RegistryClient, RegistryError
from builder.registry.reference import parse_reference
from tests.helpers import REPO, RunCli
from tests.registry.paging_proxy import paging_proxy
from tests.registry.server import Registry

pytestmark = [pytest.mark.engine]

REPOSITORY = "team/trainimg"
CELL_A = "debian12-cpu-py3.11-torch2.13.0-runtime"
CELL_B = "rocky9-cu128-py3.12-torch2.11.0-runtime"
STALE_SHARED, KEPT, STALE_ALONE, STALE_SHARED_2 = "a" * 16, "b" * 16, "c" * 16, "d" * 16
# sorted, at 2 a page: [aaaa, bbbb] [cccc, dddd] [debian12-..., rocky9-...]
TAGS = {
    CELL_A: "A",
    STALE_SHARED: "A",  # stale, but CELL_A (page 3) names the same manifest
    KEPT: "B",  # the lock names it
    STALE_ALONE: "C",  # stale and alone: the one manifest prune may delete
    STALE_SHARED_2: "D",
    CELL_B: "D",
}


def _push(client: RegistryClient, name: str) -> tuple[bytes, str]:
    image = {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
             "config": {"Labels": {"test.manifest": name}}}  # fmt: skip
    config = json.dumps(image).encode()
    digest = client.put_blob(REPOSITORY, config)
    media = "application/vnd.oci.image.manifest.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": media, "layers": [],
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "size": len(config), "digest": digest}}  # fmt: skip
    return json.dumps(manifest).encode(), media


@pytest.fixture
def filled(registries: Callable[..., Registry]) -> tuple[Registry, dict[str, str]]:
    """The registry holding TAGS: tag -> manifest digest."""
    reg = registries()
    client = RegistryClient(reg.host)
    try:
        bodies = {m: _push(client, m) for m in sorted(set(TAGS.values()))}
        digests = {t: client.put_manifest(REPOSITORY, t, *bodies[m]) for t, m in TAGS.items()}
    finally:
        client.close()
    return reg, digests


def _lock(tmp_path: Path) -> Path:
    path = tmp_path / "lock.json"
    record = lock.BuildRecord("sha256:" + "0" * 64, [f"r:{CELL_B}", f"r:{KEPT}"], None, 1, "b",
                              None, {}, "2.11.0", None, "podman", "t", KEPT)  # fmt: skip
    lock.update(path, CELL_B, record)
    return path


def _left(reg: Registry) -> dict[str, str]:
    """tag -> digest of what the registry itself still holds (no proxy between)."""
    client = RegistryClient(reg.host)
    try:
        left = client.tags(REPOSITORY)
        return {t: client.manifest_digest(parse_reference(f"{reg.host}/{REPOSITORY}:{t}"))
                for t in left}  # fmt: skip
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["link", "silent"])
def test_prune_keeps_every_tag_on_every_page(
    mode: str, filled: tuple[Registry, dict[str, str]], run_cli: RunCli, tmp_path: Path
) -> None:
    reg, digests = filled
    with paging_proxy(reg.url, page=2, mode=mode) as proxy:
        r = run_cli("prune", "--matrix", str(REPO / "matrix.yaml"), "--lock", str(_lock(tmp_path)),
                    "--registry", f"{proxy}/{REPOSITORY}")  # fmt: skip
        assert r.code == 0, r.err
        expected = {t: d for t, d in digests.items() if t != STALE_ALONE}
        assert _left(reg) == expected  # every cell tag and everything they share is still there
        assert f"kept {proxy}/{REPOSITORY}:{STALE_SHARED} (its manifest" in r.out
        assert f"kept {proxy}/{REPOSITORY}:{STALE_SHARED_2} (its manifest" in r.out
        assert f"removed {proxy}/{REPOSITORY}:{STALE_ALONE} ({digests[STALE_ALONE]})" in r.out
        client = RegistryClient(proxy)
        try:
            first = client._request("GET", f"/v2/{REPOSITORY}/tags/list").json()["tags"]
            assert first == [STALE_SHARED, KEPT]  # it does page
            assert client.tags(REPOSITORY) == sorted(expected)
            with pytest.raises(RegistryError, match="more than 1 pages; refusing a partial"):
                client.tags(REPOSITORY, max_pages=1)
        finally:
            client.close()


@pytest.mark.parametrize(
    ("mode", "why"),
    [("foreign", "its next page is on another host (127.0.0.1:1)"), ("loop", "its pages loop")],
)
def test_a_listing_that_cannot_be_whole_deletes_nothing(
    mode: str, why: str, filled: tuple[Registry, dict[str, str]], run_cli: RunCli, tmp_path: Path
) -> None:
    reg, digests = filled
    with paging_proxy(reg.url, page=2, mode=mode) as proxy:
        client = RegistryClient(proxy)
        try:
            with pytest.raises(RegistryError, match=re.escape(why)):
                client.tags(REPOSITORY)
        finally:
            client.close()
        r = run_cli("prune", "--matrix", str(REPO / "matrix.yaml"), "--lock", str(_lock(tmp_path)),
                    "--registry", f"{proxy}/{REPOSITORY}")  # fmt: skip
    assert r.code == 2 and why in r.err and "Traceback" not in r.err
    assert _left(reg) == digests

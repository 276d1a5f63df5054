"""A small client of the Docker Registry HTTP API v2 (the OCI distribution spec): resolve a
tag to its manifest digest, list tags, delete a manifest. Basic and bearer-token auth; https
with the system's (or $REQUESTS_CA_BUNDLE's) CAs, plain http only for insecure registries
(reference.is_insecure). Errors name the registry and say what would help; the password never
appears in one.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import requests

from builder.engines.credentials import Credentials
from builder.errors import TrainimgError
from builder.registry import certs
from builder.registry.reference import Reference, is_insecure

MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
TIMEOUT = 30.0
# Listing tags: the page size asked for (Quay's and Docker Hub's most), and the bounds of one
# listing - a million tags, or ten minutes - past which it fails rather than answer in part.
PAGE_SIZE = 100
MAX_PAGES = 10_000
LIST_DEADLINE = 600.0
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_LINK = re.compile(r'^<(?P<url>[^>]*)>\s*;\s*rel="?(?P<rel>[^";]*)"?')


class RegistryError(TrainimgError):
    """Unreachable, refused credentials, unknown name/tag: exit 2."""


class RegistryClient:
    def __init__(
        self,
        registry: str,
        creds: Credentials | None = None,
        *,
        insecure: bool | None = None,
        timeout: float = TIMEOUT,
    ) -> None:
        self.registry = registry
        self._creds = creds
        self._insecure = is_insecure(registry) if insecure is None else insecure
        self._timeout = timeout
        self._session = requests.Session()
        tls = certs.lookup_tls(registry)
        self._bundle = certs.verify_bundle(tls)
        self._session.verify = self._bundle
        if tls.client is not None:
            self._session.cert = (str(tls.client[0]), str(tls.client[1]))
        self._scheme: str | None = None
        self._token: str | None = None

    def close(self) -> None:
        self._session.close()
        if isinstance(self._bundle, str):
            Path(self._bundle).unlink(missing_ok=True)

    # --- transport -------------------------------------------------------------------------

    def _send(
        self, method: str, path: str, headers: Mapping[str, str], data: bytes | None = None
    ) -> requests.Response:
        schemes = (
            [self._scheme] if self._scheme else ["https", "http"][: 2 if self._insecure else 1]
        )
        last: Exception | None = None
        for scheme in schemes:
            try:
                response = self._session.request(
                    method,
                    f"{scheme}://{self.registry}{path}",
                    headers=dict(headers),
                    data=data,
                    timeout=self._timeout,
                )
            except requests.exceptions.SSLError as exc:
                last = exc
                continue
            except requests.exceptions.RequestException as exc:
                last = exc
                continue
            self._scheme = scheme
            return response
        hint = (
            "is it running, and is the CA that signed its certificate trusted (its ca.crt in "
            f"/etc/containers/certs.d/{self.registry}/, as podman reads it, or "
            "$REQUESTS_CA_BUNDLE)?"
        )
        raise RegistryError(f"registry {self.registry} is unreachable ({_short(last)}); {hint}")

    def _request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str] | None = None,
        data: bytes | None = None,
    ) -> requests.Response:
        base = dict(headers or {})
        if self._token:
            base["Authorization"] = f"Bearer {self._token}"
        response = self._send(method, path, base, data)
        if response.status_code != 401:
            return response
        challenge = response.headers.get("WWW-Authenticate", "")
        if self._creds is None:
            raise RegistryError(
                f"registry {self.registry} wants credentials and none are known for it: log in "
                "(`podman login` / `docker login`) or set $REGISTRY_AUTH_FILE"
            )
        if challenge.lower().startswith("bearer"):
            self._token = self._fetch_token(dict(_CHALLENGE.findall(challenge)))
            base["Authorization"] = f"Bearer {self._token}"
            response = self._send(method, path, base, data)
        else:
            response = self._session.request(
                method,
                f"{self._scheme}://{self.registry}{path}",
                headers=base,
                data=data,
                auth=(self._creds.username, self._creds.password),
                timeout=self._timeout,
            )
        if response.status_code == 401:
            raise RegistryError(
                f"registry {self.registry} refused the credentials of {self._creds.username} "
                f"(from {self._creds.source}): wrong user or password?"
            )
        return response

    def _fetch_token(self, params: dict[str, str]) -> str:
        realm = params.pop("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise RegistryError(f"registry {self.registry}: a token challenge without a realm")
        assert self._creds is not None
        try:
            response = self._session.get(
                realm,
                params=params,
                auth=(self._creds.username, self._creds.password),
                timeout=self._timeout,
            )
        except requests.exceptions.RequestException as exc:
            raise RegistryError(
                f"registry {self.registry}: token service {realm} unreachable ({_short(exc)})"
            ) from None
        if response.status_code in (401, 403):
            raise RegistryError(
                f"registry {self.registry} refused the credentials of {self._creds.username} "
                f"(from {self._creds.source}): wrong user or password?"
            )
        body: Any = response.json() if response.ok else {}
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError(f"registry {self.registry}: no token from {realm}")
        return str(token)

    # --- the API ---------------------------------------------------------------------------

    def ping(self) -> None:
        """Reachable, speaks v2, and takes our credentials (if it wants any)."""
        _check(self._request("GET", "/v2/"), f"registry {self.registry}")

    def manifest_digest(self, ref: Reference) -> str:
        """The digest of the manifest (or index) `ref` names, as the registry serves it."""
        path = f"/v2/{ref.repository}/manifests/{ref.reference}"
        response = self._request("HEAD", path, {"Accept": MANIFEST_TYPES})
        if response.status_code == 404:
            raise RegistryError(
                f"registry {self.registry} has no {ref.repository}:{ref.reference} "
                "(no such repository or tag): push it first, or fix the name"
            )
        _check(response, f"registry {self.registry}: {ref}")
        digest = response.headers.get("Docker-Content-Digest")
        if not digest:
            body = self._request("GET", path, {"Accept": MANIFEST_TYPES})
            _check(body, f"registry {self.registry}: {ref}")
            digest = "sha256:" + hashlib.sha256(body.content).hexdigest()
        if ref.digest and digest != ref.digest:
            raise RegistryError(
                f"registry {self.registry}: {ref} resolves to {digest}, not the digest asked for"
            )
        return digest

    def put_blob(self, repository: str, data: bytes) -> str:
        """Upload `data` as a blob of `repository` (monolithic); its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        start = self._request("POST", f"/v2/{repository}/blobs/uploads/")
        _check(start, f"registry {self.registry}: upload to {repository}")
        location = start.headers.get("Location", "")
        path = location.split(self.registry, 1)[-1] if "://" in location else location
        sep = "&" if "?" in path else "?"
        put = self._request(
            "PUT",
            f"{path}{sep}digest={digest}",
            {"Content-Type": "application/octet-stream"},
            data,
        )
        _check(put, f"registry {self.registry}: upload to {repository}")
        return digest

    def put_manifest(self, repository: str, tag: str, body: bytes, media_type: str) -> str:
        """PUT a manifest under `tag`; the digest the registry reports for it."""
        response = self._request(
            "PUT", f"/v2/{repository}/manifests/{tag}", {"Content-Type": media_type}, body
        )
        _check(response, f"registry {self.registry}: manifest {repository}:{tag}")
        return response.headers.get("Docker-Content-Digest") or (
            "sha256:" + hashlib.sha256(body).hexdigest()
        )

    def get_manifest(self, ref: Reference) -> tuple[bytes, str]:
        """The manifest `ref` names, as the registry serves it: (bytes, media type)."""
        path = f"/v2/{ref.repository}/manifests/{ref.reference}"
        response = self._request("GET", path, {"Accept": MANIFEST_TYPES})
        _check(response, f"registry {self.registry}: {ref}")
        return response.content, response.headers.get("Content-Type", "")

    def get_blob(self, repository: str, digest: str) -> bytes:
        """A blob of `repository`, checked against its digest."""
        response = self._request("GET", f"/v2/{repository}/blobs/{digest}")
        _check(response, f"registry {self.registry}: blob {repository}@{digest}")
        if "sha256:" + hashlib.sha256(response.content).hexdigest() != digest:
            raise RegistryError(
                f"registry {self.registry}: blob {digest} does not match its digest"
            )
        return response.content

    def tags(
        self,
        repository: str,
        *,
        page_size: int = PAGE_SIZE,
        max_pages: int = MAX_PAGES,
        deadline_s: float = LIST_DEADLINE,
    ) -> list[str]:
        """Every tag of `repository`, on every page, or an error: never a partial list (prune
        deletes by what it does not see). Pages are followed by their `Link: <...>;
        rel="next"` header (Quay, Harbor, distribution); a page without one is followed by
        `?n=&last=` (the distribution spec's paging, for registries that page without saying
        so) until a page adds no tag. Bounded by `max_pages` and `deadline_s`."""
        what = f"registry {self.registry}: tags of {repository}"
        base = f"/v2/{repository}/tags/list"
        path = f"{base}?n={page_size}"
        found: set[str] = set()
        asked: set[str] = set()
        probing = False  # this page was not named by a Link: the registry may not page at all
        end = time.monotonic() + deadline_s
        for page in range(max_pages):
            if time.monotonic() > end:
                raise RegistryError(f"{what}: not listed within {deadline_s:.0f} s ({page} pages)")
            asked.add(path)
            response = self._request("GET", path)
            if response.status_code == 404 and page == 0:
                return []
            if probing and response.status_code == 400:
                return sorted(found)  # it takes no `last`: it did not page, the list is whole
            _check(response, what)
            names = _tag_names(response, what)
            new = set(names) - found
            if not new:
                return sorted(found)
            found.update(new)
            link = _next_page(response.headers.get("Link", ""), self.registry, path, what)
            probing = link is None
            path = link or f"{base}?" + urlencode({"n": page_size, "last": names[-1]})
            if path in asked:
                raise RegistryError(f"{what}: its pages loop (page {page + 2} is {path})")
        raise RegistryError(f"{what}: more than {max_pages} pages; refusing a partial list of tags")

    def delete_manifest(self, repository: str, digest: str) -> None:
        response = self._request("DELETE", f"/v2/{repository}/manifests/{digest}")
        if response.status_code == 405:
            raise RegistryError(
                f"registry {self.registry} does not allow deletes "
                "(distribution: storage.delete.enabled: true)"
            )
        if response.status_code != 404:
            _check(response, f"registry {self.registry}: delete {repository}@{digest}")


def _tag_names(response: requests.Response, what: str) -> list[str]:
    try:
        body: Any = response.json()
    except ValueError:
        raise RegistryError(f"{what}: the answer is not JSON ({response.text[:80]!r})") from None
    names = body.get("tags") if isinstance(body, dict) else None
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RegistryError(f"{what}: `tags` is not a list of names")
    return names


def _next_page(link: str, registry: str, current: str, what: str) -> str | None:
    """The path of the `rel="next"` page a Link header names, resolved against the current
    page; None without one. A next page on another host is refused: credentials go only to
    the registry asked."""
    for part in link.split(","):
        m = _LINK.match(part.strip())
        if m is None or "next" not in m.group("rel").split():
            continue
        target = urlsplit(urljoin(f"http://{registry}{current}", m.group("url")))
        if target.netloc != registry:
            raise RegistryError(f"{what}: its next page is on another host ({target.netloc})")
        return str(target.path) + (f"?{target.query}" if target.query else "")
    return None


def _check(response: requests.Response, what: str) -> None:
    if response.status_code >= 400:
        raise RegistryError(f"{what}: HTTP {response.status_code} {response.text[:200].strip()}")


def _short(exc: Exception | None) -> str:
    text = str(exc or "no answer")
    return text if len(text) < 200 else text[:200] + "..."

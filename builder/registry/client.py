"""A small client of the Docker Registry HTTP API v2 (the OCI distribution spec): resolve a
tag to its manifest digest, list tags, delete a manifest. Basic and bearer-token auth; https
with the system's (or $REQUESTS_CA_BUNDLE's) CAs, plain http only for insecure registries
(reference.is_insecure). Errors name the registry and say what would help; the password never
appears in one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests

from builder.credentials import Credentials
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
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


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

    def tags(self, repository: str) -> list[str]:
        response = self._request("GET", f"/v2/{repository}/tags/list")
        if response.status_code == 404:
            return []
        _check(response, f"registry {self.registry}: tags of {repository}")
        return sorted(response.json().get("tags") or [])

    def delete_manifest(self, repository: str, digest: str) -> None:
        response = self._request("DELETE", f"/v2/{repository}/manifests/{digest}")
        if response.status_code == 405:
            raise RegistryError(
                f"registry {self.registry} does not allow deletes "
                "(distribution: storage.delete.enabled: true)"
            )
        if response.status_code != 404:
            _check(response, f"registry {self.registry}: delete {repository}@{digest}")


def _check(response: requests.Response, what: str) -> None:
    if response.status_code >= 400:
        raise RegistryError(f"{what}: HTTP {response.status_code} {response.text[:200].strip()}")


def _short(exc: Exception | None) -> str:
    text = str(exc or "no answer")
    return text if len(text) < 200 else text[:200] + "..."

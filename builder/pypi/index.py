"""A small PEP 691 / PEP 658 reader over urllib: every request has a deadline, and a request
past it fails with one clear error naming the URL."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from builder.errors import TrainimgError

PYPI_SIMPLE = "https://pypi.org/simple"
PEP_691 = "application/vnd.pypi.simple.v1+json"
MAX_BYTES = 64 << 20  # an index page or a METADATA file; a wheel is never read


class IndexReadError(TrainimgError):
    """The index could not be read: the message names the URL and why."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    yanked: bool


class Index:
    """One package index (its simple/ root), read with a per-request deadline in seconds."""

    def __init__(self, root: str = PYPI_SIMPLE, timeout: float = 30.0) -> None:
        self.root = root.rstrip("/")
        self.timeout = timeout

    def _get(self, url: str, accept: str | None) -> bytes | None:
        """The body at `url`; None on 404 (no such file)."""
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise IndexReadError(f"{url}: not an http(s) URL (--index takes http:// or https://)")
        req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                body: bytes = resp.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise IndexReadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except TimeoutError:
            raise IndexReadError(
                f"{url}: no answer within the {self.timeout:g} s deadline (--timeout)"
            ) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise IndexReadError(
                    f"{url}: no answer within the {self.timeout:g} s deadline (--timeout)"
                ) from None
            raise IndexReadError(f"{url}: {exc.reason}") from None
        if len(body) > MAX_BYTES:
            raise IndexReadError(f"{url}: larger than {MAX_BYTES >> 20} MiB: not an index page")
        return body

    def files(self, project: str) -> list[IndexFile]:
        """The project's files from its PEP 691 JSON page."""
        url = f"{self.root}/{project}/"
        body = self._get(url, PEP_691)
        if body is None:
            raise IndexReadError(f"{url}: no such project on the index (HTTP 404)")
        try:
            doc: Any = json.loads(body)
            rows = doc["files"]
            return [
                IndexFile(
                    str(r["filename"]),
                    urllib.parse.urljoin(url, str(r["url"])),
                    bool(r.get("yanked", False)),
                )
                for r in rows
            ]
        except (ValueError, KeyError, TypeError):
            raise IndexReadError(f"{url}: not a PEP 691 JSON project page") from None

    def metadata(self, file: IndexFile) -> str | None:
        """The wheel's METADATA from its PEP 658 .metadata file; None when the index has none."""
        body = self._get(file.url.split("#", 1)[0] + ".metadata", None)
        return body.decode("utf-8", "replace") if body is not None else None

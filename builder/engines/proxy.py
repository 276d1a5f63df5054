"""The host's HTTP proxy for a build's network stage, as a value that never shows its secrets.

A build behind an enterprise proxy needs `http_proxy`/`https_proxy`/`no_proxy` in the RUN
steps that fetch packages (dnf, curl), often with credentials in the URL. They reach the build
only through the engine API's own proxy channel: Docker's predefined proxy build arguments
(kept out of `docker history` unless a Containerfile declares them, which ours never do) and,
on podman, the same predefined arguments, which buildah also keeps out of the image's history
and config. They are never build arguments of the build hash, labels, the lock or a log line:
`repr`/`str` of a Proxy show each URL with its password replaced (`redact`).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from builder.errors import TrainimgError

# The variables curl, dnf (librepo) and pip read, in both spellings; the engines accept both
# as predefined build arguments (Docker's and buildah's builtin proxy arguments).
NAMES = ("http_proxy", "https_proxy", "no_proxy")
SCHEMES = ("http", "https", "socks5", "socks5h")
_NO_PROXY = re.compile(r"[A-Za-z0-9.*:/\[\],_-]*")


class ProxyError(TrainimgError):
    """A proxy setting that is not a proxy URL (exit 2); the message never holds a password."""


def redact(url: str) -> str:
    """The URL with its password (or token user) replaced by ***: safe for any message."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    shown = f"{user}:***@{hostport}" if ":" in userinfo else f"***@{hostport}"
    return urllib.parse.urlunsplit(parts._replace(netloc=shown))


def _shown(url: str) -> str:
    """A refused value as a message may show it: redacted, or not at all when it does not
    even parse as a URL (a password could be anywhere in it)."""
    if "://" in url and not any(c.isspace() for c in url):
        return repr(redact(url))
    return "its value (not shown: it may hold a password)"


def _checked_url(url: str, where: str) -> str:
    expected = f"expected {'|'.join(SCHEMES)}://[user:password@]host[:port]"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ProxyError(f"{where}: {_shown(url)} is not a proxy URL ({expected})") from None
    if parts.scheme not in SCHEMES or not parts.hostname or any(c.isspace() for c in url):
        raise ProxyError(f"{where}: {_shown(url)} is not a proxy URL ({expected})")
    return url


@dataclass(frozen=True)
class Proxy:
    """The proxy variables a build's RUN steps get: name -> value, lower-case names."""

    env: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Proxy({ {k: redact(v) for k, v in sorted(self.env.items())} })"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self.env)

    @property
    def buildargs(self) -> dict[str, str]:
        """Both spellings, as the engines' predefined proxy build arguments."""
        out: dict[str, str] = {}
        for name, value in sorted(self.env.items()):
            out[name] = value
            out[name.upper()] = value
        return out

    def scrub(self, text: str) -> str:
        """`text` with every secret the proxy carries (as typed or percent-encoded, as an
        engine's error may echo the request's URL) replaced by ***."""
        for secret in self.secrets():
            quoted = urllib.parse.quote(secret, safe="")
            for form in sorted({secret, quoted, urllib.parse.quote_plus(secret)}, key=len)[::-1]:
                text = text.replace(form, "***")
        return text

    def secrets(self) -> list[str]:
        """The passwords it carries (what must never appear in an image, a log or the lock)."""
        found = []
        for value in self.env.values():
            parts = urllib.parse.urlsplit(value)
            found += [
                unquoted
                for raw in (parts.password, parts.username if parts.password is None else None)
                if raw
                for unquoted in {raw, urllib.parse.unquote(raw)}
            ]
        return found


def from_environment(environ: Mapping[str, str], url: str | None = None) -> Proxy:
    """The host's proxy variables (lower-case first, as curl reads them), with `--proxy URL`
    (if given) as both http_proxy and https_proxy. Bad values fail naming the variable."""
    env: dict[str, str] = {}
    for name in NAMES:
        value = environ.get(name) or environ.get(name.upper())
        if not value:
            continue
        source = name if environ.get(name) else name.upper()
        if name == "no_proxy":
            if not _NO_PROXY.fullmatch(value):
                raise ProxyError(
                    f"${source}: {value!r} is not a no_proxy list (comma-separated hosts, "
                    "domains, addresses or CIDRs)"
                )
            env[name] = value
        else:
            env[name] = _checked_url(value, f"${source}")
    if url is not None:
        _checked_url(url, "--proxy")
        env["http_proxy"] = env["https_proxy"] = url
    return Proxy(env)

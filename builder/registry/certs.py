"""TLS for a private registry the way podman finds it (containers-certs.d(5)): a directory
named HOST[:PORT] under $XDG_CONFIG_HOME/containers/certs.d (~/.config/...), then
/etc/containers/certs.d, then /etc/docker/certs.d, holding CA certificates (*.crt) and client
certificate pairs (NAME.cert + NAME.key). The registry client trusts those CAs beside the
system's (or $REQUESTS_CA_BUNDLE's), so a registry signed by a private CA needs no more than
what podman already needs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SYSTEM_BUNDLES = (
    Path("/etc/ssl/certs/ca-certificates.crt"),
    Path("/etc/pki/tls/certs/ca-bundle.crt"),
)


@dataclass(frozen=True)
class RegistryTls:
    directory: Path | None  # the certs.d directory used, if any
    cas: tuple[Path, ...]
    client: tuple[Path, Path] | None  # (cert, key)


def cert_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if env is None else env
    home = Path(env.get("HOME", "~")).expanduser()
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return [
        config / "containers" / "certs.d",
        Path("/etc/containers/certs.d"),
        Path("/etc/docker/certs.d"),
    ]


def lookup_tls(registry: str, env: Mapping[str, str] | None = None) -> RegistryTls:
    """The first certs.d directory named after `registry` (HOST[:PORT]); empty when none."""
    for base in cert_dirs(env):
        d = base / registry
        if not d.is_dir():
            continue
        cas = tuple(sorted(d.glob("*.crt")))
        client = None
        for cert in sorted(d.glob("*.cert")):
            key = cert.with_suffix(".key")
            if key.is_file():
                client = (cert, key)
                break
        return RegistryTls(d, cas, client)
    return RegistryTls(None, (), None)


def verify_bundle(tls: RegistryTls, env: Mapping[str, str] | None = None) -> str | bool:
    """What `requests` verifies against: True (its default), or a bundle file of the system's
    CAs and the registry's certs.d CAs (written once per process, in a temporary file)."""
    if not tls.cas:
        return True
    env = os.environ if env is None else env
    system = [Path(env["REQUESTS_CA_BUNDLE"])] if env.get("REQUESTS_CA_BUNDLE") else []
    system += [p for p in SYSTEM_BUNDLES if p.is_file()][:1]
    parts = [p.read_text(encoding="utf-8", errors="replace") for p in (*system, *tls.cas)]
    fd, name = tempfile.mkstemp(prefix="trainimg-ca-", suffix=".pem")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts))
    return name

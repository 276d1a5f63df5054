"""Registry credentials from the engines' usual files; never printed, logged or recorded.

Looked up in podman's order (containers-auth.json(5)), the first file that names the registry
winning, so that after `podman login` trainimg never asks to log in again:
  1. $REGISTRY_AUTH_FILE                      (podman, skopeo, buildah)
  2. podman login's file: ${XDG_RUNTIME_DIR}/containers/auth.json, or, where XDG_RUNTIME_DIR
     is unset (root without a login session), /run/containers/<uid>/auth.json
  3. ${XDG_CONFIG_HOME:-~/.config}/containers/auth.json
  4. $DOCKER_CONFIG/config.json or ~/.docker/config.json  (docker login)
Each holds {"auths": {"HOST[:PORT]": {"auth": base64("user:password")}}}. Credential helpers
(credsStore, credHelpers) are not run: trainimg says so instead of guessing.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from builder.engines.credentials import Credentials
from builder.errors import TrainimgError


class CredentialsError(TrainimgError):
    pass


def auth_files(env: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if env is None else env
    files = []
    if env.get("REGISTRY_AUTH_FILE"):
        files.append(Path(env["REGISTRY_AUTH_FILE"]))
    if env.get("XDG_RUNTIME_DIR"):
        files.append(Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    else:
        files.append(Path(f"/run/containers/{os.getuid()}/auth.json"))
    home = Path(env.get("HOME", "~")).expanduser()
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    files.append(config / "containers" / "auth.json")
    docker_dir = env.get("DOCKER_CONFIG") or str(
        Path(env.get("HOME", "~")).expanduser() / ".docker"
    )
    files.append(Path(docker_dir) / "config.json")
    return files


def _host(key: str) -> str:
    """An `auths` key ("https://host:5000/v1/", "host:5000") -> "host:5000"."""
    return key.split("://", 1)[-1].split("/", 1)[0]


def lookup(registry: str, env: Mapping[str, str] | None = None) -> Credentials | None:
    """The credentials for `registry` (HOST[:PORT]), or None when no file names it."""
    for path in auth_files(env):
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CredentialsError(f"{path}: unreadable credentials file ({exc})") from None
        helpers = data.get("credHelpers") if isinstance(data, dict) else None
        helper = helpers.get(registry) if isinstance(helpers, dict) else None
        auths = data.get("auths") if isinstance(data, dict) else None
        if helper and not (
            isinstance(auths, dict) and any(_host(str(k)) == registry for k in auths)
        ):
            # ECR, GCR: a credHelpers-only config names the registry but holds no secret
            raise CredentialsError(
                f"{path}: credHelpers gives {registry} to docker-credential-{_printable(helper)}, "
                "which trainimg does not run; `podman login --authfile "
                "$XDG_RUNTIME_DIR/containers/auth.json` (for ECR: `aws ecr get-login-password "
                "| podman login --username AWS --password-stdin REGISTRY`), or set "
                "$REGISTRY_AUTH_FILE to a file with an `auths` entry"
            )
        if not isinstance(auths, dict):
            continue
        for key, entry in auths.items():
            if _host(str(key)) != registry or not isinstance(entry, dict):
                continue
            encoded = entry.get("auth")
            if not encoded:
                if data.get("credsStore") or (data.get("credHelpers") or {}).get(registry):
                    raise CredentialsError(
                        f"{path}: credentials for {registry} are in a credential helper, which "
                        "trainimg does not run; log in with `podman login --authfile` instead"
                    )
                continue
            try:
                user, sep, password = base64.b64decode(encoded).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                sep = ""
            if not sep:
                raise CredentialsError(
                    f"{path}: auths.{key}.auth is not base64 of user:password"
                ) from None
            return Credentials(registry, user, password, str(path))
    return None


_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]+@")


def refuse_credentials_in_buildargs(buildargs: Mapping[str, str]) -> None:
    """Build arguments used by a RUN step are written into the image's history by every
    engine without BuildKit secrets (the classic builder, buildah): one carrying credentials
    (an index URL with user:password@) is refused, naming the argument but not its value."""
    for key, value in sorted(buildargs.items()):
        if _URL_CREDENTIALS.search(value):
            raise CredentialsError(
                f"--build-arg {key}: the URL carries credentials (user:password@host), which "
                "would be stored in the image history; build from a wheelhouse "
                "(`trainimg wheelhouse`, --wheelhouse) or use an index that needs none"
            )


def _printable(value: object) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(value)[:80])

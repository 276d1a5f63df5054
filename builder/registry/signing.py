"""Sign while pushing, with podman's own simple signing: `podman push --sign-by KEY` (GPG,
through gpgme; the key in the user's keyring, $GNUPGHOME). The libpod API cannot sign, so the
push goes through the podman CLI against the same store (an isolated store's configuration,
or the host's podman). The signature is written where registries.d says (`trainimg policy`
writes that entry); with no entry for the repository the push is refused before anything moves.
Credentials reach podman as the path of the file they came from (--authfile), never on its
command line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from builder.credentials import Credentials
from builder.errors import TrainimgError
from builder.registry.policy import staging_for
from builder.registry.reference import Reference


class SigningError(TrainimgError):
    pass


def registries_d_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where containers/image reads registries.d: the user's, else the system's."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME", "~")).expanduser()
    return [home / ".config" / "containers" / "registries.d", Path("/etc/containers/registries.d")]


def check_staging(repo: Reference, env: Mapping[str, str] | None = None) -> str:
    staging = staging_for(repo, registries_d_dirs(env))
    if staging is None:
        raise SigningError(
            f"no registries.d entry says where signatures of {repo.name} go (looked in "
            f"{', '.join(map(str, registries_d_dirs(env)))}): write one with `trainimg policy "
            f"--registry {repo.name} --key PUBLIC-KEY --signatures DIR-OR-URL`"
        )
    return staging


def push_signed(
    podman: Callable[..., str],
    image: str,
    ref: str,
    sign_by: str,
    creds: Credentials | None,
    *,
    tls_verify: bool,
    digest_file: Path,
) -> str:
    """Push `image` (an id or a local name) as `ref` with a signature by `sign_by`; the manifest
    digest the registry now serves under `ref`."""
    # An image pulled under a signature policy carries its signatures in the store; they are
    # dropped (the layers are compressed anew, which would invalidate them) and signed again.
    args = ["push", "--remove-signatures", "--sign-by", sign_by]
    args.append(f"--tls-verify={'true' if tls_verify else 'false'}")
    if creds is not None and creds.source:
        args.append(f"--authfile={creds.source}")
    args += ["--digestfile", str(digest_file), image, f"docker://{ref}"]
    podman(*args, timeout=3600)
    return digest_file.read_text(encoding="utf-8").strip()

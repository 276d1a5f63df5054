"""Sign while pushing, with podman's own simple signing: `podman push --sign-by KEY` (GPG,
through gpgme; the key in the user's keyring, $GNUPGHOME). The libpod API cannot sign, so the
push goes through the podman CLI against the same store (an isolated store's configuration,
or the host's podman). The signature is written where registries.d says (`trainimg policy`
writes that entry); with no entry for the repository, or one podman cannot write (it writes
only a file:// staging, docs/signature-protocols.md of containers/image, and only a directory
this user may create files in), the push is refused before anything moves.

Signatures are kept per manifest digest (the lookaside layout `<repo path>@sha256=<hex>/
signature-<n>`), one per tag it was pushed as: podman writes the new signature as signature-1
and removes the rest, so the ones the digest had before the push are put back beside it
(`keep_signatures`) and a later tag never replaces an earlier one's; under the policy's
matchRepoDigestOrExact each tag needs its own.

Credentials reach podman as the path of the file they came from (--authfile), never on its
command line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

from builder.engines.credentials import Credentials
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


def check_staging(repo: Reference, env: Mapping[str, str] | None = None) -> Path:
    """The directory podman will write `repo`'s signatures to; SigningError (exit 2) when there
    is none, it is not a file:// location, or this user cannot write there."""
    staging = staging_for(repo, registries_d_dirs(env))
    if staging is None:
        raise SigningError(
            f"no registries.d entry says where signatures of {repo.name} go (looked in "
            f"{', '.join(map(str, registries_d_dirs(env)))}): write one with `trainimg policy "
            f"--registry {repo.name} --key PUBLIC-KEY --signatures DIR-OR-URL`"
        )
    url = urlparse(staging)
    if url.scheme != "file":
        raise SigningError(
            f"the signature staging of {repo.name} is {staging!r}: podman writes signatures only "
            "to a file:// directory (an http(s) lookaside is read-only); write the policy again "
            "with `trainimg policy ... --signatures URL --staging DIR`, and publish DIR at URL"
        )
    directory = Path(unquote(url.path))
    existing = next(d for d in (directory, *directory.parents) if d.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise SigningError(
            f"the signature staging of {repo.name}, {directory}, cannot be written by this user "
            f"({existing} is not a writable directory): nothing pushed"
        )
    return directory


def signature_dir(staging: Path, repo: Reference, digest: str) -> Path:
    """Where the lookaside keeps the signatures of one manifest of `repo`."""
    algorithm, _, hexdigest = digest.partition(":")
    return staging / f"{repo.repository}@{algorithm}={hexdigest}"


def read_signatures(staging: Path, repo: Reference) -> dict[str, list[bytes]]:
    """Every signature of `repo` in the staging directory, by manifest directory name."""
    parent = (staging / repo.repository).parent
    name = repo.repository.rsplit("/", 1)[-1]
    out = {}
    for d in sorted(parent.glob(f"{name}@*")) if parent.is_dir() else []:
        sigs = sorted(d.glob("signature-*"), key=lambda f: int(f.name.split("-")[1] or 0))
        out[d.name] = [f.read_bytes() for f in sigs if f.name.split("-")[1].isdigit()]
    return out


def keep_signatures(directory: Path, before: list[bytes]) -> int:
    """Put back the signatures a manifest had before a push beside the one it wrote; how many
    it has now (signature-1..n, each distinct)."""
    now = [f.read_bytes() for f in sorted(directory.glob("signature-*"))]
    merged = list(dict.fromkeys([*before, *now]))
    for i, blob in enumerate(merged, 1):
        tmp = directory / f".signature-{i}.tmp"
        tmp.write_bytes(blob)
        tmp.replace(directory / f"signature-{i}")
    return len(merged)


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

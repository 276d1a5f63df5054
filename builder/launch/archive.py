"""Images for compute nodes that have no registry to pull from (`trainimg export`): an OCI
archive on the shared filesystem that podman runs as `oci-archive:PATH`, or an enroot image
(.sqsh) that pyxis runs as `--container-image=PATH`.

An enroot image is a squashfs of the flattened root filesystem carrying the container's
configuration as files (NVIDIA/enroot doc/image-format.md): /etc/environment (the image's ENV),
/etc/fstab (its volumes, as bind mounts of the image's own directories), /etc/rc (the working
directory, then the entrypoint) and /etc/rc.local (sourced by /etc/rc, empty). This writes the
same files `enroot import` writes for an image, from the engine's export of it, streamed
through `sqfstar` (squashfs-tools) with every file owned by root, as enroot makes them.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from builder.engines.base import ImageInfo
from builder.errors import TrainimgError

SQFSTAR = "sqfstar"
# enroot's own default (conf/enroot.conf.in ENROOT_SQUASH_OPTIONS): fast to make and to mount,
# data blocks uncompressed
SQUASH_OPTIONS = ("-comp", "lzo", "-noD")
# enroot's files, written here; the image's own (if any) are left out of the stream
ENROOT_FILES = ("etc/environment", "etc/fstab", "etc/rc", "etc/rc.local")
# what enroot leaves out of an import: device nodes are the runtime's
_SKIPPED = ("dev/", ".dockerenv")
_BUFFER = 1 << 20


class ExportError(TrainimgError):
    """The archive could not be written (exit 2; nothing is left at the destination)."""


def enroot_files(ref: str, info: ImageInfo) -> dict[str, str]:
    """The configuration files of an enroot image of `info` (pure)."""
    workdir = shlex.quote(info.workdir or "/")
    entry = [shlex.quote(w) for w in info.entrypoint]
    cmd = [shlex.quote(w) for w in info.cmd] or ([] if entry else ["/bin/sh"])
    with_args = " ".join([*entry, '"$@"'])
    default = " ".join([*entry, *cmd])
    rc = (
        f"# enroot image of {ref}, written by trainimg export: the container's entrypoint\n"
        f"mkdir -p {workdir} 2> /dev/null\ncd {workdir} || exit 1\n\n"
        "if [ -s /etc/rc.local ]; then\n    . /etc/rc.local\nfi\n\n"
        f"if [ $# -gt 0 ]; then\n    exec {with_args}\nelse\n    exec {default}\nfi\n"
    )
    return {
        "etc/environment": "".join(f"{k}={v}\n" for k, v in info.env.items()),
        "etc/fstab": "".join(
            f"${{ENROOT_ROOTFS}}{v} {v} none x-create=dir,bind,rw,nosuid,nodev\n"
            for v in info.volumes
        ),
        "etc/rc": rc,
        "etc/rc.local": "# Sourced by /etc/rc when the container starts.\n",
    }


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (an engine's export stream)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._rest:
            try:
                self._rest = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._rest))
        buffer[:n] = self._rest[:n]
        self._rest = self._rest[n:]
        return n


def restream(rootfs: Iterator[bytes], files: dict[str, str], out: IO[bytes]) -> None:
    """Copy the root filesystem tar to `out` without device nodes and enroot's files, then
    add enroot's files (mode 644, /etc/rc 755)."""
    reader = io.BufferedReader(_ChunkReader(rootfs), buffer_size=_BUFFER)
    with (
        tarfile.open(fileobj=reader, mode="r|", bufsize=_BUFFER) as src,
        tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, bufsize=_BUFFER) as dst,
    ):
        for member in src:
            name = member.name.lstrip("./")
            if name.startswith(_SKIPPED) or name in ENROOT_FILES:
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name == "etc/rc" else 0o644
            dst.addfile(info, io.BytesIO(data))


@contextlib.contextmanager
def _beside(dest: Path) -> Iterator[Path]:
    """A temporary path beside `dest`, renamed onto it when the block succeeds, removed if not."""
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        yield tmp
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def write_sqsh(rootfs: Iterator[bytes], files: dict[str, str], dest: Path) -> None:
    with _beside(dest) as tmp:
        try:
            proc = subprocess.Popen(
                [SQFSTAR, "-all-root", *SQUASH_OPTIONS, "-no-progress", "-quiet", str(tmp)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except FileNotFoundError:
            raise ExportError(
                f"{SQFSTAR} is not installed: `apt-get install squashfs-tools` (or dnf)"
            ) from None
        assert proc.stdin is not None and proc.stderr is not None
        try:
            with proc.stdin:
                restream(rootfs, files, proc.stdin)
        except BrokenPipeError:
            pass  # sqfstar stopped reading: its own message follows
        finally:
            err = proc.stderr.read().decode(errors="replace")
            code = proc.wait()
        if code != 0:
            raise ExportError(f"{SQFSTAR} failed ({code}): {err.strip()[-500:]}")


def write_file(chunks: Iterator[bytes], dest: Path) -> None:
    with _beside(dest) as tmp, tmp.open("wb") as f:
        for chunk in chunks:
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())

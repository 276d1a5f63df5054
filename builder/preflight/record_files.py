"""A record's files, read as the untrusted input they are (a record travels with a ticket).

Every path a record names is resolved inside the record and must be a regular file there: no
`..` out of it, no symlink (in files/ or as a probe's `file:`), no hard link (a second name of
a file outside the record: its link count is above 1), no device or FIFO (/dev/zero would never
end), nothing over its size cap. The whole record is checked before any content
is read, so a hostile record is refused with nothing read; what it names is quoted in messages
through `shown` (printable, short), never through repr.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from builder.errors import TrainimgError
from builder.host.shown import shown

MAX_FILE_BYTES = 8 * 1024 * 1024  # one probe's output or one host file
MAX_RECORD_FILE_BYTES = 4 * 1024 * 1024  # fixture.yaml itself
MAX_FILES = 10_000


class RecordError(TrainimgError):
    """A record directory that cannot be read or written; the message names the path."""


def _hard_link(root: Path, what: str, links: int) -> str:
    return (
        f"{root}: {what} has {links} names (a hard link; refused: a record holds its own "
        "files only - copy the file into the record instead)"
    )


def regular_file(root: Path, rel: str, what: str, cap: int = MAX_FILE_BYTES) -> Path:
    """`rel` inside the record `root` (already resolved), checked without reading it: no
    absolute path, no climbing out, no symlink on the way, a regular file within `cap`."""
    if not rel or os.path.isabs(rel) or ".." in Path(rel).parts:
        raise RecordError(f"{root}: {what} {shown(rel)} is not a path inside the record")
    path = root / rel
    current = root
    for part in Path(rel).parts:
        current = current / part
        try:
            info = current.lstat()
        except OSError:
            raise RecordError(f"{root}: {what} {shown(rel)} does not exist in the record") from None
        if stat.S_ISLNK(info.st_mode):
            raise RecordError(f"{root}: {what} {shown(rel)} is a symlink (refused: records hold "
                              "regular files only)")  # fmt: skip
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        raise RecordError(f"{root}: {what} {shown(rel)} is not a regular file (refused)")
    if info.st_nlink > 1:
        raise RecordError(_hard_link(root, f"{what} {shown(rel)}", info.st_nlink))
    if info.st_size > cap:
        raise RecordError(
            f"{root}: {what} {shown(rel)} is {info.st_size} bytes, over the {cap}-byte cap"
        )
    return path


def host_files(root: Path) -> dict[str, Path]:
    """files/ of a record: host path -> the file holding it; every entry a regular file or a
    directory (a symlink or anything else refuses the record), none over its cap."""
    base = root / "files"
    out: dict[str, Path] = {}
    try:
        info = base.lstat()
    except OSError:
        return out
    if not stat.S_ISDIR(info.st_mode):
        raise RecordError(f"{root}: files is not a directory (refused)")
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        for name in [*dirnames, *filenames]:
            entry = Path(dirpath) / name
            mode = entry.lstat().st_mode
            rel = entry.relative_to(base)
            if stat.S_ISLNK(mode):
                raise RecordError(f"{root}: files/{shown(rel)} is a symlink (refused: records "
                                  "hold regular files only)")  # fmt: skip
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise RecordError(f"{root}: files/{shown(rel)} is not a regular file (refused)")
            if entry.lstat().st_nlink > 1:
                raise RecordError(_hard_link(root, f"files/{shown(rel)}", entry.lstat().st_nlink))
            if entry.lstat().st_size > MAX_FILE_BYTES:
                raise RecordError(
                    f"{root}: files/{shown(rel)} is over the {MAX_FILE_BYTES}-byte cap (refused)"
                )
            out["/" + str(rel)] = entry
            if len(out) > MAX_FILES:
                raise RecordError(f"{root}: files/ holds more than {MAX_FILES} files (refused)")
    return out


def read_capped(path: Path, cap: int = MAX_FILE_BYTES) -> str:
    """A checked file's text, read no further than its cap (it may have grown since)."""
    with path.open("rb") as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise RecordError(f"{path}: over the {cap}-byte cap (refused)")
    return data.decode("utf-8", errors="replace")

"""What makes two debootstraps of one package set differ, taken out before the rootfs is tarred.

Two roots debootstrapped and upgraded from the same apt lists, on one machine minutes apart,
differed (measured, a file walk of both) only in apt's binary caches and the logs (trimmed
anyway: base_image.ROOTFS_TRIM), ldconfig's aux-cache (inode numbers and times of the libraries
it read) and the mtimes of every file made at install time. From another machine or on another
day two more differ: `/etc/hostname` and `/etc/resolv.conf`, which debootstrap copies from the
build host (its name and DNS servers: nothing an image should carry - the engine mounts its
own), and the "last password change" day of every `/etc/shadow` entry (the day it was made).
Install-time mtimes are clamped to the lists date by tar (base_image.rootfs_tarball)."""

from __future__ import annotations

from pathlib import Path

from builder.build.source_date import epoch_seconds

# Copied from the build host by debootstrap; emptied (kept as files: the engines mount over them)
HOST_FILES = ("etc/hostname", "etc/resolv.conf")
# Caches whose content is the build machine's (inodes, times); rebuilt by their tools on need
VOLATILE = ("var/cache/ldconfig/aux-cache",)
SHADOW_FILES = ("etc/shadow", "etc/shadow-")


def epoch_of(lists_date: str) -> int:
    """Seconds since the epoch of a lists date as base_image.release_date writes it."""
    seconds = epoch_seconds(lists_date)
    if seconds is None:
        raise ValueError(f"not a lists date: {lists_date!r}")
    return seconds


def shadow_text(text: str, day: int) -> str:
    """/etc/shadow with every entry's last-change day (field 3) set to `day` where it had one
    (pure: an empty field, "never changed", stays empty)."""
    lines = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[2].isdigit():
            fields[2] = str(day)
        lines.append(":".join(fields))
    return "".join(f"{line}\n" for line in lines)


def normalize_root(root: Path, lists_date: str) -> None:
    """Take the build host and the build day out of `root` (a debootstrapped tree)."""
    for rel in HOST_FILES:
        path = root / rel
        if path.is_file() and not path.is_symlink():
            path.write_text("")
            path.chmod(0o644)
    for rel in VOLATILE:
        (root / rel).unlink(missing_ok=True)
    day = epoch_of(lists_date) // 86400
    for rel in SHADOW_FILES:
        path = root / rel
        if path.is_file() and not path.is_symlink():
            mode = path.stat().st_mode & 0o7777
            path.write_text(shadow_text(path.read_text(), day))
            path.chmod(mode)

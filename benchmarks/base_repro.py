"""Is the offline base reproducible? Two debootstraps of the default base, each into its own
empty cache, then their rootfs tarballs and the image ids their archives would load as.

Prints a table and exits 1 when the two differ (root, the network to deb.debian.org and ~7 min:
two debootstraps with apt-get upgrade, ~3 min each here, ~800 MB of temporary disk).
Run: .venv/bin/python benchmarks/base_repro.py
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from builder.build.base_archive import oci_arch, write_archive  # noqa: E402
from builder.build.base_image import BaseSpec, base_config, lists_date, rootfs_tarball  # noqa: E402


def one(spec: BaseSpec, work: Path) -> tuple[float, int, str, str, str]:
    start = time.monotonic()
    tarball = rootfs_tarball(spec, work, lambda _msg: None)
    seconds = time.monotonic() - start
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    date = lists_date(tarball)
    image_id = write_archive(
        tarball, work / "archive.tar", spec.tag, base_config(spec, date), date, oci_arch()
    )
    return seconds, tarball.stat().st_size, digest, date, image_id


def main() -> int:
    spec = BaseSpec(tag="localhost/trainimg-base:bookworm")
    rows = []
    with tempfile.TemporaryDirectory(prefix="base-repro-", dir=REPO / ".cache") as tmp:
        for run in ("first", "second"):
            work = Path(tmp) / run
            work.mkdir()
            rows.append((run, *one(spec, work)))
    head = ("run", "seconds", "bytes", "rootfs sha256", "lists date", "image id")
    print("{:<7} {:>8} {:>12}  {:<16} {:<21} {}".format(*head))
    for run, seconds, size, digest, date, image_id in rows:
        print(f"{run:<7} {seconds:>8.0f} {size:>12,}  {digest[:16]} {date:<21} {image_id[7:23]}")
    same = rows[0][2:] == rows[1][2:]
    print("identical" if same else "DIFFERENT: the base is not reproducible")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

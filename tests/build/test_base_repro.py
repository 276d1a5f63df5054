"""The offline base's bytes and id depend on its package set alone: rootfs_normalize takes the
build host and day out, tar_command sorts and clamps, base_archive writes a config whose sha256
is the image id (real tar, no engine; the engines' load is tests/build/test_cold_rebuild.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from builder.build.base_archive import BaseArchiveError, BaseConfig, oci_arch, write_archive
from builder.build.base_image import BaseSpec, base_config, tar_command
from builder.build.rootfs_normalize import epoch_of, normalize_root, shadow_text

DATE = "2026-12-02T02:09:57Z"
SHADOW = "root:*:20791:0:99999:7:::\nnobody:*::0:99999:7:::\n"


def test_every_shadow_entry_is_dated_by_the_lists_day_and_a_never_changed_one_stays_empty() -> None:
    day = epoch_of(DATE) // 86400
    assert day == 20789
    assert shadow_text(SHADOW, day) == "root:*:20789:0:99999:7:::\nnobody:*::0:99999:7:::\n"


def _tree(root: Path, hostname: str, when: float) -> Path:
    for rel, text in {
        "etc/hostname": hostname + "\n",
        "etc/resolv.conf": f"nameserver 10.0.0.{len(hostname)}\n",
        "etc/shadow": SHADOW.replace("20791", str(int(when // 86400))),
        "var/cache/ldconfig/aux-cache": hostname,
        "usr/lib/a.py": "print(1)\n",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "etc/shadow").chmod(0o640)
    packaged = epoch_of(DATE) - 86400 * 30  # a file as its .deb carried it: older than the lists
    os.utime(root / "usr/lib/a.py", (packaged, packaged))
    for path in root.rglob("*"):  # everything else made "at install time", after the lists date
        if path.name != "a.py":
            os.utime(path, (when, when))
    os.utime(root, (when, when))
    return root


def _tar(root: Path, out: Path) -> bytes:
    normalize_root(root, DATE)
    subprocess.run(tar_command(root, out, DATE), check=True, timeout=60)
    return out.read_bytes()


def test_two_roots_built_on_other_hosts_and_days_tar_to_the_same_bytes(tmp_path: Path) -> None:
    later = epoch_of(DATE) + 3 * 86400
    one = _tar(_tree(tmp_path / "a", "build-host-a", epoch_of(DATE) + 600), tmp_path / "a.tar")
    two = _tar(_tree(tmp_path / "b", "other-host", later), tmp_path / "b.tar")
    assert one == two
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = {m.name.removeprefix("./"): m for m in tar.getmembers()}
        assert members["etc/hostname"].size == members["etc/resolv.conf"].size == 0
        assert "var/cache/ldconfig/aux-cache" not in members
        assert members["etc/shadow"].mode == 0o640
        assert members["etc/hostname"].mtime == epoch_of(DATE)  # clamped to the lists date
        assert members["usr/lib/a.py"].mtime == epoch_of(DATE) - 86400 * 30  # kept
        shadow = tar.extractfile(members["etc/shadow"])
        assert shadow is not None and b":20789:" in shadow.read()


def test_without_the_normalization_the_build_host_would_be_in_the_base(tmp_path: Path) -> None:
    root = _tree(tmp_path / "a", "build-host-a", epoch_of(DATE) + 600)
    subprocess.run(tar_command(root, tmp_path / "raw.tar", DATE), check=True, timeout=60)
    assert b"build-host-a" in (tmp_path / "raw.tar").read_bytes()
    assert b"build-host-a" not in _tar(root, tmp_path / "normal.tar")


def _archive(tmp_path: Path, name: str, rootfs: Path) -> tuple[str, Path]:
    out = tmp_path / f"{name}.tar"
    base = base_config(BaseSpec(tag="localhost/trainimg-base:bookworm"), DATE)
    return write_archive(rootfs, out, "localhost/trainimg-base:bookworm", base, DATE, "amd64"), out


def test_the_archive_s_image_id_is_the_sha256_of_its_config_and_its_layer_the_rootfs(
    tmp_path: Path,
) -> None:
    rootfs = tmp_path / "rootfs.tar"
    rootfs.write_bytes(b"rootfs bytes" * 1000)
    image_id, out = _archive(tmp_path, "one", rootfs)
    again, out2 = _archive(tmp_path, "two", rootfs)
    assert image_id == again and out.read_bytes() == out2.read_bytes()
    with tarfile.open(out) as tar:
        (manifest,) = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        config = tar.extractfile(manifest["Config"]).read()  # type: ignore[union-attr]
        layer = tar.extractfile(manifest["Layers"][0]).read()  # type: ignore[union-attr]
    assert image_id == "sha256:" + hashlib.sha256(config).hexdigest()
    assert manifest["RepoTags"] == ["localhost/trainimg-base:bookworm"]
    doc = json.loads(config)
    assert doc["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    assert layer == rootfs.read_bytes()
    assert doc["created"] == doc["history"][0]["created"] == DATE  # the lists date, not the clock
    assert doc["config"]["Labels"]["io.trainimg.base.lists-date"] == DATE
    rootfs.write_bytes(b"other bytes")
    assert _archive(tmp_path, "three", rootfs)[0] != image_id


def test_a_machine_without_a_container_architecture_is_named() -> None:
    assert oci_arch("x86_64") == "amd64" and oci_arch("aarch64") == "arm64"
    with pytest.raises(BaseArchiveError, match=r"'riscv64'.*one of x86_64"):
        oci_arch("riscv64")


def test_the_config_names_what_made_the_base() -> None:
    base: BaseConfig = base_config(BaseSpec(tag="t"), DATE)
    assert base.created_by.startswith("trainimg base: debootstrap bookworm bookworm-updates")
    assert base.cmd == ("/bin/bash",)

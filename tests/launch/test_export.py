"""`trainimg export`: an image as a file for compute nodes without a registry. The OCI archive
runs under podman as `oci-archive:PATH` (what `trainimg slurm --archive` writes); the enroot
image is a squashfs with enroot's configuration files (NVIDIA/enroot doc/image-format.md),
read back with unsquashfs. The offline base stands in for a cell's image: the same path, a
third of the bytes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.launch.conftest import trainimg


def test_an_enroot_image_and_an_oci_archive(
    offline_base: str, podman_service: str, local_podman: Any, tmp_path: Path
) -> None:
    if shutil.which("unsquashfs") is None:
        pytest.fail("squashfs-tools is not installed: scripts/setup.sh installs it")
    sqsh = tmp_path / "base.sqsh"
    done = trainimg(podman_service, "export", offline_base, "-o", str(sqsh))
    assert done.code == 0, done.err
    listing = subprocess.run(
        ["unsquashfs", "-lls", str(sqsh)], capture_output=True, text=True, check=True
    ).stdout
    assert " root/root " in listing and "squashfs-root/usr/bin/python3" in listing
    assert "squashfs-root/dev/" not in listing  # device nodes are the runtime's, as enroot's
    rc = subprocess.run(
        ["unsquashfs", "-cat", str(sqsh), "etc/rc"], capture_output=True, text=True, check=True
    ).stdout
    assert rc.startswith(f"# enroot image of {offline_base}")
    assert 'exec "$@"' in rc and "exec /bin/bash\n" in rc  # its CMD, no ENTRYPOINT
    environment = subprocess.run(
        ["unsquashfs", "-cat", str(sqsh), "etc/environment"], capture_output=True, text=True
    ).stdout
    assert environment.startswith("PATH=")
    archive = tmp_path / "base.tar"
    done = trainimg(podman_service, "export", offline_base, "-o", str(archive))
    assert done.code == 0, done.err
    out = local_podman.podman(
        "run", "--rm", "--network=none", f"oci-archive:{archive}", "cat", "/etc/debian_version"
    )
    assert out.strip().split(".")[0] == "12"
    refused = trainimg(podman_service, "export", offline_base, "-o", str(tmp_path / "x.zip"))
    assert refused.code == 2 and "name it .tar" in refused.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.sqsh", "base.tar"]  # no temps

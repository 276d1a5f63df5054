"""The CDI facts against a real podman: Debian's podman (4.3) runs a container with a CDI device
from specs of each version, and what it does is what builder/facts/cdi_versions.py says that
podman does - the spec parses and the device resolves, or `podman run` fails with
"unresolvable CDI devices" (podman logs no reason; the spec is skipped).

Podman 4.3 reads specs only from /etc/cdi and /var/run/cdi (no --cdi-spec-dir, no
containers.conf key), so each run is in a private mount namespace with a tmpfs on /run holding
only the test's spec: this machine's /run and /etc are never touched. The image is one static
binary (docker.io's docker-init, tini) imported into a store of the test's own; the device node
is /dev/null."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from packaging.version import Version

from builder.facts import cdi_versions as cdiv
from builder.host.parsers.cdi import CdiSpec, cdi_spec

pytestmark = [pytest.mark.engine]

TINI = "/usr/bin/docker-init"  # static: runs in an image with nothing else in it


def _spec(version: str, gids: bool) -> str:
    """One device, "0" (a name starting with a digit needs CDI 0.5.0), its node /dev/null;
    with `gids`, the `additionalGids` nvidia-ctk 1.19.1 writes into its edits (CDI 0.7.0)."""
    edits = "    deviceNodes:\n    - path: /dev/null\n" + (
        "    additionalGids: [44]\n" if gids else ""
    )
    return (
        f'cdiVersion: "{version}"\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n'
        f"  containerEdits:\n{edits}"
    )


def _predicted(spec: CdiSpec, podman: Version) -> bool:
    """Does this podman parse the spec, by the facts: its version and every versioned field it
    uses at most what podman's CDI library knows, and, where that library refuses a spec older
    than its fields, no field newer than the version it declares."""
    row = cdiv.podman_newest_spec(podman)
    declared = cdiv.spec_version_of(spec.cdi_version)
    assert row is not None and declared is not None
    fields = [cdiv.field_version(f) for f in spec.fields_used]
    older = any(v > declared for v in fields)
    return max([declared, *fields]) <= row.newest_spec and not (
        older and row.refuses_older_than_fields
    )


def _installed_podman() -> Version:
    shown = subprocess.run(["podman", "--version"], capture_output=True, text=True, timeout=30)
    found = re.search(r"(\d+\.\d+\.\d+)", shown.stdout)
    assert found, shown.stdout
    return Version(found.group(1))


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """podman with a store of this module's own, holding `localhost/tini`."""
    for tool in ("podman", "unshare", TINI):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not installed: scripts/setup.sh installs podman and docker.io")
    root = tmp_path_factory.mktemp("cdi-podman")
    argv = [
        "podman", f"--root={root}/root", f"--runroot={root}/run", f"--tmpdir={root}/tmp",
        "--storage-driver=vfs", "--cgroup-manager=cgroupfs", "--events-backend=file",
    ]  # fmt: skip
    with tarfile.open(root / "tini.tar", "w", dereference=True) as tar:  # docker-init is a link
        tar.add(TINI, arcname="tini")
    subprocess.run([*argv, "import", "-q", str(root / "tini.tar"), "localhost/tini"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return argv


def _run_with_spec(podman: list[str], spec_file: Path) -> subprocess.CompletedProcess[str]:
    """`podman run --device nvidia.com/gpu=0` where the only CDI spec is `spec_file`."""
    inside = (
        'mount -t tmpfs tmpfs /run && mkdir /run/cdi && cp "$1" /run/cdi/ && shift && exec "$@"'
    )
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", inside, "sh",
         str(spec_file), *podman, "run", "--rm", "--network=none",
         # this sandbox cannot raise rlimits to podman's defaults (CAP_SYS_RESOURCE)
         "--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096",
         "--device=nvidia.com/gpu=0", "localhost/tini", "/tini", "--version"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("version", "gids"),
    [
        ("0.5.0", False),
        ("0.6.0", False),
        ("0.7.0", False),
        ("0.7.0", True),
        ("0.5.0", True),
        ("0.4.0", False),
    ],
)
def test_podman_parses_exactly_the_specs_the_facts_say(
    podman: list[str], tmp_path: Path, version: str, gids: bool
) -> None:
    installed = _installed_podman()
    spec_file = tmp_path / "nvidia.yaml"
    spec_file.write_text(_spec(version, gids))
    spec = cdi_spec(str(spec_file), spec_file.read_text())
    assert isinstance(spec, CdiSpec), spec
    assert ("additionalGids" in spec.fields_used) is gids
    done = _run_with_spec(podman, spec_file)
    if _predicted(spec, installed):
        assert done.returncode == 0 and "tini version" in done.stdout, done.stderr
    else:
        assert done.returncode != 0, done.stdout
        assert "unresolvable CDI devices nvidia.com/gpu=0" in done.stderr, done.stderr


def test_debians_podman_is_the_one_the_facts_were_measured_on() -> None:
    """The negative cases above mean something only where this podman parses less than the
    newest spec: 4.3's row (CDI library v0.5.x, specs up to 0.5.0)."""
    row = cdiv.podman_newest_spec(_installed_podman())
    assert row is not None and row.newest_spec == Version("0.5.0"), row

"""The EL9 build rehearsal: the os stage (OS packages, NVIDIA's CUDA repository, the devel
toolchain) of the rendered rocky9 and ubi9 Containerfiles, built through podman-py against a
loopback mirror of signed stand-in RPMs with real NEVRAs, on a stand-in EL9 base.

The cells are the shipped matrix's, with a mirrors file laid over it exactly as `trainimg build
--mirrors FILE` does: every dnf spec installs, gpgcheck=1 holds (a tampered RPM or a key that
is not the pinned one fails the build), the .repo files and the compat path are where they
should be. tests/el9/rehearsal.py builds the parts; docs/build.md says what this proves.
"""

from __future__ import annotations

import dataclasses
import platform
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.build.base_image import BaseSpec
from builder.engines.base import BuildFailed, BuildRequest, RunSpec
from builder.engines.podman import PodmanEngine
from builder.matrix.expand import expand
from builder.matrix.mirrors import with_mirrors_file
from builder.matrix.model import Cell
from builder.spec.os_install import OS_STAGE
from builder.spec.render import environment, render_cell
from builder.workspace import open_workspace
from tests.conftest import BASE_TAG, CACHE, REPO

from . import rehearsal as r

pytestmark = [pytest.mark.engine, pytest.mark.integration]

CELLS = ("rocky9-cu128-py3.12-torch2.9.1-devel", "ubi9-cu128-py3.12-torch2.9.1-runtime")
# Each OS's own repository ids, mapped onto the rehearsal's repositories.
OS_REPOS = {
    "rocky9": {"baseos": "baseos", "appstream": "appstream", "crb": "crb"},
    "ubi9": {"ubi-9-baseos-rpms": "baseos", "ubi-9-appstream-rpms": "appstream"},
}
TEST_LABEL = "io.trainimg.test"


@dataclasses.dataclass
class Mirror:
    url: str
    root: Path
    os_key: str  # the OS vendor key's checksum (as the template checks it)
    nvidia_key: str


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirror]:
    """The signed repositories under good/, served on 127.0.0.1 (stopped after)."""
    for tool in ("rpmbuild", "rpmsign", "createrepo_c", "gpg"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: scripts/setup.sh installs it")
    root = tmp_path_factory.mktemp("el9-mirror")
    rpms = r.table()
    r.build_rpms(rpms, root / "good", tmp_path_factory.mktemp("rpmbuild"))
    signers = {"os": r.Signer("os"), "nvidia": r.Signer("nvidia")}
    try:
        (root / "keys").mkdir()
        for vendor, signer in signers.items():
            (root / "keys" / f"{vendor}.asc").write_text(signer.public_key(), encoding="utf-8")
        for repo in r.REPOS:
            signer = signers["nvidia" if repo == "cuda" else "os"]
            signer.sign(sorted((root / "good" / repo).glob("*.rpm")))
            r.createrepo(root / "good" / repo)
    finally:
        for signer in signers.values():
            signer.close()
    keys = {v: r.sha256_without_version((root / "keys" / f"{v}.asc").read_text()) for v in signers}
    with r.http_server(root) as url:
        yield Mirror(url, root, keys["os"], keys["nvidia"])


def mirrors_yaml(m: Mirror, tree: str = "good", os_key_file: str = "os.asc") -> str:
    """A `--mirrors` file pointing rocky9, ubi9 and NVIDIA's repository at the mirror."""
    lines = ["mirrors:", "  oses:"]
    for os_key, ids in OS_REPOS.items():
        lines += [f"    {os_key}:", "      repos:"]
        lines += [f"        {rid}: {m.url}/{tree}/{repo}" for rid, repo in ids.items()]
        lines += [f"      gpgkey: {m.url}/keys/{os_key_file}", f"      gpgkey_sha256: {m.os_key}"]
    lines += [
        "  cuda:",
        "    el9:",
        f"      repo: {m.url}/{tree}/cuda",
        f"      gpgkey: {m.url}/keys/nvidia.asc",
        f"      gpgkey_sha256: {m.nvidia_key}",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def engine(podman_service: str) -> Iterator[PodmanEngine]:
    e = PodmanEngine(podman_service)
    try:
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def standin(engine: PodmanEngine, offline_base: str) -> tuple[str, ...]:
    """The stand-in EL9 base, tagged as the rocky9 and ubi9 bases (tags, not digests)."""
    ws = open_workspace(REPO / "matrix.yaml")
    refs = tuple(sorted({ws.cell(name).os.base for name in CELLS}))
    r.standin_base(engine, CACHE / "base", BaseSpec(tag=BASE_TAG), refs)
    return refs


def containerfile(name: str, mirrors: str, tmp: Path) -> tuple[Cell, str]:
    """The cell's Containerfile as `trainimg build --mirrors` renders it (base by its tag)."""
    ws = open_workspace(REPO / "matrix.yaml")
    path = tmp / "mirrors.yaml"
    path.write_text(mirrors, encoding="utf-8")
    cell = expand(with_mirrors_file(ws.matrix, path)).find(name)
    assert cell is not None
    cell = dataclasses.replace(cell, os=dataclasses.replace(cell.os, digest=None))
    return cell, render_cell(environment(REPO), cell, ws.matrix.project)


def build_os_stage(engine: PodmanEngine, text: str, tmp: Path) -> tuple[str, list[str]]:
    """The os stage alone, with the host's network (the mirror is on its loopback)."""
    context = tmp / "context"
    context.mkdir()
    (context / "Containerfile").write_text(text, encoding="utf-8")
    lines: list[str] = []
    request = BuildRequest(context, target=OS_STAGE, network="host")
    result = engine.build(request, on_log=lines.append)
    return result.image_id, lines


PROBE = textwrap.dedent(
    """\
    rpm -qa --qf '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n' | sort
    echo '--repos'; ls /etc/yum.repos.d
    echo '--gpgcheck'; grep -h '^gpgcheck' /etc/yum.repos.d/*.repo
    echo '--keys'; rpm -q gpg-pubkey | wc -l
    echo '--compat'; readlink -f /usr/local/cuda/compat/libcuda.so.1
    echo '--cuda'; readlink /usr/local/cuda
    """
)


def probe(engine: PodmanEngine, image: str) -> dict[str, list[str]]:
    out = engine.run(
        RunSpec(image, entrypoint=["sh", "-c", PROBE], labels={TEST_LABEL: "el9-rehearsal"})
    )
    assert out.exit_code == 0, out.stderr
    sections: dict[str, list[str]] = {"rpms": []}
    current = "rpms"
    for line in out.stdout.splitlines():
        if line.startswith("--"):
            current = line[2:]
            sections[current] = []
        elif line.strip():
            sections[current].append(line.strip())
    return sections


@pytest.mark.parametrize("name", CELLS)
def test_os_and_cuda_stages_build_against_the_mirror(
    name: str,
    engine: PodmanEngine,
    standin: tuple[str, ...],
    mirror: Mirror,
    tmp_path: Path,
) -> None:
    cell, text = containerfile(name, mirrors_yaml(mirror), tmp_path)
    image, lines = build_os_stage(engine, text, tmp_path)
    try:
        seen = probe(engine, image)
    finally:
        engine.remove_image(image)
    installed = {nevra for nevra in seen["rpms"] if not nevra.startswith("gpg-pubkey-")}
    names = {nevra.rsplit("-", 2)[0] for nevra in installed}
    # every spec the Containerfile names is installed, at the build the pins choose
    specs = r.dnf_specs(text)
    assert specs, text
    for spec in specs:
        assert any(spec == n or spec.startswith(n + "-") for n in names), (spec, sorted(names))
    rows = {rpm.installed: rpm for rpm in r.table()}
    want = {
        "python3.12-0:3.12.12-1.el9_7",  # series 3.12: the newest 3.12 build
        "python3.12-libs-0:3.12.12-1.el9_7",  # its Requires
        "python3.12-devel-0:3.12.12-1.el9_7",
        "shadow-utils-2:4.9-15.el9",  # series 4.9: -15, not -12
        "gcc-0:11.5.0-11.el9",  # series 11: 11.5.0-11, not the 9.5 errata build
        "cpp-0:11.5.0-11.el9",
        "gcc-c++-0:11.5.0-11.el9",
        "libstdc++-devel-0:11.5.0-11.el9",
        "cuda-cudart-12-8-0:12.8.90-1",  # exact: 12.8.1's, not 12.8.0's 12.8.57
        "cuda-compat-12-8-0:570.211.01-1.el9",  # branch series 570.*: the newest 570 build
    }
    if cell.flavour == "devel":
        want |= {
            "make-1:4.3-8.el9",
            "ninja-build-0:1.10.2-6.el9",  # from crb, enabled for that install only
            "cuda-nvcc-12-8-0:12.8.93-1",
            "cuda-crt-12-8-0:12.8.93-1",
            "cuda-nvvm-12-8-0:12.8.93-1",
            "cuda-cudart-devel-12-8-0:12.8.90-1",
            "cuda-driver-devel-12-8-0:12.8.90-1",
            "cuda-cccl-12-8-0:12.8.90-1",
            "cuda-nvml-devel-12-8-0:12.8.90-1",
        }
    assert installed == want, sorted(installed ^ want)
    assert all(nevra in rows for nevra in installed)
    # the base's own repository is gone; the mirror's and NVIDIA's are written, gpgcheck on
    assert seen["repos"] == ["cuda.repo", "trainimg-os-mirror.repo"]
    assert seen["gpgcheck"] and set(seen["gpgcheck"]) == {"gpgcheck=1"}
    assert seen["keys"] == ["2"]  # the OS vendor's and NVIDIA's, nothing else
    assert seen["compat"] == ["/usr/local/cuda-12.8/compat/libcuda.so.570.211.01"]
    assert seen["cuda"] == ["cuda-12.8"]
    assert any("sha256" in ln or ": OK" in ln for ln in lines), lines[-20:]


def test_the_compat_branch_resolves_where_the_mirror_has_only_an_older_build(
    engine: PodmanEngine, standin: tuple[str, ...], mirror: Mirror, tmp_path: Path
) -> None:
    """A mirror of NVIDIA's repository that never synced 570.211.01 (it holds 570.124.06 only):
    the rendered 'cuda-compat-12-8-570.*' still resolves, to that build, and passes the series
    check; an exact pin on the newest build would fail here with 'Unable to find a match'.
    Its baseurls name dnf's $releasever and $basearch, which dnf expands (9, the machine's)."""
    older = mirror.root / "older"
    if not older.exists():
        shutil.copytree(mirror.root / "good", older)
        for rpm in (older / "cuda").glob("cuda-compat-12-8-570.211.01-*.rpm"):
            rpm.unlink()
        r.createrepo(older / "cuda")
        (mirror.root / "el-9").mkdir()
        (mirror.root / "el-9" / platform.machine()).symlink_to(older)
    assert [p.name for p in (older / "cuda").glob("cuda-compat-*.rpm")] == [
        "cuda-compat-12-8-570.124.06-1.el9.x86_64.rpm"
    ]
    tree = "el-$releasever/$basearch"
    _, text = containerfile(CELLS[1], mirrors_yaml(mirror, tree=tree), tmp_path)
    assert "'cuda-compat-12-8-570.*'" in text and f"/{tree}/cuda'" in text
    image, _ = build_os_stage(engine, text, tmp_path)
    try:
        seen = probe(engine, image)
    finally:
        engine.remove_image(image)
    assert "cuda-compat-12-8-0:570.124.06-1.el9" in seen["rpms"]
    assert seen["compat"] == ["/usr/local/cuda-12.8/compat/libcuda.so.570.124.06"]


def test_a_tampered_rpm_fails_the_build(
    engine: PodmanEngine, standin: tuple[str, ...], mirror: Mirror, tmp_path: Path
) -> None:
    """shadow-utils' bytes changed after it was signed (and the repository's metadata made
    again, so only its signature can tell): dnf refuses it and the build fails."""
    tampered = mirror.root / "tampered"
    if not tampered.exists():
        shutil.copytree(mirror.root / "good", tampered)
        for rpm in (tampered / "baseos").glob("shadow-utils-4.9-15*.rpm"):
            data = bytearray(rpm.read_bytes())
            data[-1] ^= 0xFF  # the payload (the compressed archive) ends the file
            rpm.write_bytes(bytes(data))
        r.createrepo(tampered / "baseos")
    _, text = containerfile(CELLS[1], mirrors_yaml(mirror, tree="tampered"), tmp_path)
    with pytest.raises(BuildFailed) as failed:
        build_os_stage(engine, text, tmp_path)
    log = "\n".join(failed.value.log_tail)
    assert "Problem opening package shadow-utils-4.9-15.el9.x86_64.rpm" in log, log
    assert "Error: GPG check FAILED" in log, log


def test_a_key_that_is_not_the_pinned_one_fails_the_build(
    engine: PodmanEngine, standin: tuple[str, ...], mirror: Mirror, tmp_path: Path
) -> None:
    """The mirror serves another key (NVIDIA's) where the OS vendor's should be: the sha256
    check refuses it before anything is imported."""
    _, text = containerfile(CELLS[0], mirrors_yaml(mirror, os_key_file="nvidia.asc"), tmp_path)
    with pytest.raises(BuildFailed) as failed:
        build_os_stage(engine, text, tmp_path)
    log = "\n".join(failed.value.log_tail)
    assert "RPM-GPG-KEY-trainimg-os-mirror: FAILED" in log, log


def test_the_plain_render_would_reach_the_internet(mirror: Mirror) -> None:
    """Without the mirrors file the same cells name NVIDIA's public repository and keep the
    base's own repositories: what a real build reaches (and this machine cannot)."""
    ws = open_workspace(REPO / "matrix.yaml")
    for name in CELLS:
        text = render_cell(environment(REPO), ws.cell(name), ws.matrix.project)
        assert "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64" in text
        assert "rm -f /etc/yum.repos.d/*.repo" not in text
        assert mirror.url not in text

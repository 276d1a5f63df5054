"""EL10 cells: rendered through the EL9 template from EL10's own data - NVIDIA's rhel10
repository, the system gcc 14, Python 3.12 as the system python3 (no python3.12 package) - and
the rules that keep an EL10 cell off another family's repository."""

from __future__ import annotations

import datetime as dt

import pytest

from builder.errors import MatrixError
from builder.facts.oses import DISTROS
from builder.judgement.matrix import check_cell
from builder.judgement.severity import BLOCK, OK
from builder.matrix.expand import expand
from builder.matrix.load import parse_matrix
from builder.matrix.model import Cell, Project
from builder.spec.cell_hash import with_cell_hashes
from builder.spec.labels import OS_FAMILY_LABEL
from builder.spec.render import environment, render_cell
from tests.conftest import REPO
from tests.matrices import TODAY, load

SHIPPED = (REPO / "matrix.yaml").read_text(encoding="utf-8")
EL10_CELLS = {
    "rocky10-cu130-py3.12-torch2.13.0-runtime": (
        "rocky10",
        "13-0",
        "quay.io/rockylinux/rockylinux:10.2",
    ),
    "rocky10-cu130-py3.12-torch2.14.1-runtime": (
        "rocky10",
        "13-0",
        "quay.io/rockylinux/rockylinux:10.2",
    ),
    "ubi10-cu132-py3.12-torch2.15.0-runtime": (
        "ubi10",
        "13-2",
        "registry.access.redhat.com/ubi10/ubi:10.2",
    ),
    "centos-stream10-cu130-py3.12-torch2.14.1-runtime": (
        "centos-stream10",
        "13-0",
        "quay.io/centos/centos:stream10",
    ),
    "rocky10-cu130-py3.12-torch2.14.1-devel": (
        "rocky10",
        "13-0",
        "quay.io/rockylinux/rockylinux:10.2",
    ),
}
RHEL10 = "https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64"
RHEL9 = "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64"


def _shipped(text: str = SHIPPED) -> dict[str, tuple[Cell, Project]]:
    matrix = parse_matrix(text, "matrix.yaml")
    expansion = with_cell_hashes(expand(matrix), matrix.project)
    return {c.name: (c, matrix.project) for c in expansion.cells}


def test_el10_distros_are_rhel10s_facts() -> None:
    for key in ("rocky10", "ubi10", "centos-stream10"):
        d = DISTROS[key]
        assert (d.family, d.version_id, d.template_family) == ("el10", "10", "el9")
        assert d.is_el and str(d.glibc) == "2.39" and d.gcc_majors == (14,)
        assert d.pythons == ("3.12",)
        assert "red_hat_enterprise_linux/10" in d.source.ref
    assert DISTROS["rocky10"].eol == DISTROS["ubi10"].eol == dt.date(2035, 5, 31)
    assert DISTROS["ubi10"].eol_source.confirmed  # Red Hat's own life-cycle page


def test_centos_stream10_ends_before_rhel10_with_its_sources() -> None:
    """CentOS Stream ends with its RHEL major's full support, years before RHEL's own end: a
    Stream 10 cell must not inherit RHEL 10's 2035, and each date says where it was read."""
    d = DISTROS["centos-stream10"]
    assert (d.os_release, d.eol) == (("centos", "10"), dt.date(2030, 1, 1))
    assert "www.centos.org/centos-stream" in d.eol_source.ref and not d.eol_source.confirmed
    assert "introducing-centos-stream-10" in d.source.ref and "read 2026-12-04" in d.source.ref
    assert d.optional_repos == ("crb",)  # the devel install may enable CRB (ninja-build)


def test_el10_devel_cell_installs_cuda13_nvcc_and_links_the_cu13_wheels() -> None:
    """CUDA 13's wheels keep the toolkit's libraries and headers in one nvidia/cu13/ directory:
    a devel cell that pointed at CUDA 12's nvidia/cublas/lib would fail its link step."""
    name = "rocky10-cu130-py3.12-torch2.14.1-devel"
    text = (REPO / "images" / name / "Containerfile").read_text(encoding="utf-8")
    site = "/opt/venv/lib/python3.12/site-packages/nvidia"
    for pkg in ("cuda-nvcc-13-0-13.0.88-1", "cuda-cudart-devel-13-0-13.0.96-1", "ninja-build"):
        assert f"      '{pkg}' \\\n" in text
    assert "'--enablerepo=crb'" in text
    assert f"'{site}/cu13/lib/libcublas.so.'[0-9]*" in text
    assert f"'{site}/nccl/lib/libnccl.so.'[0-9]*" in text and f"{site}/cublas/" not in text
    assert f'ENV CPATH="{site}/cu13/include:{site}/cudnn/include:' in text
    assert 'ENV CUDA_HOME="/usr/local/cuda-13.0"' in text


@pytest.mark.parametrize("name", sorted(EL10_CELLS))
def test_el10_cell_renders_rhel10_repository_gcc14_and_python3(name: str) -> None:
    cells = _shipped()
    assert set(EL10_CELLS) == {n for n, (c, _) in cells.items() if c.os.family == "el10"}
    cell, project = cells[name]
    os_key, cuda_minor, base = EL10_CELLS[name]
    text = render_cell(environment(REPO), cell, project)
    assert text == (REPO / "images" / name / "Containerfile").read_text(encoding="utf-8")
    assert f"FROM {base} AS os\n" in text
    assert "(dnf upgrade: a 10.2 base" in text or os_key == "centos-stream10"
    assert f"'baseurl={RHEL10}'" in text and f"'{RHEL10}/D42D0685.pub'" in text
    assert "rhel9" not in text
    assert f"      'cuda-cudart-{cuda_minor}-" in text
    # EL10's system python3 is 3.12: no python3.12 side package; gcc is the system gcc 14
    for pkg, series in (
        ("python3", "3.12"),
        ("python3-devel", "3.12"),
        ("gcc", "14"),
        ("gcc-c++", "14"),
    ):
        assert f"      '{pkg}' \\\n" in text
        assert f"rpm -q --qf '%{{VERSION}}' '{pkg}') && case \"$v\" in '{series}'|" in text
    assert "'python3.12'" not in text and "python3.12-devel" not in text
    assert f'{OS_FAMILY_LABEL}="el10"' in text
    assert cell.os.key == os_key and cell.gcc == "14"


def test_el10_cells_are_admitted() -> None:
    for name in EL10_CELLS:
        cell, _ = _shipped()[name]
        findings = check_cell(cell, TODAY)
        assert not [f for f in findings if f.severity is BLOCK], name
        glibc = next(f for f in findings if f.id == "os.glibc")
        assert glibc.severity is OK and "red_hat_enterprise_linux/10" in glibc.sources[0].ref
        pins = next(f for f in findings if f.id == "os.pins")
        assert "EL10 keeps serving" in pins.message


def test_el10_cell_on_the_rhel9_repository_is_blocked() -> None:
    """The defect this guards: an EL10 cell whose CUDA repository is NVIDIA's rhel9 one."""
    text = SHIPPED.replace(f"repo: {RHEL10}\n", f"repo: {RHEL9}\n")
    assert text != SHIPPED
    cell, _ = _shipped(text)["ubi10-cu132-py3.12-torch2.15.0-runtime"]
    found = [f for f in check_cell(cell, TODAY) if f.id == "cuda.repo"]
    assert [f.severity for f in found] == [BLOCK]
    assert "rhel10 repository" in found[0].message and "rhel10/x86_64" in (
        found[0].remediation or ""
    )


def test_el10_python_pin_needs_a_version() -> None:
    rocky10 = (
        "  debian12:\n",
        "  rocky10:\n    base: quay.io/rockylinux/rockylinux:10.2\n    python:\n"
        '      "3.12": {package: python3}\n  debian12:\n',
    )
    with pytest.raises(MatrixError, match="dnf installs python3 on EL10"):
        load(rocky10)


def test_another_familys_repository_leaves_a_cells_hash_alone() -> None:
    el10 = (
        "python_packages:\n",
        "    el10:\n"
        f"      repo: {RHEL10}\n"
        f"      gpgkey: {RHEL10}/D42D0685.pub\n"
        "      gpgkey_sha256: d0664fbbdb8c32356d45de36c5984617217b2d0bef41b93ccecd326ba3b80c87\n"
        "      runtime: {cuda-cudart-12-8: 12.8.90-1}\npython_packages:\n",
    )
    name = "rocky9-cu128-py3.12-torch2.9.1-runtime"
    before = load()[1].find(name)
    after = load(el10)[1].find(name)
    assert before is not None and after is not None and after.cuda is not None
    assert "el10" in after.cuda.repos
    assert before.cell_hash == after.cell_hash
    bumped = load(("cuda-cudart-12-8: 12.8.90-1", "cuda-cudart-12-8: 12.8.57-1"))[1].find(name)
    assert bumped is not None and bumped.cell_hash != before.cell_hash

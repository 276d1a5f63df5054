"""Mirrors: matrix.yaml's `mirrors:` and `trainimg build --mirrors FILE` point an EL9 OS's
repositories and NVIDIA's CUDA repository at a site's mirror or dated snapshot; gpgcheck stays
on, every value is pattern-checked, and the rendered text is held to a golden file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from builder.cli import main
from builder.errors import MatrixError
from builder.matrix.expand import expand
from builder.matrix.load import parse_matrix
from builder.matrix.mirrors import with_mirrors_file
from builder.spec.cell_hash import with_cell_hashes
from builder.spec.render import environment, render_cell
from tests.matrices import MINIMAL, load, variant

GOLDEN = Path(__file__).parents[1] / "data" / "golden"
DEVEL = "rocky9-cu128-py3.12-torch2.9.1-devel"
KEY_SHA = "ab" * 32
CA_SHA = "cd" * 32
NVIDIA_SHA = "d0664fbbdb8c32356d45de36c5984617217b2d0bef41b93ccecd326ba3b80c87"
MIRRORS = f"""\
mirrors:
  oses:
    rocky9:
      repos:
        baseos: https://mirror.example.com/rocky/9.6/BaseOS/x86_64/os
        appstream: https://mirror.example.com/rocky/9.6/AppStream/x86_64/os
        crb: https://mirror.example.com/rocky/9.6/CRB/x86_64/os
      gpgkey: file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9
      gpgkey_sha256: {KEY_SHA}
      ca: http://mirror.example.com/pub/ca.crt
      ca_sha256: {CA_SHA}
  cuda:
    el9:
      repo: https://mirror.example.com/nvidia/cuda/rhel9/x86_64
      gpgkey: https://mirror.example.com/nvidia/cuda/rhel9/x86_64/D42D0685.pub
"""


def mirrored(mirrors: str = MIRRORS) -> str:
    return MINIMAL.rstrip("\n") + "\n" + mirrors


def devel_text(matrix_text: str) -> str:
    matrix = parse_matrix(matrix_text, "matrix.yaml")
    cell = with_cell_hashes(expand(matrix), matrix.project).find(DEVEL)
    assert cell is not None
    return render_cell(environment(Path(__file__).parents[2]), cell, matrix.project)


def test_mirrored_golden() -> None:
    """Set UPDATE_GOLDEN=1 to rewrite it after a deliberate template change."""
    text = devel_text(mirrored())
    golden = GOLDEN / f"{DEVEL}.mirrored.Containerfile"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_a_mirror_replaces_the_repositories_and_keeps_gpgcheck() -> None:
    plain, text = devel_text(MINIMAL), devel_text(mirrored())
    assert "trainimg-os-mirror" not in plain and "mirror.example.com" not in plain
    assert "rm -f /etc/yum.repos.d/*.repo" in text
    repo_file = text[text.index("printf '%s\\n' \\") : text.index("trainimg-os-mirror.repo\n")]
    sections = re.findall(r"'\[(\w+)\]'", repo_file)
    assert sections == ["baseos", "appstream", "crb"]
    assert repo_file.count("'gpgcheck=1'") == 3 and "gpgcheck=0" not in text
    assert repo_file.count("'enabled=1'") == 2 and repo_file.count("'enabled=0'") == 1  # crb
    assert repo_file.count("'sslcacert=/etc/pki/tls/certs/trainimg-os-mirror.pem'") == 3
    # the key and the CA are checked by their sha256 before use; NVIDIA's keeps the matrix's
    assert f"'{KEY_SHA}' '/etc/pki/rpm-gpg/RPM-GPG-KEY-trainimg-os-mirror'" in text
    assert f"'{CA_SHA}' '/etc/pki/tls/certs/trainimg-os-mirror.pem'" in text
    assert f"'{NVIDIA_SHA}' '/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA'" in text
    assert "'baseurl=https://mirror.example.com/nvidia/cuda/rhel9/x86_64'" in text
    assert "developer.download.nvidia.com" not in text
    assert text.index("trainimg-os-mirror.repo") < text.index("dnf -y upgrade")
    # the devel install still enables crb, which the mirror serves
    assert "'--enablerepo=crb'" in text


def test_a_mirror_changes_the_cell_hash() -> None:
    _, plain = load()
    matrix = parse_matrix(mirrored(), "matrix.yaml")
    hashes = {c.name: c.cell_hash for c in with_cell_hashes(expand(matrix), matrix.project).cells}
    for cell in plain.cells:
        same = hashes[cell.name] == cell.cell_hash
        assert same == (cell.os.key == "debian12"), cell.name


def test_a_mirrors_file_overrides_the_matrix(tmp_path: Path) -> None:
    """`trainimg build --mirrors FILE`: the same schema, laid over the matrix's own."""
    snapshot = MIRRORS.replace("rocky/9.6/", "snapshots/2026-11-30/rocky/")
    path = tmp_path / "site-mirrors.yaml"
    path.write_text(snapshot, encoding="utf-8")
    matrix = with_mirrors_file(parse_matrix(mirrored(), "matrix.yaml"), path)
    mirror = matrix.oses["rocky9"].mirror
    assert mirror is not None
    assert mirror.repos["baseos"].endswith("/snapshots/2026-11-30/rocky/BaseOS/x86_64/os")
    assert matrix.mirrors.oses["rocky9"] is mirror


@pytest.mark.parametrize(
    ("mirrors", "where", "says"),
    [
        (
            MIRRORS.replace("baseos: https://mirror.example.com", "baseos: https://m.x/$(id)"),
            "mirrors.oses.rocky9.repos.baseos",
            "invalid http(s) URL 'https://m.x/$(id)",
        ),
        (
            MIRRORS.replace("      ca_sha256: " + CA_SHA + "\n", ""),
            "mirrors.oses.rocky9",
            "give ca and ca_sha256 together",
        ),
        (
            MIRRORS.replace(
                "        crb: https://mirror.example.com/rocky/9.6/CRB/x86_64/os\n", ""
            ),
            "mirrors.oses.rocky9.repos",
            "oses.rocky9.devel_repos enables crb for the devel install: the mirror must serve it",
        ),
        (MIRRORS.replace("    rocky9:", "    alma9:"), "mirrors.oses.alma9", "no OS 'alma9'"),
        (
            MIRRORS.replace("    rocky9:", "    debian12:"),
            "mirrors.oses.debian12",
            "only EL (EL9, EL10) OSes take a mirror",
        ),
        (
            MIRRORS.replace("gpgkey_sha256: " + KEY_SHA, "gpgkey_sha256: 1234"),
            "mirrors.oses.rocky9.gpgkey_sha256",
            "invalid sha256 hex '1234'",
        ),
        (
            MIRRORS.replace("x86_64\n      gpgkey:", "x86_64/cuda-rhel9.repo\n      gpgkey:"),
            "mirrors.cuda.el9.repo",
            "is a .repo file",
        ),
        (MIRRORS.replace("    el9:", "    debian:"), "mirrors.cuda.debian", "no cuda release"),
    ],
)
def test_a_bad_mirror_is_refused_naming_the_key(mirrors: str, where: str, says: str) -> None:
    with pytest.raises(MatrixError) as info:
        parse_matrix(mirrored(mirrors), "matrix.yaml")
    text = str(info.value)
    assert f": {where}: " in text and says in text, text
    assert re.match(r"matrix\.yaml:\d+: ", text), text  # file and line


def test_a_bad_mirrors_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text("mirrors:\n  oses:\n    rocky9:\n      repos: {}\n", encoding="utf-8")
    matrix = parse_matrix(variant(), "matrix.yaml")
    with pytest.raises(MatrixError) as info:
        with_mirrors_file(matrix, path)
    assert str(info.value).startswith(f"{path}:4: mirrors.oses.rocky9")
    with pytest.raises(MatrixError, match="no such file"):
        with_mirrors_file(matrix, tmp_path / "absent.yaml")


PASSWORD = "hunter2-Mirror"  # noqa: S105 - planted: no message may show it


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        (
            "baseos: https://mirror.example.com",
            f"baseos: https://svc-build:{PASSWORD}@mirror.example.com",
            "mirrors.oses.rocky9.repos.baseos",
        ),
        (
            "repo: https://mirror.example.com/nvidia",
            f"repo: https://{PASSWORD}@mirror.example.com/nvidia",
            "mirrors.cuda.el9.repo",
        ),
        (
            "ca: http://mirror.example.com",
            f"ca: http://u:{PASSWORD}@mirror.example.com",
            "mirrors.oses.rocky9.ca",
        ),
    ],
)
def test_a_mirror_url_with_credentials_is_refused_without_showing_them(
    old: str, new: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = mirrored(MIRRORS.replace(old, new))
    with pytest.raises(MatrixError) as info:
        parse_matrix(text, "matrix.yaml")
    message = str(info.value)
    assert f": {where}: " in message and "carries credentials" in message, message
    assert PASSWORD not in message and "***@mirror.example.com" in message
    # on the command line: exit 2, one line on stderr, no password, no traceback
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["matrix", "check", "--matrix", str(path)]) == 2
    err = capsys.readouterr().err
    assert "carries credentials" in err and PASSWORD not in err and "Traceback" not in err


def test_any_refused_value_is_shown_without_its_password() -> None:
    """A URL refused for another reason (a query string) still hides its password."""
    bad = f"baseos: https://u:{PASSWORD}@mirror.example.com/x?token=1 #"
    with pytest.raises(MatrixError) as info:
        parse_matrix(mirrored(MIRRORS.replace("baseos: https://mirror.example.com", bad)), "m")
    assert PASSWORD not in str(info.value)


def test_dnf_variables_in_a_baseurl_reach_the_repo_file_for_dnf() -> None:
    """$releasever and $basearch stay dnf's: single-quoted on the RUN line, written as they
    are into the .repo file; other `$` forms are still refused."""
    with_vars = MIRRORS.replace(
        "rocky/9.6/BaseOS/x86_64/os", "rocky/$releasever/BaseOS/$basearch/os"
    )
    text = devel_text(mirrored(with_vars))
    assert "'baseurl=https://mirror.example.com/rocky/$releasever/BaseOS/$basearch/os'" in text
    for bad in ("${basearch}", "$arch", "$(uname -m)"):
        with pytest.raises(MatrixError, match="invalid http"):
            parse_matrix(mirrored(MIRRORS.replace("BaseOS/x86_64", f"BaseOS/{bad}")), "m")

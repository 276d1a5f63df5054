"""Every dnf spec of every rendered EL9 Containerfile resolves with EL9's dnf.

Debian's dnf 4.14 / libdnf 0.69 (the versions EL9 ships) resolves the specs against local
repositories of empty RPMs that carry the real NEVRAs (tests/el9/nevras.toml, with where each
one comes from): what EL9's dnf would answer, without a network or an EL9 machine.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NEVRAS = Path(__file__).with_name("nevras.toml")
TOOLS = ("dnf", "rpmbuild", "createrepo_c")
NEVRA = re.compile(
    r"(?P<name>.+)-(?:(?P<epoch>[0-9]+):)?(?P<version>[^-:]+)-(?P<release>[^-]+)\.(?P<arch>[^.]+)"
)
SPEC = """Name: %{n}
Epoch: %{e}
Version: %{v}
Release: %{r}
Summary: empty stand-in carrying a real EL9 NEVRA
License: none
BuildArch: %{a}
%description
Empty.
%files
"""


@dataclass(frozen=True)
class Install:
    """One `dnf install` of a rendered Containerfile, with the repositories it would see."""

    cell: str
    specs: tuple[str, ...]
    options: tuple[str, ...]
    written_repos: frozenset[str]  # .repo files written by this RUN or an earlier one


def _need_tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: scripts/setup.sh installs them")


def _data() -> dict[str, Any]:
    return tomllib.loads(NEVRAS.read_text(encoding="utf-8"))


def el9_containerfiles() -> list[Path]:
    return sorted(
        p
        for p in (REPO / "images").glob("*/Containerfile")
        if 'io.trainimg.os.family="el9"' in p.read_text(encoding="utf-8")
    )


def _instructions(text: str) -> list[str]:
    """Containerfile instructions with their continuation lines joined, comments dropped."""
    out: list[str] = []
    current = ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append(current + line)
        current = ""
    return out


def dnf_installs(path: Path) -> list[Install]:
    cell = path.parent.name
    installs: list[Install] = []
    written: set[str] = set()
    for instruction in _instructions(path.read_text(encoding="utf-8")):
        if not instruction.startswith("RUN "):
            continue
        written |= set(re.findall(r">\s*(/etc/yum\.repos\.d/\S+\.repo)", instruction))
        for command in instruction[4:].split("&&"):
            words = shlex.split(command)
            if words[:1] != ["dnf"] or "install" not in words:
                continue
            args = words[words.index("install") + 1 :]
            options = [w for w in words[1:] if w.startswith("-") and w not in ("-y", "--nodocs")]
            specs = tuple(w for w in args if not w.startswith("-"))
            installs.append(Install(cell, specs, tuple(options), frozenset(written)))
    return installs


def _build_rpm(workdir: Path, outdir: Path, nevra: str) -> None:
    m = NEVRA.fullmatch(nevra)
    assert m, f"{NEVRAS.name}: {nevra!r} is not name-[epoch:]version-release.arch"
    workdir.mkdir(exist_ok=True)
    spec = workdir / "empty.spec"
    spec.write_text(SPEC, encoding="utf-8")
    defines = {
        "_topdir": str(workdir / "top"),
        "_rpmdir": str(outdir),
        "_build_id_links": "none",
        "n": m["name"],
        "e": m["epoch"] or "0",
        "v": m["version"],
        "r": m["release"],
        "a": m["arch"],
    }
    cmd = ["rpmbuild", "-bb", "--quiet"]
    for key, value in defines.items():
        cmd += ["--define", f"{key} {value}"]
    subprocess.run([*cmd, str(spec)], check=True, capture_output=True, timeout=60)


# every test here runs dnf against a local EL9 repository
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """name -> {repo_id, enabled, oses, written_by, path}: one createrepo_c'd repo per table."""
    _need_tools()
    root = tmp_path_factory.mktemp("el9-repos")
    out: dict[str, dict[str, Any]] = {}
    for name, table in _data()["repos"].items():
        path = root / name
        path.mkdir()
        for pkg in table["packages"]:
            _build_rpm(root / "build", path, pkg["nevra"])
        subprocess.run(["createrepo_c", "-q", str(path)], check=True, timeout=120)
        out[name] = {**table, "path": path}
    return out


def resolve(install: Install, os_key: str, repos: dict[str, dict[str, Any]], root: Path) -> str:
    """Run dnf for one install; return '' when every spec resolves, else dnf's complaint."""
    reposdir = root / "repos.d"
    reposdir.mkdir(parents=True, exist_ok=True)
    for name, repo in repos.items():
        if os_key not in repo["oses"]:
            continue
        if repo.get("written_by") and repo["written_by"] not in install.written_repos:
            continue  # the Containerfile has not written this repository's .repo file yet
        (reposdir / f"{name}.repo").write_text(
            f"[{repo['repo_id']}]\nname={name}\nbaseurl=file://{repo['path']}\n"
            f"enabled={int(repo['enabled'])}\ngpgcheck=0\n",
            encoding="utf-8",
        )
    conf = root / "dnf.conf"
    conf.write_text(f"[main]\nreposdir={reposdir}\ngpgcheck=0\n", encoding="utf-8")
    cmd = [
        "dnf",
        f"--config={conf}",
        f"--installroot={root / 'sysroot'}",
        "--releasever=9",
        "--setopt=cachedir=" + str(root / "cache"),
        "--assumeno",
        *install.options,
        "install",
        *install.specs,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    text = proc.stdout + proc.stderr
    if "Operation aborted." in text and "Error:" not in text.replace("Error: Operation", ""):
        return ""
    return text.strip()


def unmatched(install: Install, answer: str) -> list[str]:
    """The specs dnf found nothing for (all of them, with dnf's words, if it failed otherwise)."""
    if not answer:
        return []
    missing = re.findall(r"^No match for argument: (\S+)$", answer, re.M)
    return missing or [f"{' '.join(install.specs)} (dnf: {answer.splitlines()[-1]})"]


def _os_key(path: Path) -> str:
    found = re.search(r'io\.trainimg\.os="([^"]+)"', path.read_text(encoding="utf-8"))
    assert found, f"{path}: no io.trainimg.os label"
    return found[1]


def test_every_el9_spec_resolves(
    repos: dict[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = el9_containerfiles()
    assert len(files) >= 16, "the shipped matrix renders 16 EL9 cells"
    answers: dict[tuple[str, tuple[str, ...], tuple[str, ...], frozenset[str]], str] = {}
    failures: list[str] = []
    specs = 0
    for path in files:
        os_key = _os_key(path)
        installs = dnf_installs(path)
        assert installs, f"{path}: no dnf install found"
        for install in installs:
            specs += len(install.specs)
            key = (os_key, install.specs, install.options, install.written_repos)
            if key not in answers:  # cells that differ only in torch share their dnf lines
                answers[key] = resolve(install, os_key, repos, tmp_path / str(len(answers)))
            failures += [f"{install.cell}: {spec}" for spec in unmatched(install, answers[key])]
    assert failures == [], "\n".join(failures)
    with capsys.disabled():
        print(f"\n{len(files)} EL9 Containerfiles, {specs} dnf specs, {len(answers)} dnf runs")


def test_the_old_series_pin_does_not_resolve(
    repos: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """The check can fail: `shadow-utils-4.9.*` (what the matrix said before) matches nothing."""
    bad = Install("old", ("shadow-utils-4.9.*", "gcc-11.5.0"), (), frozenset())
    answer = resolve(bad, "rocky9", repos, tmp_path)
    assert "Unable to find a match: shadow-utils-4.9.*" in answer
    assert unmatched(bad, answer) == ["shadow-utils-4.9.*"]
    good = Install("new", ("shadow-utils-4.9",), (), frozenset())
    assert resolve(good, "rocky9", repos, tmp_path / "good") == ""


def test_crb_is_needed_for_ninja(repos: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """ninja-build lives in CRB, disabled in the bases: the devel install must enable it."""
    plain = Install("plain", ("ninja-build-1.10.2",), (), frozenset())
    assert "Unable to find a match" in resolve(plain, "rocky9", repos, tmp_path / "a")
    crb = Install("crb", ("ninja-build-1.10.2",), ("--enablerepo=crb",), frozenset())
    assert resolve(crb, "rocky9", repos, tmp_path / "b") == ""


def test_cuda_repo_is_written_locally_and_fail_closed() -> None:
    """NVIDIA's .repo file is written in the template (gpgcheck=1, the local key), never fetched."""
    for path in el9_containerfiles():
        text = path.read_text(encoding="utf-8")
        if 'io.trainimg.accelerator="cuda"' not in text:
            continue
        assert ".repo'" not in text.replace("/etc/yum.repos.d/cuda.repo", ""), path
        assert "'gpgcheck=1' 'gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA'" in text, path
        assert "sha256sum -c --strict" in text, path
        assert not re.search(r"curl[^&]*\.repo\b", text), f"{path} downloads a .repo file"

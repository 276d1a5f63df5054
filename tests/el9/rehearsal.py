"""The parts of the EL9 build rehearsal: a stand-in EL9 base, signed stand-in RPMs with real
NEVRAs, their repositories and a loopback HTTP mirror that serves them.

Nothing here is an EL9 machine: the stand-in base is the Debian offline base with Debian's dnf
4.14 / libdnf 0.69 and rpm (EL9 ships dnf 4.14 and libdnf 0.69), tagged locally under the EL9
bases' names so no registry is needed; the RPMs are empty apart from the few files the build's
checks look for. What it proves and what it cannot is in docs/build.md ("The EL9 rehearsal").
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.build.base_image import BaseSpec, rootfs_tarball
from builder.engines.roles import Engine

TABLE = Path(__file__).with_name("rpms.toml")
NEVRA = re.compile(
    r"(?P<name>.+)-(?:(?P<epoch>[0-9]+):)?(?P<version>[^-:]+)-(?P<release>[^-]+)\.(?P<arch>[^.]+)"
)
REPOS = ("baseos", "appstream", "crb", "cuda")
# What the stand-in base adds to the Debian offline base (from Debian's archive, as `trainimg
# base` fetches its packages): dnf and rpm, and curl, which the EL9 template fetches keys with.
STANDIN_PACKAGES = ("dnf", "rpm", "curl")
STANDIN_LABEL = "io.trainimg.test.el9-standin"
STANDIN_TRIM = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "usr/lib/gcc",
    "usr/libexec/gcc",
    "usr/include",
    "usr/share/doc",
    "usr/share/man",
)
# The stand-in's own .repo file, as an EL9 base image carries one: a repository nobody serves
# (a closed loopback port), so a build that does not replace it with the mirror fails.
BASE_REPO = "[base]\nname=the base image's own repository\nbaseurl=http://127.0.0.1:9/el9\n"


@dataclass(frozen=True)
class Rpm:
    nevra: str
    repo: str
    requires: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    source: str = ""
    confirmed: bool = False

    @property
    def parts(self) -> dict[str, str]:
        m = NEVRA.fullmatch(self.nevra)
        assert m, f"{TABLE.name}: {self.nevra!r} is not name-[epoch:]version-release.arch"
        return {k: v or "" for k, v in m.groupdict().items()}

    @property
    def name(self) -> str:
        return self.parts["name"]

    @property
    def installed(self) -> str:
        """As `rpm -q --qf '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}'` prints it."""
        p = self.parts
        return f"{p['name']}-{p['epoch'] or 0}:{p['version']}-{p['release']}"


def table() -> list[Rpm]:
    data: dict[str, Any] = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    return [
        Rpm(
            r["nevra"],
            r["repo"],
            tuple(r.get("requires", ())),
            dict(r.get("files", {})),
            dict(r.get("links", {})),
            r["source"],
            bool(r["confirmed"]),
        )
        for r in data["rpm"]
    ]


def _spec(rpm: Rpm) -> str:
    p = rpm.parts
    lines = [
        f"Name: {p['name']}",
        *([f"Epoch: {p['epoch']}"] if p["epoch"] not in ("", "0") else []),
        f"Version: {p['version']}",
        f"Release: {p['release']}",
        "Summary: stand-in carrying a real EL9 NEVRA (trainimg's EL9 rehearsal)",
        "License: none",
        f"BuildArch: {p['arch']}",
        *(f"Requires: {req}" for req in rpm.requires),
        "%description",
        "Stand-in.",
        "%install",
    ]
    paths = sorted({*rpm.files, *rpm.links})
    for path in paths:
        lines.append(f"mkdir -p %{{buildroot}}{Path(path).parent}")
    for path, content in rpm.files.items():
        lines.append(f"printf '%s\\n' '{content}' > %{{buildroot}}{path}")
    for path, target in rpm.links.items():
        lines.append(f"ln -s {target} %{{buildroot}}{path}")
    lines += ["%files", *paths, ""]
    return "\n".join(lines)


def build_rpms(rpms: list[Rpm], out: Path, work: Path) -> None:
    """One RPM per row into out/<repo>/ (rpmbuild, quiet, no network)."""
    for repo in REPOS:
        (out / repo).mkdir(parents=True, exist_ok=True)
    for i, rpm in enumerate(rpms):
        spec = work / f"{i}.spec"
        spec.write_text(_spec(rpm), encoding="utf-8")
        cmd = ["rpmbuild", "-bb", "--quiet"]
        for key, value in {
            "_topdir": str(work / "top"),
            "_rpmdir": str(work / "rpms"),
            "_build_id_links": "none",
        }.items():
            cmd += ["--define", f"{key} {value}"]
        proc = subprocess.run([*cmd, str(spec)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"rpmbuild {rpm.nevra}: {proc.stderr[-800:]}"
        built = list((work / "rpms").rglob("*.rpm"))
        assert len(built) == 1, built
        shutil.move(str(built[0]), out / rpm.repo / built[0].name)


class Signer:
    """A throwaway gpg key in its own home, for `rpm --addsign`; close() stops its agent."""

    def __init__(self, name: str) -> None:
        # gpg-agent's socket lives in the home: keep its path short (sun_path is 108 bytes)
        self.home = Path(tempfile.mkdtemp(prefix="tigpg-"))
        self.name = f"trainimg rehearsal {name} <{name}@rehearsal.invalid>"
        self._gpg("--passphrase", "", "--quick-gen-key", self.name, "rsa2048", "sign", "never")

    def _gpg(self, *args: str) -> str:
        proc = subprocess.run(
            ["gpg", "--batch", "--homedir", str(self.home), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"gpg {args[0]}: {proc.stderr[-800:]}"
        return proc.stdout

    def public_key(self) -> str:
        return self._gpg("--armor", "--export", self.name)

    def sign(self, rpms: list[Path]) -> None:
        proc = subprocess.run(
            [
                "rpmsign",
                "--define",
                f"__gpg {shutil.which('gpg')}",
                "--define",
                f"_gpg_path {self.home}",
                "--define",
                f"_gpg_name {self.name}",
                "--addsign",
                *map(str, rpms),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"rpmsign: {proc.stderr[-800:]}"

    def close(self) -> None:
        subprocess.run(
            ["gpgconf", "--homedir", str(self.home), "--kill", "gpg-agent"],
            capture_output=True,
            timeout=30,
        )
        shutil.rmtree(self.home, ignore_errors=True)


def createrepo(directory: Path) -> None:
    subprocess.run(["createrepo_c", "-q", str(directory)], check=True, timeout=120)


def sha256_without_version(text: str) -> str:
    """The checksum the template checks: the key's bytes after dropping a `Version:` line."""
    kept = "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith("Version")
    )
    return hashlib.sha256(kept.encode()).hexdigest()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(root: Path) -> Iterator[str]:
    """`python3 -m http.server` on 127.0.0.1 serving `root`, stopped by its pid after."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/", timeout=2):  # noqa: S310 - loopback
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the mirror on {url} did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _chroot(root: Path, *args: str) -> None:
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    proc = subprocess.run(
        ["chroot", str(root), *args], capture_output=True, text=True, timeout=1200, env=env
    )
    assert proc.returncode == 0, f"{' '.join(args)}: {(proc.stdout + proc.stderr)[-1200:]}"


def standin_base(engine: Engine, cache: Path, base: BaseSpec, refs: tuple[str, ...]) -> str:
    """The stand-in EL9 base under each of `refs`: the offline base's cached rootfs, with
    Debian's dnf, rpm and curl added in a chroot, and an EL9 base's own .repo file. Made once
    per offline-base recipe (its tarball cached beside the base's); returns its key."""
    base_tar = rootfs_tarball(base, cache, lambda _m: None)
    key = hashlib.sha256(
        "|".join((base_tar.name, *STANDIN_PACKAGES, *STANDIN_TRIM, BASE_REPO)).encode()
    ).hexdigest()[:12]
    if all(engine.image_exists(r) for r in refs) and all(
        engine.inspect_image(r).labels.get(STANDIN_LABEL) == key for r in refs
    ):
        return key
    tarball = cache / f"el9-standin-{key}.tar"
    if not tarball.exists():
        with tempfile.TemporaryDirectory(dir=cache, prefix=".standin-") as tmp:
            root = Path(tmp) / "root"
            root.mkdir()
            subprocess.run(["tar", "-xf", str(base_tar), "-C", str(root)], check=True, timeout=600)
            # the base carries no DNS servers (builder/build/rootfs_normalize.py empties the
            # build host's resolv.conf): apt in this chroot gets this machine's, as debootstrap
            # gave it, and the stand-in is left without them again
            resolv = root / "etc/resolv.conf"
            if Path("/etc/resolv.conf").is_file():
                shutil.copyfile("/etc/resolv.conf", resolv)
            _chroot(root, "apt-get", "update", "-qq")
            _chroot(
                root,
                "apt-get",
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                *STANDIN_PACKAGES,
            )
            # what dnf does not need and a rehearsal never runs: the compiler and the headers
            # the offline base carries for torch.compile (a smaller tarball imports faster)
            for rel in STANDIN_TRIM:
                shutil.rmtree(root / rel, ignore_errors=True)
            (root / "var/lib/apt/lists").mkdir()
            resolv.write_text("")
            (root / "etc/yum.repos.d").mkdir(parents=True, exist_ok=True)
            (root / "etc/yum.repos.d/base.repo").write_text(BASE_REPO, encoding="utf-8")
            (root / "etc/dnf/vars").mkdir(parents=True, exist_ok=True)
            (root / "etc/dnf/vars/releasever").write_text("9\n", encoding="utf-8")
            (root / "etc/pki/rpm-gpg").mkdir(parents=True, exist_ok=True)
            part = Path(tmp) / "standin.tar"
            subprocess.run(
                ["tar", "--numeric-owner", "-C", str(root), "-cf", str(part), "."],
                check=True,
                timeout=600,
            )
            part.replace(tarball)
    changes = (
        'CMD ["/bin/bash"]',
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        f"LABEL {STANDIN_LABEL}={key}",
    )
    image = engine.import_image(tarball, refs[0], changes)
    for ref in refs[1:]:
        engine.tag(image, ref)
    return key


def instructions(text: str) -> list[str]:
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


def dnf_specs(text: str) -> list[str]:
    """Every package spec the Containerfile's `dnf install` commands name."""
    import shlex

    specs: list[str] = []
    for instruction in instructions(text):
        if not instruction.startswith("RUN "):
            continue
        for command in instruction[4:].split("&&"):
            words = shlex.split(command)
            if words[:1] == ["dnf"] and "install" in words:
                args = words[words.index("install") + 1 :]
                specs += [w for w in args if not w.startswith("-")]
    return specs

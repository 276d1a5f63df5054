"""Operating-system facts for the image bases: family, glibc, compilers, Pythons, end of life,
what /etc/os-release says inside them and (Debian) the suite name."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from packaging.version import Version

from builder.facts.sources import Source

_RHEL9_LANGS = Source(
    "https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/9/html/"
    "installing_and_using_dynamic_programming_languages/"
    "assembly_introduction-to-python_installing-and-using-dynamic-programming-languages"
)
_RHEL9_BASE = Source(
    "https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/9/html/"
    "considerations_in_adopting_rhel_9/ (glibc 2.34, GCC 11)"
)
_DEBIAN_RELEASES = Source("https://wiki.debian.org/DebianReleases", confirmed=False)
# ID and the VERSION_ID prefix each base's /etc/os-release carries (os-release(5); each
# distribution's own file: ID=centos / rhel / rocky / debian, VERSION_ID="9[.N]" / "12").
OS_RELEASE_SOURCE = Source(
    "https://www.freedesktop.org/software/systemd/man/latest/os-release.html"
)


# The Enterprise Linux families: dnf and rpm, OS packages pinned by the series EL guarantees.
EL_FAMILIES = ("el9", "el10")


@dataclass(frozen=True)
class Distro:
    key: str
    name: str
    family: str  # el9 | el10 | debian: keys the CUDA repository and the package rules
    glibc: Version
    gcc_majors: tuple[int, ...]  # gcc majors the distribution's own repositories ship
    pythons: tuple[str, ...]  # python3.X interpreters in the distribution's repositories
    eol: dt.date
    source: Source
    eol_source: Source
    # Repositories the base image carries but leaves disabled, which an install may enable
    # (`--enablerepo`): CRB holds ninja-build on EL9.
    optional_repos: tuple[str, ...] = ()
    repos_source: Source | None = None
    # /etc/os-release inside the base: ID and the prefix of VERSION_ID (OS_RELEASE_SOURCE).
    os_release_id: str = ""
    version_id: str = ""
    # Debian's suite (codename): what debootstrap fetches for the offline base; "" elsewhere
    # (no offline base recipe).
    codename: str = ""
    # The OS-family template (images/templates/<template>.Containerfile.j2); "" is the
    # family's own. EL10 renders through the EL9 one: dnf, rpm and the repository layout are
    # the same, and what differs (package names, compiler, CUDA repository) is data.
    template: str = ""

    @property
    def template_family(self) -> str:
        return self.template or self.family

    @property
    def is_el(self) -> bool:
        return self.family in EL_FAMILIES

    @property
    def os_release(self) -> tuple[str, str]:
        return (self.os_release_id, self.version_id)


# EL9: Python 3.9 default, 3.11 since 9.2, 3.12 since 9.4 (AppStream); system GCC 11, glibc 2.34.
# CentOS Stream 9 ends with RHEL 9 full support (2027-05-31); RHEL 9 maintenance ends
# 2032-05-31 (https://access.redhat.com/support/policy/updates/errata, unconfirmed: read only in
# secondary sources). Rocky follows RHEL's dates.
def _el9(
    key: str,
    name: str,
    os_release_id: str,
    eol: dt.date,
    eol_source: str,
    optional_repos: tuple[str, ...] = (),
    repos_source: Source | None = None,
) -> Distro:
    """An EL9 rebuild: the same glibc, compiler and Pythons; its name, end of life and disabled
    repositories vary."""
    return Distro(
        key,
        name,
        "el9",
        Version("2.34"),
        (11,),
        ("3.9", "3.11", "3.12"),
        eol,
        _RHEL9_LANGS,
        Source(eol_source, confirmed=False),
        optional_repos,
        repos_source,
        os_release_id,
        "9",
    )


# ninja-build-1.10.2-6.el9 lives in CRB on Rocky 9 and CentOS Stream 9 (the repository paths
# below); the base images ship the `crb` repository disabled. UBI 9 has no ninja-build.
_CRB = Source(
    "https://dl.rockylinux.org/pub/rocky/9/CRB/x86_64/os/Packages/n/ and "
    "https://mirror.stream.centos.org/9-stream/CRB/x86_64/os/Packages/ (repository id crb)",
    confirmed=False,
)


# What an EL9 rebuild's repositories keep: the `9` tree serves the current minor only (9.7 in
# December 2026); the builds of older minors move to the vault, so a pin on one package version
# stops resolving at the next errata, while the package name and its series stay for the life
# of the release (RHEL 9 application compatibility: python3.12 stays 3.12, the system gcc 11).
EL9_REPOS_KEEP_CURRENT_MINOR = Source(
    "https://wiki.rockylinux.org/rocky/version/ (only the latest minor is maintained; older "
    "minors in https://dl.rockylinux.org/vault/rocky/) and https://access.redhat.com/articles/"
    "rhel9-abi-compatibility (application compatibility within RHEL 9)",
    confirmed=False,
)


# EL10 (read 2026-12-03): RHEL 10 GA May 2025, maintenance to 2035-05-31 (Red Hat's life-cycle
# page); its system compiler is GCC 14, glibc 2.39, and Python 3.12 is the system python3
# (packages python3 and python3-devel; no python3.12 side package, no dnf modules). UBI 10 and
# Rocky Linux 10 follow RHEL 10's dates (Rocky: its version wiki, unconfirmed here).
_RHEL10_BASE = Source(
    "https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/10/html/"
    "10.0_release_notes/ (GCC 14, glibc 2.39, Python 3.12 as python3; read 2026-12-03)"
)
_RHEL_LIFECYCLE = "https://access.redhat.com/support/policy/updates/errata"


def _el10(
    key: str,
    name: str,
    os_release_id: str,
    eol_source: str,
    eol: dt.date = dt.date(2035, 5, 31),
    source: Source = _RHEL10_BASE,
    optional_repos: tuple[str, ...] = (),
    repos_source: Source | None = None,
    read: str = "2026-12-03",
) -> Distro:
    """An EL10 distribution: RHEL 10's glibc, compiler and Python; rendered by the EL9
    template. Its end of life is RHEL 10's unless given (CentOS Stream 10 ends earlier)."""
    return Distro(
        key,
        name,
        "el10",
        Version("2.39"),
        (14,),
        ("3.12",),
        eol,
        source,
        Source(f"{eol_source} (read {read})", confirmed=eol_source == _RHEL_LIFECYCLE),
        optional_repos,
        repos_source,
        os_release_id=os_release_id,
        version_id="10",
        template="el9",
    )


# CentOS Stream 10 (read 2026-12-04): released 2024-12-12 (the CentOS blog's "Introducing
# CentOS Stream 10"), with GCC 14 and Python 3.12 as python3, as RHEL 10 branched from it. A
# CentOS Stream release ends when its RHEL major leaves full support (Stream 9: 2027-05-31, RHEL
# 9's full-support end); the CentOS project's page gives Stream 10's end as expected in 2030,
# without a day. 2030-01-01 is taken (the earliest day that reading allows, which secondary
# lists also give), so the end-of-life warning comes early rather than late: unconfirmed.
_CENTOS_STREAM10 = Source(
    "https://blog.centos.org/2024/12/introducing-centos-stream-10/ (released 2024-12-12; "
    "GCC 14, Python 3.12) and https://docs.redhat.com/en/documentation/"
    "red_hat_enterprise_linux/10/html/10.0_release_notes/ (RHEL 10, built from it; "
    "read 2026-12-04)",
    confirmed=False,
)
CENTOS_STREAM10_EOL = dt.date(2030, 1, 1)
CENTOS_STREAM10_EOL_SOURCE = (
    "https://www.centos.org/centos-stream/ (end of CentOS Stream 10: expected 2030, no day "
    "given; the earliest day, 2030-01-01, is taken)"
)
# ninja-build lives in CRB on CentOS Stream 10 and Rocky 10 as on EL9 (repository id crb, shipped
# disabled in the base images): the paths below; its version series is not read here, and the
# series check fails the build if the pin is wrong.
_CRB10 = Source(
    "https://dl.rockylinux.org/pub/rocky/10/CRB/x86_64/os/Packages/n/ and "
    "https://mirror.stream.centos.org/10-stream/CRB/x86_64/os/Packages/ (repository id crb; "
    "read 2026-12-04)",
    confirmed=False,
)


# where a distribution the matrix does not know is added (README.md's "Adding a cell")
NEW_DISTRO = "a new distribution is a DISTROS entry in builder/facts/oses.py, with its sources"
DISTROS: dict[str, Distro] = {
    d.key: d
    for d in (
        _el9(
            "centos-stream9",
            "CentOS Stream 9",
            "centos",
            dt.date(2027, 5, 31),
            "https://www.centos.org/centos-stream/",
            ("crb",),
            _CRB,
        ),
        _el9(
            "ubi9",
            "Red Hat Universal Base Image 9",
            "rhel",
            dt.date(2032, 5, 31),
            "https://access.redhat.com/support/policy/updates/errata",
        ),
        _el9(
            "rocky9",
            "Rocky Linux 9",
            "rocky",
            dt.date(2032, 5, 31),
            "https://wiki.rockylinux.org/rocky/version/",
            ("crb",),
            _CRB,
        ),
        _el10(
            "centos-stream10",
            "CentOS Stream 10",
            "centos",
            CENTOS_STREAM10_EOL_SOURCE,
            CENTOS_STREAM10_EOL,
            _CENTOS_STREAM10,
            ("crb",),
            _CRB10,
            read="2026-12-04",
        ),
        _el10("ubi10", "Red Hat Universal Base Image 10", "rhel", _RHEL_LIFECYCLE),
        _el10(
            "rocky10",
            "Rocky Linux 10",
            "rocky",
            "https://wiki.rockylinux.org/rocky/version/",
            optional_repos=("crb",),
            repos_source=_CRB10,
        ),
        Distro(
            "debian12",
            "Debian 12 (bookworm)",
            "debian",
            Version("2.36"),
            (11, 12),
            ("3.11",),
            dt.date(2028, 6, 30),
            _DEBIAN_RELEASES,
            _DEBIAN_RELEASES,
            os_release_id="debian",
            version_id="12",
            codename="bookworm",
        ),
    )
}
# Warn this many days ahead of an OS release's end of life: trainimg policy, not a published
# fact (the end-of-life dates are, each with its source above). Half a year is the time a team
# needs to move its cells (or a host) to the next release; driver branches get the same window
# (builder.facts.drivers.BRANCH_EOL_WARN_DAYS).
EOL_WARN_DAYS = 180

# Where the offline Debian base is fetched from: the project's own redirector for the release
# and -updates suites, and the security archive for -security (https://www.debian.org/mirror/list,
# https://www.debian.org/security/: "deb http://security.debian.org/debian-security ...";
# deb.debian.org serves the same archive through its CDN).
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
GLIBC_SOURCE = _RHEL9_BASE
# Where a family's glibc and system compiler are read (EL10's from RHEL 10's release notes).
_GLIBC_SOURCES = {"el10": _RHEL10_BASE}


def glibc_source(distro: Distro) -> Source:
    """The source of `distro`'s glibc and system gcc."""
    return _GLIBC_SOURCES.get(distro.family, GLIBC_SOURCE)


# EL10's repositories keep the current minor's builds only, as EL9's: the same Rocky policy
# (its `10` tree serves the current minor), and package names and series stay for the life of
# RHEL 10 (python3 stays 3.12, the system gcc 14: RHEL 10's release notes).
EL10_REPOS_KEEP_CURRENT_MINOR = Source(
    "https://wiki.rockylinux.org/rocky/version/ (only the latest minor is maintained) and "
    "https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/10/html/"
    "10.0_release_notes/ (read 2026-12-03)",
    confirmed=False,
)
_REPOS_KEEP = {"el10": EL10_REPOS_KEEP_CURRENT_MINOR}


def repos_keep_source(distro: Distro) -> Source:
    """The source that says `distro`'s repositories keep only the current minor's builds."""
    return _REPOS_KEEP.get(distro.family, EL9_REPOS_KEEP_CURRENT_MINOR)

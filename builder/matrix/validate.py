"""Strict patterns for every matrix value that can reach a Containerfile.

A value is checked against one of these before the model accepts it, so nothing from
matrix.yaml reaches a RUN line (a shell) unless it is plainly a version, a package name, an
image reference, a digest or a URL. Shell metacharacters, whitespace and newlines never match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.facts import driver_version


@dataclass(frozen=True)
class Pattern:
    name: str
    regex: re.Pattern[str]
    example: str

    def matches(self, value: str) -> bool:
        return self.regex.fullmatch(value) is not None


def _p(name: str, regex: str, example: str) -> Pattern:
    return Pattern(name, re.compile(regex), example)


# Keys of mappings in matrix.yaml (os keys, driver keys, cell names).
KEY = _p("key", r"[a-z0-9][a-z0-9._-]{0,62}", "rocky9")
# A release version: digits and dots, optionally a PEP 440 local part (+cu128, +cpu).
VERSION = _p("version", r"[0-9]+(\.[0-9]+){0,3}(\+[a-z0-9]+(\.[a-z0-9]+)*)?", "2.9.1+cu128")
# An NVIDIA driver version and its branch: the one grammar, builder/facts/driver_version.py's.
DRIVER_VERSION = _p(
    "driver version (BRANCH.MINOR[.PATCH], a three-digit branch without a leading zero)",
    driver_version.GRAMMAR,
    driver_version.EXAMPLE,
)
DRIVER_BRANCH = _p(
    "driver branch (three digits, no leading zero)", driver_version.BRANCH_GRAMMAR, "570"
)
# A deb version string: version[-revision], epoch allowed; `.*` pins a series (apt matches it).
PACKAGE_VERSION = _p(
    "package version",
    r"([0-9]+:)?[0-9][A-Za-z0-9.+~_]*(-[A-Za-z0-9.+~_]+)?(\.\*)?",
    "11.5.0-5.el9",
)
# An rpm version as dnf matches it in `name-VERSION` (every release of that upstream version)
# or `name-[EPOCH:]VERSION-RELEASE` (one build). No globs: `shadow-utils-4.9.*` matches no
# EL9 build (the package is 2:4.9-<release>), and hadolint DL3041 counts a glob as unpinned.
RPM_VERSION = _p(
    "rpm version (VERSION or [EPOCH:]VERSION-RELEASE, no globs)",
    r"([0-9]+:)?[0-9][A-Za-z0-9._+]*(-[A-Za-z0-9][A-Za-z0-9._+]*)?",
    "2:4.9-15.el9",
)
# An EL9 OS package's version series: what EL guarantees for the life of the release (python3.12
# stays 3.12, gcc stays 11), while its repositories keep only the current minor's builds.
RPM_SERIES = _p("version series", r"[0-9]+(\.[0-9]+){0,3}", "3.12")
# An NVIDIA package's branch series: every build of one driver branch (cuda-compat-12-8 '570.*'),
# matched by dnf as a glob on the version and checked after install; the lock records the build.
NVIDIA_SERIES = _p("branch series", r"[0-9]+(\.[0-9]+){0,2}\.\*", "570.*")
# An EL9 OS package's one build: [EPOCH:]VERSION-RELEASE (from a dated snapshot mirror).
RPM_BUILD = _p(
    "rpm build ([EPOCH:]VERSION-RELEASE)",
    r"([0-9]+:)?[0-9][A-Za-z0-9._+]*-[A-Za-z0-9][A-Za-z0-9._+]*",
    "2:4.9-15.el9",
)
# rpm / deb / pip package names.
PACKAGE = _p("package name", r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}", "cuda-compat-12-8")
# registry/path:tag (no digest; digests are a separate key).
IMAGE_REF = _p(
    "image reference",
    r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-]{1,2}[a-z0-9]+)*)+"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?",
    "quay.io/centos/centos:stream9",
)
DIGEST = _p("digest", r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64)
SHA256 = _p("sha256 hex", r"[0-9a-f]{64}", "0" * 64)
URL = _p(
    "https URL", r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?", "https://x.org/a"
)
# A mirror's repository: http or https (the packages are signature-checked either way; keys
# and CA certificates by their sha256), no query, no credentials; dnf's own `$basearch` and
# `$releasever` allowed (the template single-quotes the line, so dnf expands them, not a shell).
MIRROR_URL = _p(
    "http(s) URL",
    r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/(?:[A-Za-z0-9._~%/+-]|\$basearch|\$releasever)*)?",
    "https://mirror.example.com/rocky/$releasever/BaseOS/$basearch/os",
)
# A signing key or CA certificate: a mirror URL, or a file the base image already carries.
KEY_URL = _p(
    "http(s) or file:/// URL",
    r"(https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?|file://)/[A-Za-z0-9._~%/+-]+",
    "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9",
)
PYTHON = _p("python version", r"3\.[0-9]{1,2}", "3.12")
GCC = _p("gcc major", r"[0-9]{1,2}", "11")
# Free text that ends up inside a quoted LABEL value: printable, no quotes, no backslash.
TEXT = _p("label text", r"[A-Za-z0-9 .,:()/_+@-]{1,200}", "ML platform team")
# A cell name: what `name_format` produces; also an image tag and a directory name.
CELL_NAME = _p("cell name", r"[a-z0-9][a-z0-9._-]{0,127}", "rocky9-cu128-py3.12-torch2.9.1-runtime")
# A name format: literal name characters and {field} placeholders only.
NAME_FORMAT = _p("name format", r"([a-z0-9._-]|\{[a-z0-9]+\})+", "{os}-{accelerator}-{flavour}")


def format_fields(fmt: str) -> list[str]:
    return re.findall(r"\{([a-z0-9]+)\}", fmt)

"""The dnf parsers (builder/host/parsers/dnf.py) on what dnf 4 prints: repoquery with
preflight's --qf, module list's table, --cacheonly without a cache."""

from __future__ import annotations

import shlex

from builder.host import parsers

DRIVER = "580.95.05"


def test_the_parsers_read_what_dnf_prints() -> None:
    text = (
        "Last metadata expiration check: 0:00:01 ago on Thu 03 Dec 2026.\n"
        "kmod-nvidia-580.95.05-5.14.0-570.12.1 3:580.95.05-2.el9_6.x86_64 cuda-rhel9-x86_64\n"
        "dkms 0:3.1.5-1.el9.noarch epel\n"
        "garbage\n"
    )
    got = parsers.dnf_repoquery(text)
    assert [(a.name, a.version, a.release, a.arch, a.repo) for a in got] == [
        ("kmod-nvidia-580.95.05-5.14.0-570.12.1", DRIVER, "2.el9_6", "x86_64", "cuda-rhel9-x86_64"),
        ("dkms", "3.1.5", "1.el9", "noarch", "epel"),
    ]
    listing = (
        "cuda-rhel9-x86_64\nName          Stream         Profiles  Summary\n"
        "nvidia-driver latest-dkms [d] default [d] Nvidia driver\n"
        "nvidia-driver 580-dkms [e]    default   Nvidia driver\n"
        "nvidia-driver 580-dkms        default   Nvidia driver\n\n"
        "Hint: [d]efault, [e]nabled, [x]disabled, [i]nstalled\n"
    )
    assert parsers.dnf_module_streams(listing, "nvidia-driver") == ["latest-dkms", "580-dkms"]
    assert parsers.dnf_no_cache("Error: Cache-only enabled but no cache for 'cuda'\n")
    assert not parsers.dnf_no_cache("Error: Failed to download metadata for repo 'cuda'\n")
    assert shlex.split(parsers.DNF_REPOQUERY_QF)[0] == "%{name}"


def test_what_install_assumeno_said() -> None:
    assert parsers.dnf_assumeno(1, "Operation aborted.\n").status == "resolves"
    assert parsers.dnf_assumeno(0, "Nothing to do.\n").status == "resolves"
    fails = parsers.dnf_assumeno(
        1, "Error: Unable to find a match: kmod-nvidia-580.95.05-5.14.0-570.17.1\n"
    )
    assert fails.status == "fails" and "Unable to find a match" in fails.detail
    root = parsers.dnf_assumeno(1, "Error: This command has to be run with superuser privileges")
    assert root.status == "unknown" and "root" in root.detail

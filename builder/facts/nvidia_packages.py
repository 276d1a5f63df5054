"""NVIDIA's driver packages on EL, by name: what `preflight --repos` asks the host's dnf for.

A driver upgrade installs the userspace driver and one kernel module for every kernel that
boots: either a precompiled kmod built for exactly that kernel, or a DKMS package that builds
the module at install time from that kernel's kernel-devel (dkms itself comes from EPEL). The
names below are NVIDIA's; each carries its source. `builder/preflight` only reads them here.
"""

from __future__ import annotations

import re

from builder.facts.sources import DRIVER_INSTALL_GUIDE, Source

# The userspace driver (Epoch 3 in NVIDIA's CUDA repository; the version is the driver's).
DRIVER_PACKAGE = "nvidia-driver"
DRIVER_PACKAGE_SOURCE = Source(
    f"{DRIVER_INSTALL_GUIDE.ref}; https://github.com/NVIDIA/yum-packaging-nvidia-driver (README)"
)

# Precompiled kmods: Name kmod-nvidia-<driver>-<kernel version>-<kernel release without the
# dist tag>, Version <driver>, Release 2<kernel dist>, Epoch 3; Provides nvidia-kmod =
# 3:<driver> and kernel-modules = <kernel>; Requires (kernel = <kernel> if kernel). The open
# flavour is named kmod-nvidia-open-<driver>-<kernel>-... (DISTROS.md: RHEL's build).
PRECOMPILED_KMOD = {
    "proprietary": "kmod-nvidia-{driver}-{kernel}",
    "open": "kmod-nvidia-open-{driver}-{kernel}",
}
PRECOMPILED_KMOD_SOURCE = Source(
    "https://github.com/NVIDIA/yum-packaging-precompiled-kmod (kmod-nvidia.spec: Name, "
    "Provides nvidia-kmod; DISTROS.md: kmod-nvidia-open-<driver>-<kernel>)"
)

# DKMS kmods (the same nvidia-kmod provide); they require dkms, which EL takes from EPEL, and
# build against /usr/src/kernels/<kernel>: kernel-devel-<kernel> must be installable.
DKMS_KMOD = {"proprietary": "kmod-nvidia-latest-dkms", "open": "kmod-nvidia-open-dkms"}
DKMS_PACKAGE = "dkms"
KERNEL_DEVEL = "kernel-devel"
DKMS_KMOD_SOURCE = Source(
    f"{DRIVER_INSTALL_GUIDE.ref} (RHEL 9: EPEL for dkms, kernel-devel-$(uname -r)); "
    "https://github.com/NVIDIA/yum-packaging-precompiled-kmod (kmod-nvidia.spec: Conflicts "
    "kmod-nvidia-latest-dkms)"
)

# The dnf module NVIDIA's EL repositories publish the driver in, and its streams per branch:
# <branch> (precompiled kmods), <branch>-dkms, <branch>-open (open modules, DKMS).
MODULE = "nvidia-driver"
MODULE_STREAMS = ("{branch}", "{branch}-dkms", "{branch}-open")
STREAMS_SOURCE = Source(
    "https://github.com/NVIDIA/yum-packaging-nvidia-driver (README: streams XXX, XXX-dkms, "
    "latest, latest-dkms); "
    "https://developer.nvidia.com/blog/streamlining-nvidia-driver-deployment-on-rhel-8-with-"
    "modularity-streams/"
)

# An EL kernel release as `uname -r` prints it: <version>-<release><dist>.<arch>, e.g.
# 5.14.0-570.12.1.el9_6.x86_64; the kmod's name carries the part before the dist tag. A
# variant (`...x86_64+debug`, an RT release `...rt14.296.el9_2`) is not one: its devel package
# is another (kernel-debug-devel, kernel-rt-devel), so it is never asked about by this name.
_EL_KERNEL = re.compile(
    r"(?P<base>\d+\.\d+\.\d+-\d+(?:\.\d+)*)\.(?P<dist>el\d+(?:_\d+)?)\.(?P<arch>x86_64|aarch64)"
)


def kernel_base(kernel: str) -> str | None:
    """`5.14.0-570.12.1` of `5.14.0-570.12.1.el9_6.x86_64`; None for anything that is not an
    EL kernel release (a value that is not one is never put on a dnf command line)."""
    m = _EL_KERNEL.fullmatch(kernel)
    return m["base"] if m else None


def module_streams(branch: int) -> tuple[str, ...]:
    """The nvidia-driver streams a branch is published in."""
    return tuple(s.format(branch=branch) for s in MODULE_STREAMS)

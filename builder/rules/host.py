"""Host facts the driver-upgrade preflight applies: container stack minimums, where the CDI spec
and the DKMS signing key live, what the kernel module and NVML report, the host OS lifecycles.

Each fact carries its source; `builder/preflight` only reads them here and never restates one.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from packaging.version import Version

from builder.rules.oses import DISTROS
from builder.rules.sources import DRIVER_INSTALL_GUIDE, Source

# --- container stack -----------------------------------------------------------------------
CDI_SUPPORT_DOC = Source(
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"
)
# `nvidia-ctk cdi generate` (and with it CDI) first shipped in nvidia-container-toolkit 1.12.0.
CDI_MIN_TOOLKIT = Version("1.12.0")
CDI_MIN_TOOLKIT_SOURCE = Source(f"{CDI_SUPPORT_DOC.ref}; toolkit CHANGELOG 1.12.0")
# 1.18.0 adds nvidia-cdi-refresh.{path,service}: the spec is rewritten when the module changes.
CDI_REFRESH_TOOLKIT = Version("1.18.0")
CDI_REFRESH_UNIT = "nvidia-cdi-refresh.path"
CDI_REFRESH_SOURCE = Source(
    "NVIDIA/nvidia-container-toolkit@d34b3046:deployments/systemd/nvidia-cdi-refresh.path"
)
# Podman resolves `--device nvidia.com/gpu=...` natively from 4.1.0.
PODMAN_CDI_MIN = Version("4.1.0")
PODMAN_CDI_SOURCE = Source("https://github.com/NVIDIA/nvidia-container-toolkit/issues/63")
# Where `nvidia-ctk cdi generate` writes (/var/run is tmpfs: cleared at boot).
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_KIND_PREFIX = "nvidia.com/"
# The spec pins driver-versioned files: it goes stale at every driver upgrade, and a container
# start then fails with "error stat'ing file .../libEGL_nvidia.so.<old>".
CDI_STALE_SOURCE = Source(
    "NVIDIA/nvidia-container-toolkit@d34b3046:pkg/nvcdi/driver-nvml.go; "
    "https://github.com/containers/podman/issues/23935"
)
# Under CDI nothing checks NVIDIA_REQUIRE_CUDA (only the legacy hook does).
CDI_NO_REQUIRE_SOURCE = Source("https://github.com/NVIDIA/nvidia-container-toolkit/issues/1470")
# SELinux: NVIDIA's podman example runs with --security-opt=label=disable; the alternative is
# the container_use_devices boolean (generic container-selinux practice, not NVIDIA's docs).
SELINUX_SOURCE = Source(f"{CDI_SUPPORT_DOC.ref} (podman example); containers/container-selinux")

# --- kernel module, DKMS, Secure Boot ------------------------------------------------------
# DKMS registers NVIDIA's module as "nvidia-open" (kmod-nvidia-open-dkms before 570.148.08) or
# "nvidia" (the open-gpu-kernel-modules dkms.conf, and kmod-nvidia-open-dkms from 570.148.08).
DKMS_MODULE_NAMES = ("nvidia", "nvidia-open")
DKMS_MODULE_SOURCE = Source(
    "https://github.com/NVIDIA/open-gpu-kernel-modules/pull/567; "
    "https://github.com/awslabs/amazon-eks-ami/pull/2284"
)
# `dkms status` formats (dkms >= 2.8.6 "<m>/<v>, <k>, <a>: <state>"; older "<m>, <v>, <k>, <a>").
DKMS_STATUS_SOURCE = Source("dell/dkms@793fdab5:dkms.in (do_status, do_status_weak)")
# DKMS signs the modules it builds with this key; Secure Boot loads them only once it is
# enrolled with `mokutil --import` (confirmed in MokManager at the next boot).
DKMS_MOK_CERT = "/var/lib/dkms/mok.pub"
DKMS_MOK_SOURCE = Source("dell/dkms@793fdab5:dkms.in l.1233-1238")
# What an unenrolled key looks like at modprobe time (a user's report, not NVIDIA's text).
SECURE_BOOT_REJECT = "Loading of module with unavailable key is rejected"
SECURE_BOOT_REJECT_SOURCE = Source(
    "https://github.com/NVIDIA/yum-packaging-precompiled-kmod/issues/68", confirmed=False
)
# /proc/driver/nvidia/version says "Open Kernel Module" for the open flavour; `modinfo` reports
# license "Dual MIT/GPL" (open) or "NVIDIA" (proprietary).
OPEN_MODULE_MARKER = "Open Kernel Module"
MODULE_LICENSES = {"Dual MIT/GPL": "open", "NVIDIA": "proprietary"}
MODULE_FLAVOUR_SOURCE = Source(
    "https://us.download.nvidia.com/XFree86/Linux-x86_64/515.43.04/README/kernel_open.html"
)
# Kernel headers must match every kernel DKMS builds for (EL9: kernel-devel-matched); a newer
# kernel installed but not yet booted gets a build too.
KERNEL_DEVEL_SOURCE = DRIVER_INSTALL_GUIDE
# nouveau must be blacklisted ("blacklist nouveau" + "options nouveau modeset=0") and unloaded.
NOUVEAU_SOURCE = Source("https://docs.nvidia.com/cuda/cuda-installation-guide-linux/")
MODPROBE_DIRS = ("/etc/modprobe.d", "/usr/lib/modprobe.d", "/run/modprobe.d")
# After a userspace upgrade without a module reload, NVML fails with this until reboot.
NVML_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"
NVML_MISMATCH_SOURCE = Source(
    "https://github.com/negativo17/nvidia-driver/issues/180", confirmed=False
)

# --- services --------------------------------------------------------------------------------
PERSISTENCED_UNIT = "nvidia-persistenced"
PERSISTENCED_SOURCE = Source(
    "https://docs.nvidia.com/deploy/driver-persistence/persistence-daemon.html"
)
# NVSwitch systems: fabric manager must be exactly the driver's version, and active.
FABRICMANAGER_UNIT = "nvidia-fabricmanager"
FABRICMANAGER_PACKAGE = "nvidia-fabricmanager"
FABRICMANAGER_SOURCE = Source(
    f"https://github.com/NVIDIA/yum-packaging-fabric-manager (README); {DRIVER_INSTALL_GUIDE.ref}"
)
# The driver upgrade unloads the module: every process holding a GPU is killed or blocks it.
GPU_PROCESSES_SOURCE = Source(
    "NVIDIA/k8s-driver-manager cmd/driver-manager/main.go (evicts GPU pods before unloading)"
)

# --- free disk -------------------------------------------------------------------------------
# Our policy, not an NVIDIA figure: room for a DKMS build tree and its modules, and for the
# initramfs images dracut rewrites.
FREE_MB: dict[str, int] = {"/var/lib/dkms": 2048, "/usr/src": 1024, "/boot": 300}
FREE_DISK_SOURCE = Source("trainimg policy (DKMS build tree + modules; a new initramfs)", False)

# --- NVML brand -> the string libnvidia-container matches `brand=` against -----------------
# libnvidia-container maps only these NVML brands; every other brand (NVIDIA, NVIDIA RTX,
# Quadro RTX, the virtual ones) reaches the requirement check as "Unknown" (compared without
# case). Keys are nvidia-smi's "Product Brand" spellings, lower-cased.
LIBNVC_BRANDS: dict[str, str] = {
    "quadro": "quadro",
    "tesla": "tesla",
    "nvs": "nvs",
    "grid": "grid",
    "geforce": "geforce",
    "titan": "titan",
}
LIBNVC_BRAND_OTHER = "unknown"
LIBNVC_BRAND_SOURCE = Source(
    "NVIDIA/libnvidia-container@947344949f26:src/driver.c (driver_get_device_brand_1_svc)"
)


def libnvc_brand(product_brand: str) -> str:
    """The brand string libnvidia-container evaluates `brand=` against for an NVML brand."""
    return LIBNVC_BRANDS.get(product_brand.strip().lower(), LIBNVC_BRAND_OTHER)


# --- host operating systems (os-release ID + major version) -------------------------------
@dataclass(frozen=True)
class HostOs:
    ids: tuple[str, ...]  # os-release ID values
    major: str  # VERSION_ID before the first dot
    name: str
    family: str  # el8 | el9 | el10 | debian
    eol: dt.date
    source: Source


_RH_LIFECYCLE = Source("https://access.redhat.com/support/policy/updates/errata", False)
_CENTOS_EOL = Source(
    "https://blog.centos.org/2023/04/end-dates-are-coming-for-centos-stream-8-and-centos-linux-7/"
)
_ALMA = Source("https://wiki.almalinux.org/release-notes/ (follows RHEL)", False)

# EL9 rebuilds follow RHEL 9's maintenance end; the dates for EL9/Debian are the image rules'
# own (builder.rules.oses), read from there so that one date lives in one place.
HOST_OSES: tuple[HostOs, ...] = (
    HostOs(("rhel",), "9", "Red Hat Enterprise Linux 9", "el9", DISTROS["ubi9"].eol, _RH_LIFECYCLE),
    HostOs(
        ("rocky",), "9", "Rocky Linux 9", "el9", DISTROS["rocky9"].eol, DISTROS["rocky9"].eol_source
    ),
    HostOs(("almalinux",), "9", "AlmaLinux 9", "el9", DISTROS["rocky9"].eol, _ALMA),
    HostOs(
        ("centos",),
        "9",
        "CentOS Stream 9",
        "el9",
        DISTROS["centos-stream9"].eol,
        DISTROS["centos-stream9"].eol_source,
    ),
    HostOs(
        ("rhel",), "8", "Red Hat Enterprise Linux 8", "el8", dt.date(2029, 5, 31), _RH_LIFECYCLE
    ),
    HostOs(("centos",), "8", "CentOS Stream 8", "el8", dt.date(2024, 5, 31), _CENTOS_EOL),
    HostOs(("centos",), "7", "CentOS Linux 7", "el7", dt.date(2024, 6, 30), _CENTOS_EOL),
    HostOs(
        ("rhel",), "10", "Red Hat Enterprise Linux 10", "el10", dt.date(2035, 5, 31), _RH_LIFECYCLE
    ),
    HostOs(
        ("centos",),
        "10",
        "CentOS Stream 10",
        "el10",
        dt.date(2030, 1, 1),
        Source("https://wiki.linux-server-admin.com/distributions/centos", False),
    ),
    HostOs(
        ("debian",),
        "12",
        "Debian 12 (bookworm)",
        "debian",
        DISTROS["debian12"].eol,
        DISTROS["debian12"].eol_source,
    ),
)
RPM_FAMILIES = ("el7", "el8", "el9", "el10")


def host_os(os_id: str, version_id: str) -> HostOs | None:
    """The lifecycle entry for an os-release ID/VERSION_ID (ID_LIKE is never used to guess)."""
    major = version_id.split(".", 1)[0]
    return next((o for o in HOST_OSES if os_id in o.ids and o.major == major), None)

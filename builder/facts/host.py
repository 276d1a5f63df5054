"""Host facts the driver-upgrade preflight applies: container stack minimums, where the CDI spec
and the DKMS signing key live, what the kernel module and NVML report, the host OS lifecycles.

Each fact carries its source; `builder/preflight` only reads them here and never restates one.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from packaging.version import Version

from builder.facts.oses import DISTROS
from builder.facts.sources import DRIVER_INSTALL_GUIDE, Source

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
# Where `nvidia-ctk cdi generate` writes (/var/run is tmpfs: cleared at boot). The CDI cache
# reads these in this order, and a later directory has the higher priority: the same device
# kind declared in both resolves to /var/run/cdi's; only specs of equal priority (the same
# directory) conflict. nvidia-cdi-refresh (toolkit >= 1.18) writes /var/run/cdi/nvidia.yaml at
# every boot and module change.
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_RUNTIME_DIR = "/var/run/cdi"  # tmpfs: what is there now is gone after a reboot
CDI_PRIORITY_SOURCE = Source(
    "https://github.com/cncf-tags/container-device-interface (pkg/cdi/cache.go: "
    "resolveConflict; spec-dirs.go: later directories take precedence)"
)
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
# "nvidia" (the open-gpu-kernel-modules dkms.conf, and kmod-nvidia-open-dkms from 570.148.08);
# Debian's and Ubuntu's nvidia-kernel-dkms builds "nvidia-current" (the toolkit's own refresh
# unit looks for `(nvidia|nvidia-current)\.ko`).
DKMS_MODULE_NAMES = ("nvidia", "nvidia-open", "nvidia-current")
DKMS_MODULE_SOURCE = Source(
    "https://github.com/NVIDIA/open-gpu-kernel-modules/pull/567; "
    "https://github.com/awslabs/amazon-eks-ami/pull/2284; "
    "https://salsa.debian.org/nvidia-team/nvidia-graphics-drivers (nvidia-kernel-dkms)"
)
# The kernel headers DKMS builds against, per package family (EL: kernel-devel; Debian and
# Ubuntu: linux-headers-<kernel>).
KERNEL_HEADERS_PACKAGE = {"el": "kernel-devel-{kernel}", "debian": "linux-headers-{kernel}"}
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
# The kernel's PCI inventory: every device's vendor, device and class, readable by any user
# and there without lspci (pciutils) or a loaded driver: the GPU witness beside lspci.
SYS_PCI_DEVICES = "/sys/bus/pci/devices"
SYS_PCI_SOURCE = Source(
    "https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci "
    "(/sys/bus/pci/devices/.../vendor, device, class)"
)
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
# NVSwitch systems: fabric manager must be exactly the driver's version, and active. NVIDIA's
# RHEL repositories package it as nvidia-fabric-manager (older: nvidia-fabricmanager-<branch>)
# beside libnvidia-nscq-<branch>, the NVSwitch query library, which must match the driver too
# (`dnf install nvidia-fabric-manager libnvidia-nscq-580`); the service is still
# nvidia-fabricmanager.
FABRICMANAGER_UNIT = "nvidia-fabricmanager"
FABRICMANAGER_PACKAGES = ("nvidia-fabric-manager", "nvidia-fabricmanager")
FABRICMANAGER_PACKAGE = FABRICMANAGER_PACKAGES[0]
NSCQ_PACKAGE_GLOB = "libnvidia-nscq*"  # libnvidia-nscq-<branch>
FABRICMANAGER_SOURCE = Source(
    f"https://github.com/NVIDIA/yum-packaging-fabric-manager (README); {DRIVER_INSTALL_GUIDE.ref} "
    "(fabric manager: nvidia-fabric-manager, libnvidia-nscq-<branch>)"
)
# The driver upgrade unloads the module: every process holding a GPU is killed or blocks it.
GPU_PROCESSES_SOURCE = Source(
    "NVIDIA/k8s-driver-manager cmd/driver-manager/main.go (evicts GPU pods before unloading)"
)

# --- podman's image store ---------------------------------------------------------------------
# `podman images` creates podman's storage (graphroot, its database) where podman never ran: a
# change to the host. Preflight lists images only where the store already exists: root's
# default graphroot, a rootless user's under $HOME, or the graphroot storage.conf names.
PODMAN_ROOT_STORE = "/var/lib/containers/storage"
PODMAN_USER_STORE = ".local/share/containers/storage"  # below $HOME
PODMAN_STORAGE_CONF = "/etc/containers/storage.conf"
PODMAN_STORE_SOURCE = Source(
    "https://github.com/containers/storage/blob/main/docs/containers-storage.conf.5.md (graphroot)"
)

# --- free disk -------------------------------------------------------------------------------
# Our policy, not an NVIDIA figure: room for a DKMS build tree and its modules, and for the
# initramfs images dracut rewrites.
FREE_MB: dict[str, int] = {"/var/lib/dkms": 2048, "/usr/src": 1024, "/boot": 300}
FREE_DISK_SOURCE = Source("trainimg policy (DKMS build tree + modules; a new initramfs)", False)

# --- NVML brand -> the string libnvidia-container matches `brand=` against -----------------
# libnvidia-container maps only these NVML brands; every other brand (NVIDIA, NVIDIA RTX,
# Quadro RTX, the virtual ones) reaches the requirement check as "Unknown" (compared without
# case). Keys are nvidia-smi's "Product Brand" spellings, lower-cased. Source:
# NVIDIA/libnvidia-container@947344949f26:src/driver.c (driver_get_device_brand_1_svc).
LIBNVC_BRANDS: dict[str, str] = {
    "quadro": "quadro",
    "tesla": "tesla",
    "nvs": "nvs",
    "grid": "grid",
    "geforce": "geforce",
    "titan": "titan",
}
LIBNVC_BRAND_OTHER = "unknown"


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
# own (builder.facts.oses), read from there so that one date lives in one place.
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
        DISTROS["centos-stream10"].eol,
        DISTROS["centos-stream10"].eol_source,
    ),
    # Rocky Linux 10 (read 2026-12-04): os-release ID=rocky, VERSION_ID="10.N" (10.0 released
    # 2025-06-11, 10.1 2025-11-25); kernel 6.12.0-<release>.el10_<minor>, RHEL 10's 6.12 series;
    # supported to 2035-05-31 as RHEL 10 (Rocky's version guide).
    HostOs(
        ("rocky",),
        "10",
        "Rocky Linux 10",
        "el10",
        DISTROS["rocky10"].eol,
        DISTROS["rocky10"].eol_source,
    ),
    HostOs(
        ("debian",),
        "12",
        DISTROS["debian12"].name,
        "debian",
        DISTROS["debian12"].eol,
        DISTROS["debian12"].eol_source,
    ),
)
RPM_FAMILIES = ("el7", "el8", "el9", "el10")

# The package family of a host, from os-release(5) ID and ID_LIKE only (never from which
# programs are installed: Debian ships an `rpm` package, and `dnf` is one apt-get away).
# os-release(5): "ID_LIKE= A space-separated list of operating system identifiers in the same
# syntax as the ID= setting ... closely related to the local operating system" (source:
# builder.facts.oses.OS_RELEASE_SOURCE).
OS_FAMILY_IDS: dict[str, tuple[str, ...]] = {
    "el": ("rhel", "centos", "rocky", "almalinux", "ol", "fedora", "circle", "navylinux"),
    "debian": ("debian", "ubuntu"),
    "suse": ("sles", "opensuse", "suse", "opensuse-leap", "opensuse-tumbleweed"),
}

PACKAGE_TOOLS = {"el": "dnf", "debian": "apt-get", "suse": "zypper"}


def os_family(os_id: str, id_like: str = "") -> str | None:
    """el | debian | suse for an os-release ID (else the first ID_LIKE entry that is known)."""
    for candidate in (os_id, *id_like.split()):
        for family, ids in OS_FAMILY_IDS.items():
            if candidate.lower() in ids:
                return family
    return None


def host_os_lifecycle(os_id: str, version_id: str) -> HostOs | None:
    """The lifecycle entry for an os-release ID/VERSION_ID (ID_LIKE is never used to guess)."""
    major = version_id.split(".", 1)[0]
    return next((o for o in HOST_OSES if os_id in o.ids and o.major == major), None)


# --- what an admin checks before unloading the driver ---------------------------------------
# Modules outside the nvidia stack that hold the nvidia module: the driver cannot unload while
# they are loaded, and the out-of-tree ones are built against one driver version (GDRCopy's
# gdrdrv, GPUDirect Storage's nvidia_fs: rebuild or reinstall them for the new driver);
# nvidia_peermem ships with the driver but needs the host's RDMA stack. NVIDIA's GPU Operator
# unloads them before the driver (k8s-driver-manager; the driver container's module list).
DRIVER_DEPENDENT_MODULES: dict[str, str] = {
    "nvidia_peermem": "ships with the driver; unload it first (GPUDirect RDMA over the host's "
    "MOFED/ib_core)",
    "gdrdrv": "GDRCopy, built out of tree against one driver: reinstall it for the new driver",
    "nvidia_fs": "GPUDirect Storage, built out of tree against one driver: reinstall it for "
    "the new driver",
}
NVIDIA_STACK_MODULES = frozenset({"nvidia_uvm", "nvidia_modeset", "nvidia_drm"})
DRIVER_DEPENDENT_SOURCE = Source(
    "https://github.com/NVIDIA/k8s-driver-manager (cmd/driver-manager/main.go: unloads the "
    "driver's dependents); https://github.com/NVIDIA/gdrcopy; "
    "https://docs.nvidia.com/gpudirect-storage/",
    False,
)
# MIG: GPU and compute instances are not persistent across a driver reload or reboot; the site
# recreates them (e.g. nvidia-mig-parted apply -f config.yaml -c <profile>).
MIG_SOURCE = Source(
    'https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ ("the MIG configuration is not '
    'persistent across reboots"); https://github.com/NVIDIA/mig-parted'
)
# Pending page retirement (pre-Ampere) and row remapping (Ampere+) take effect at the next GPU
# reset; a row-remapping failure means the GPU needs service (DCGM diag / RMA).
MEMORY_ERRORS_SOURCE = Source(
    "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html; "
    "https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html"
)

# --- Xid errors, runfile installs, package pins ----------------------------------------------
# The driver logs GPU faults as "NVRM: Xid (PCI:0000:18:00): 79, pid=..., ..." in the kernel
# log. These codes point at hardware or fabric faults a driver upgrade does not fix.
XID_SOURCE = Source("https://docs.nvidia.com/deploy/xid-errors/index.html")
XID_HARDWARE: dict[int, str] = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
# A GPU fallen off the bus (Xid 79) stays gone until the host is rebooted: no driver change
# brings it back, so preflight judges it broken now, with or without a plan.
XID_GPU_LOST = 79
# What nvidia-smi prints for such a GPU (on stdout, exit 15 or with the other GPUs listed):
# "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error" or "...: GPU is
# lost. Reboot the system to recover this GPU".
GPU_LOST_MARKERS = ("Unable to determine the device handle", "GPU is lost")
GPU_LOST_SOURCE = Source(
    "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/387 (`Unable to determine the "
    "device handle for GPU ...: Unknown Error` after the GPU fell off the bus); "
    "https://github.com/NVIDIA/nvidia-docker/issues/1553; "
    "https://docs.nvidia.com/deploy/xid-errors/index.html (Xid 79)"
)
# A runfile install leaves nvidia-uninstall behind; NVIDIA's guide: remove it before
# installing the driver from packages (the two fight over the same files).
RUNFILE_MARKERS = ("/usr/bin/nvidia-uninstall", "/var/log/nvidia-installer.log")
RUNFILE_SOURCE = Source(
    "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ "
    "(runfile and package installs must not be mixed)",
    False,
)
# dnf pins: the versionlock plugin's list and `exclude=` in dnf.conf keep the driver where it is.
DNF_CONF = "/etc/dnf/dnf.conf"
DNF_VERSIONLOCK = "/etc/dnf/plugins/versionlock.list"
NVIDIA_PACKAGE_PREFIXES = (
    "nvidia",
    "kmod-nvidia",
    "cuda-drivers",
    "libnvidia",
    "xorg-x11-drv-nvidia",
)
DNF_PINS_SOURCE = Source(
    "https://dnf-plugins-core.readthedocs.io/en/latest/versionlock.html; dnf.conf(5) excludepkgs"
)

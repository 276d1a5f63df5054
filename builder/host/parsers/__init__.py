"""Parsers for every output preflight reads from a host (pure: text in, typed facts out), one
module per source: system (os-release, systemd, df), kernel (the module, lsmod, lspci,
modprobe.d, Xid), nvidia_smi, packages (dkms, rpm, dnf pins), dnf (repoquery, module list),
secureboot (mokutil), cdi (nvidia-ctk and its specs), podman; safe_yaml reads YAML.

Each parser accepts exactly what the tool prints (formats noted per function, with where they
come from) and returns None or an empty result for text it does not recognise, never raising
on host output: a host that prints something unexpected gets a finding, not a traceback.
This package re-exports them, so a caller names `parsers.smi_q` without knowing the module.
"""

from __future__ import annotations

from builder.host.parsers.cdi import CdiSpec, cdi_spec, ctk_version, existing_paths, ls_dirs
from builder.host.parsers.dnf import (
    DNF_REPOQUERY_QF,
    Available,
    DnfResolution,
    dnf_assumeno,
    dnf_module_streams,
    dnf_no_cache,
    dnf_repoquery,
)
from builder.host.parsers.kernel import (
    Blacklist,
    KernelModule,
    PciDevices,
    Xid,
    cmdline_subset,
    lsmod,
    lspci_nvidia,
    module_license,
    nouveau_blacklist,
    nvidia_version,
    pci_device_id,
    pci_name,
    proc_modules,
    xid_events,
)
from builder.host.parsers.nvidia_smi import (
    GpuProcess,
    QGpu,
    SmiBanner,
    SmiGpu,
    SmiQuery,
    smi_apps,
    smi_banner,
    smi_gpus,
    smi_q,
)
from builder.host.parsers.packages import (
    DkmsEntry,
    DkmsStatus,
    RpmQuery,
    dkms_status,
    dnf_conf_subset,
    dnf_pins,
    kmod_covers,
    precompiled_kmods,
    rpm_q,
)
from builder.host.parsers.podman import (
    LocalImage,
    images_subset,
    inspect_subset,
    podman_images,
    podman_inspect,
    podman_version,
)
from builder.host.parsers.safe_yaml import safe_load_yaml
from builder.host.parsers.secureboot import mok_list_enrolled, mok_test_key, sb_state
from builder.host.parsers.system import (
    DiskFree,
    OsRelease,
    df_p,
    fm_version,
    getenforce,
    graphroot,
    grubby_default,
    os_release,
    systemctl_show,
)

__all__ = [
    "DNF_REPOQUERY_QF",
    "Available",
    "Blacklist",
    "CdiSpec",
    "DiskFree",
    "DkmsEntry",
    "DkmsStatus",
    "DnfResolution",
    "GpuProcess",
    "KernelModule",
    "LocalImage",
    "OsRelease",
    "PciDevices",
    "QGpu",
    "RpmQuery",
    "SmiBanner",
    "SmiGpu",
    "SmiQuery",
    "Xid",
    "cdi_spec",
    "cmdline_subset",
    "ctk_version",
    "df_p",
    "dkms_status",
    "dnf_assumeno",
    "dnf_conf_subset",
    "dnf_module_streams",
    "dnf_no_cache",
    "dnf_pins",
    "dnf_repoquery",
    "existing_paths",
    "fm_version",
    "getenforce",
    "graphroot",
    "grubby_default",
    "images_subset",
    "inspect_subset",
    "kmod_covers",
    "ls_dirs",
    "lsmod",
    "lspci_nvidia",
    "module_license",
    "mok_list_enrolled",
    "mok_test_key",
    "nouveau_blacklist",
    "nvidia_version",
    "os_release",
    "pci_device_id",
    "pci_name",
    "podman_images",
    "podman_inspect",
    "podman_version",
    "precompiled_kmods",
    "proc_modules",
    "rpm_q",
    "safe_load_yaml",
    "sb_state",
    "smi_apps",
    "smi_banner",
    "smi_gpus",
    "smi_q",
    "systemctl_show",
    "xid_events",
]

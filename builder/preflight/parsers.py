"""Parsers for every output preflight reads from a host (pure: text in, typed facts out).

Each parser accepts exactly what the tool prints (formats noted per function, with where they
come from) and returns None or an empty result for text it does not recognise, never raising
on host output: a host that prints something unexpected gets a finding, not a traceback.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

from builder.facts import host as host_rules

# --- /etc/os-release -------------------------------------------------------------------------


@dataclass(frozen=True)
class OsRelease:
    id: str
    version_id: str
    pretty_name: str
    id_like: str = ""


_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present


def safe_load_yaml(text: str) -> Any:
    """yaml.safe_load, through libyaml's C loader when PyYAML has it (several times faster on
    CDI specs and records; the same safe subset)."""
    return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a SafeLoader


def os_release(text: str) -> OsRelease | None:
    """os-release(5): KEY=value lines, values optionally shell-quoted."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        try:
            words = shlex.split(raw)
        except ValueError:
            words = [raw.strip("\"'")]
        values[key.strip()] = words[0] if words else ""
    if "ID" not in values:
        return None
    return OsRelease(
        values["ID"].lower(),
        values.get("VERSION_ID", ""),
        values.get("PRETTY_NAME", values.get("NAME", values["ID"])),
        values.get("ID_LIKE", ""),
    )


# --- /proc/driver/nvidia/version ------------------------------------------------------------
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (...)"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.07  Sat Feb 17 22:55:48 UTC 2024"
_NVRM = re.compile(
    r"NVRM version:\s+NVIDIA UNIX (?P<desc>.*?Kernel Module(?: for [\w-]+)?)\s+"
    r"(?P<version>[0-9]+(?:\.[0-9]+){1,3})\b"
)


@dataclass(frozen=True)
class KernelModule:
    version: str
    flavour: str  # open | proprietary
    line: str


def nvidia_version(text: str) -> KernelModule | None:
    m = _NVRM.search(text)
    if m is None:
        return None
    flavour = "open" if host_rules.OPEN_MODULE_MARKER in m["desc"] else "proprietary"
    return KernelModule(m["version"], flavour, text.splitlines()[0].strip())


def module_license(text: str) -> str | None:
    """`modinfo -F license nvidia` -> open | proprietary (None when unknown)."""
    return host_rules.MODULE_LICENSES.get(text.strip())


# --- nvidia-smi -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmiGpu:
    index: int
    uuid: str
    name: str
    compute_cap: tuple[int, int] | None
    driver: str
    bus_id: str
    persistence: str


def _cc(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
    return (int(m[1]), int(m[2])) if m else None


def smi_gpus(text: str) -> list[SmiGpu]:
    """`nvidia-smi --query-gpu=index,uuid,name,compute_cap,driver_version,pci.bus_id,
    persistence_mode --format=csv,noheader`: one ", "-separated line per GPU."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 7 or not parts[0].isdigit():
            continue
        name = ", ".join(parts[2:-4])  # a name with a comma keeps it
        cc, driver, bus, persistence = parts[-4:]
        gpus.append(SmiGpu(int(parts[0]), parts[1], name, _cc(cc), driver, bus, persistence))
    return gpus


@dataclass(frozen=True)
class QGpu:
    bus_id: str
    product_name: str = ""
    brand: str = ""
    architecture: str = ""
    fabric_state: str = ""
    mig_current: str = ""  # "MIG Mode/Current": Enabled | Disabled | N/A
    mig_pending: str = ""
    retired_pending: str = ""  # "Retired Pages/Pending Page Blacklist" (pre-Ampere): Yes | No
    remap_pending: str = ""  # "Remapped Rows/Pending" (Ampere+): Yes | No
    remap_failure: str = ""  # "Remapped Rows/Remapping Failure Occurred"


@dataclass(frozen=True)
class SmiQuery:
    driver: str
    cuda: str
    gpus: tuple[QGpu, ...]


def smi_q(text: str) -> SmiQuery | None:
    """`nvidia-smi -q`: "Key : value" lines nested by indentation; one "GPU <bus id>" block per
    device. Reads the header versions and, per GPU, Product Name/Brand/Architecture and the
    Fabric State (NVSwitch systems report it; others print N/A)."""
    header: dict[str, str] = {}
    gpus: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        gpu = re.fullmatch(r"GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)", line)
        if gpu and indent == 0:
            gpus.append({"bus_id": gpu[1]})
            stack = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, sep, value = line.partition(":")
        if not sep:  # a section heading ("Fabric", "MIG Mode"): its keys are indented below
            stack.append((indent, line))
            continue
        path = "/".join([*(s for _, s in stack), key.strip()])
        (gpus[-1] if gpus else header)[path] = value.strip()
    if "Driver Version" not in header and not gpus:
        return None
    return SmiQuery(
        header.get("Driver Version", ""),
        header.get("CUDA Version", ""),
        tuple(
            QGpu(
                g["bus_id"],
                g.get("Product Name", ""),
                g.get("Product Brand", ""),
                g.get("Product Architecture", ""),
                g.get("Fabric/State", ""),
                g.get("MIG Mode/Current", ""),
                g.get("MIG Mode/Pending", ""),
                g.get("Retired Pages/Pending Page Blacklist", "")
                or g.get("Retired Pages/Pending Page Retirement", ""),
                g.get("Remapped Rows/Pending", ""),
                g.get("Remapped Rows/Remapping Failure Occurred", ""),
            )
            for g in gpus
        ),
    )


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    memory: str
    gpu_uuid: str


def smi_apps(text: str) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,
    noheader`; prints "No running processes found" when there are none."""
    apps = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        apps.append(GpuProcess(int(parts[0]), ", ".join(parts[1:-2]), parts[-2], parts[-1]))
    return apps


# --- dkms status ------------------------------------------------------------------------------
# dkms >= 2.8.6: "<module>/<version>, <kernel>, <arch>: <state>[ (<warning>)...]" and
# "<module>/<version>: added|broken"; older: "<module>, <version>, <kernel>, <arch>: <state>".
# Weak installs: "... : installed-weak from <kernel>". (dell/dkms dkms.in do_status.)
_DKMS_NEW = re.compile(
    r"(?P<module>[^/,\s]+)/(?P<version>[^,\s]+)(?:, (?P<kernel>[^,\s]+), (?P<arch>[^:\s]+))?"
    r": (?P<state>.+)"
)
_DKMS_OLD = re.compile(
    r"(?P<module>[^/,\s]+), (?P<version>[^,\s]+)(?:, (?P<kernel>[^,\s]+), (?P<arch>[^:\s]+))?"
    r": (?P<state>.+)"
)


@dataclass(frozen=True)
class DkmsEntry:
    module: str
    version: str
    kernel: str | None
    arch: str | None
    state: str  # installed | built | added | broken | installed-weak
    weak_from: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DkmsStatus:
    entries: tuple[DkmsEntry, ...]
    unparsed: tuple[str, ...] = ()


def dkms_status(text: str) -> DkmsStatus:
    entries, unparsed = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = _DKMS_NEW.fullmatch(line) or _DKMS_OLD.fullmatch(line)
        if m is None:
            unparsed.append(line)
            continue
        state_text = m["state"]
        warnings = tuple(re.findall(r"\(([^)]*)\)", state_text))
        state_text = re.sub(r"\s*\([^)]*\)", "", state_text).strip()
        weak = re.fullmatch(r"installed-weak from (\S+)", state_text)
        entries.append(
            DkmsEntry(
                m["module"],
                m["version"],
                m["kernel"],
                m["arch"],
                "installed-weak" if weak else state_text,
                weak[1] if weak else None,
                warnings,
            )
        )
    return DkmsStatus(tuple(entries), tuple(unparsed))


# --- mokutil ----------------------------------------------------------------------------------


def sb_state(text: str) -> str | None:
    """`mokutil --sb-state`: "SecureBoot enabled|disabled"; "This system doesn't support Secure
    Boot" / "EFI variables are not supported on this system" on legacy BIOS."""
    low = text.lower()
    if "secureboot enabled" in low:
        return "enabled"
    if "secureboot disabled" in low:
        return "disabled"
    if "not supported" in low or "doesn't support" in low:
        return "unsupported"
    return None


def mok_test_key(text: str) -> str | None:
    """`mokutil --test-key KEY`: "KEY is already enrolled", "... is not enrolled", "... is
    already in the enrollment request" (enrolment pending the next boot)."""
    low = text.lower()
    if "is not enrolled" in low:
        return "not-enrolled"
    if "enrollment request" in low:
        return "pending"
    if "already enrolled" in low or "built-in trusted keyring" in low:
        return "enrolled"
    return None


def mok_list_enrolled(text: str) -> list[str]:
    """`mokutil --list-enrolled`: one "[key N]" block per key; returns each Subject line."""
    return [m.strip() for m in re.findall(r"Subject:\s*(.+)", text)]


# --- versions of tools ------------------------------------------------------------------------


def ctk_version(text: str) -> str | None:
    """`nvidia-ctk --version`: "NVIDIA Container Toolkit CLI version 1.17.8\\ncommit: ..."."""
    m = re.search(r"version\s+v?(\d+\.\d+\.\d+(?:[-~][\w.]+)?)", text)
    return m[1] if m else None


def fm_version(text: str) -> str | None:
    """`nv-fabricmanager --version`: "Fabric Manager version is : 535.161.08"."""
    m = re.search(r"Fabric Manager version is\s*:\s*(\S+)", text)
    return m[1] if m else None


def podman_version(text: str) -> str | None:
    """`podman --version`: "podman version 5.2.2" (EL builds may add "-rhel")."""
    m = re.search(r"podman version (\d+\.\d+\.\d+)", text)
    return m[1] if m else None


def getenforce(text: str) -> str | None:
    word = text.strip().split()[0] if text.strip() else ""
    return word if word in ("Enforcing", "Permissive", "Disabled") else None


def systemctl_show(text: str) -> dict[str, tuple[str, str]]:
    """`systemctl show --property=Id,LoadState,ActiveState,UnitFileState UNIT...`: one block of
    Key=Value lines per unit, blocks separated by a blank line, properties in systemd's order.
    Returns unit (".service" dropped) -> (ActiveState, UnitFileState); a unit systemd does not
    know (LoadState=not-found) gets UnitFileState "not-found"."""
    units: dict[str, tuple[str, str]] = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        unit = props.get("Id", "").removesuffix(".service")
        if not unit:
            continue
        enabled = (
            "not-found" if props.get("LoadState") == "not-found" else props.get("UnitFileState", "")
        )
        units[unit] = (props.get("ActiveState", ""), enabled)
    return units


def first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


# --- kernel: lsmod, modprobe.d, cmdline, grubby, rpm -----------------------------------------


def lsmod(text: str) -> set[str]:
    """`lsmod`: a "Module Size Used by" header, then one module per line."""
    mods = set()
    for line in text.splitlines()[1:]:
        parts = line.split()
        if parts:
            mods.add(parts[0])
    return mods


@dataclass(frozen=True)
class PciDevices:
    gpus: tuple[str, ...]  # display/3D controllers
    nvswitches: tuple[str, ...]  # NVSwitch bridges (class 0680)
    drivers: tuple[tuple[str, str], ...] = ()  # (bus id, "Kernel driver in use") with -k

    def driver_of(self, bus: str) -> str | None:
        """The kernel driver bound to a device ("" when lspci -k named none; None: unknown)."""
        if not self.drivers:
            return None
        return dict(self.drivers).get(bus, "")


def lspci_nvidia(text: str) -> PciDevices:
    """`lspci -nnk -d 10de:`: "41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5
    80GB] [10de:2330] (rev a1)", then indented lines ("Kernel driver in use: nvidia",
    "Kernel modules: nouveau, nvidia"); NVSwitches are "Bridge [0680]" devices. Without -k
    (older recordings) there are no indented lines and no driver is known."""
    gpus, switches, drivers = [], [], []
    current = ""
    seen_k = False
    for line in text.splitlines():
        if line[:1] in (" ", "\t"):
            key, _, value = line.strip().partition(":")
            if key in ("Kernel driver in use", "Kernel modules"):
                seen_k = True
            if key == "Kernel driver in use" and current:
                drivers.append((current, value.strip()))
            continue
        m = re.match(r"(\S+) (.+?) \[(0[0-9a-f]{3})\]: (.+)", line.strip())
        if not m:
            continue
        current = m[1]
        if m[3] in ("0300", "0302"):
            gpus.append(f"{m[1]} {m[4]}")
        elif m[3] == "0680":
            switches.append(f"{m[1]} {m[4]}")
    if seen_k:
        bound = dict(drivers)
        drivers = [(g.split(" ", 1)[0], bound.get(g.split(" ", 1)[0], "")) for g in gpus]
    return PciDevices(tuple(gpus), tuple(switches), tuple(drivers))


def proc_modules(text: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    """/proc/modules: "name size refcount deps state address" per line; deps is "-" or a
    comma-separated list ending in ","; -> name: (refcount, modules using it)."""
    out: dict[str, tuple[int, tuple[str, ...]]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        users = tuple(u for u in parts[3].split(",") if u and u != "-")
        out[parts[0]] = (int(parts[2]) if parts[2].isdigit() else 0, users)
    return out


@dataclass(frozen=True)
class Blacklist:
    blacklisted: bool
    modeset0: bool
    where: tuple[str, ...]


def nouveau_blacklist(files: dict[str, str], cmdline: str = "") -> Blacklist:
    """modprobe.d(5) lines "blacklist nouveau", "install nouveau /bin/false|true" and "options
    nouveau modeset=0", plus the kernel command line's modprobe.blacklist= /
    rd.driver.blacklist= / nouveau.modeset=0."""
    blacklisted, modeset0, where = False, False, []
    for path, text in sorted(files.items()):
        for raw in text.splitlines():
            words = raw.split("#", 1)[0].split()
            if words[:2] == ["blacklist", "nouveau"] or words[:2] == ["install", "nouveau"]:
                blacklisted = True
                where.append(path)
            if words[:2] == ["options", "nouveau"] and "modeset=0" in words[2:]:
                modeset0 = True
    for token in cmdline.split():
        key, _, value = token.partition("=")
        if key in ("modprobe.blacklist", "rd.driver.blacklist") and "nouveau" in value.split(","):
            blacklisted = True
            where.append(f"kernel command line ({key})")
        if token == "nouveau.modeset=0":  # noqa: S105 (a kernel parameter, not a password)
            modeset0 = True
    return Blacklist(blacklisted, modeset0, tuple(dict.fromkeys(where)))


def grubby_default(text: str) -> str | None:
    """`grubby --default-kernel`: "/boot/vmlinuz-5.14.0-503.11.1.el9_5.x86_64"."""
    m = re.search(r"vmlinuz-(\S+)", text)
    return m[1] if m else None


@dataclass(frozen=True)
class RpmQuery:
    installed: dict[str, tuple[str, ...]]  # name -> every installed version-release.arch
    missing: tuple[str, ...]


def rpm_q(text: str) -> RpmQuery:
    """`rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\\n' NAMES...` (and `rpm -qa` with the
    same format); a name that is absent prints "package NAME is not installed"."""
    installed: dict[str, list[str]] = {}
    missing = []
    for line in text.splitlines():
        m = re.fullmatch(r"package (\S+) is not installed", line.strip())
        if m:
            missing.append(m[1])
            continue
        parts = line.split()
        if len(parts) == 2:
            installed.setdefault(parts[0], []).append(parts[1])
    return RpmQuery({k: tuple(v) for k, v in installed.items()}, tuple(missing))


_KMOD = re.compile(
    r"kmod-nvidia-(?:open-)?(?P<driver>\d+\.\d+(?:\.\d+)?)-(?P<kernel>\d+\.\d+\.\d+-[\d.]+)"
)


def precompiled_kmods(query: RpmQuery) -> list[tuple[str, str, str]]:
    """(package, driver, kernel prefix) of NVIDIA's precompiled kmod packages, whose names carry
    both: kmod-nvidia-<driver>-<kernel version>-<kernel release without dist tag>, e.g.
    kmod-nvidia-535.54.03-5.14.0-284.18.1 for kernel 5.14.0-284.18.1.el9_2.x86_64
    (NVIDIA/yum-packaging-precompiled-kmod#45)."""
    out = []
    for name in query.installed:
        m = _KMOD.fullmatch(name)
        if m:
            out.append((name, m["driver"], m["kernel"]))
    return out


def kmod_covers(kernel_prefix: str, kernel: str) -> bool:
    return kernel.startswith(kernel_prefix + ".")


@dataclass(frozen=True)
class DiskFree:
    path: str
    mount: str
    avail_kb: int


def df_p(path: str, text: str) -> DiskFree | None:
    """`df -P -k PATH`: a header, then "Filesystem 1024-blocks Used Available Capacity Mounted"."""
    lines = text.strip().splitlines()
    if len(lines) < 2:
        return None
    parts = lines[-1].split()
    if len(parts) < 6 or not parts[3].isdigit():
        return None
    return DiskFree(path, parts[-1], int(parts[3]))


# --- CDI spec ---------------------------------------------------------------------------------
_VERSIONED_LIB = re.compile(
    r"lib(?:cuda|nvidia-ml|nvidia-ptxjitcompiler)\.so\.(\d+\.\d+(?:\.\d+)?)$"
)


@dataclass(frozen=True)
class CdiSpec:
    path: str
    kind: str
    cdi_version: str
    devices: tuple[str, ...]
    host_paths: tuple[str, ...]
    driver_version: str | None  # the driver the spec was generated for


def cdi_spec(path: str, text: str) -> CdiSpec | str:
    """A CDI spec (YAML or JSON): kind, devices[].name, and every host path its container edits
    name (deviceNodes path/hostPath, mounts hostPath, hooks path). The driver it was generated
    for comes from the enable-cuda-compat hook's --host-driver-version, else from the version
    suffix of libcuda/libnvidia-ml. Returns an error string when it does not parse."""
    try:
        doc = safe_load_yaml(text)
    except yaml.YAMLError as exc:
        return f"{path} does not parse as YAML/JSON: {str(exc).splitlines()[0]}"
    if not isinstance(doc, dict) or "kind" not in doc:
        return f"{path} is not a CDI spec (no `kind`)"
    edits: list[dict[str, Any]] = []
    if isinstance(doc.get("containerEdits"), dict):
        edits.append(doc["containerEdits"])
    devices = []
    if not isinstance(doc.get("devices") or [], list):
        return f"{path}: `devices` is not a list (not a valid CDI spec)"
    for dev in doc.get("devices") or []:
        if isinstance(dev, dict):
            devices.append(str(dev.get("name", "")))
            if isinstance(dev.get("containerEdits"), dict):
                edits.append(dev["containerEdits"])
    paths: list[str] = []
    hook_driver = None
    for e in edits:
        for field_name in ("deviceNodes", "mounts", "hooks"):
            if not isinstance(e.get(field_name) or [], list):
                return f"{path}: containerEdits.{field_name} is not a list (not a valid CDI spec)"
        for node in e.get("deviceNodes") or []:
            if isinstance(node, dict):
                paths.append(str(node.get("hostPath") or node.get("path") or ""))
        for mount in e.get("mounts") or []:
            if isinstance(mount, dict) and mount.get("hostPath"):
                paths.append(str(mount["hostPath"]))
        for n, hook in enumerate(e.get("hooks") or []):
            if not isinstance(hook, dict):
                continue
            if hook.get("path"):
                paths.append(str(hook["path"]))
            args = hook.get("args") or []
            if not isinstance(args, list):
                return (
                    f"{path}: hooks[{n}].args is {args!r}, not a list of strings "
                    "(not a valid CDI spec: podman refuses it)"
                )
            for arg in args:
                m = re.fullmatch(r"--host-driver-version=(\S+)", str(arg))
                if m:
                    hook_driver = m[1]
    versions = Counter(m[1] for p in paths if (m := _VERSIONED_LIB.search(p)))
    driver = hook_driver or (versions.most_common(1)[0][0] if versions else None)
    unique = tuple(dict.fromkeys(p for p in paths if p.startswith("/")))
    return CdiSpec(
        path, str(doc["kind"]), str(doc.get("cdiVersion", "")), tuple(devices), unique, driver
    )


def ls_dirs(text: str, dirs: list[str]) -> dict[str, list[str]]:
    """`ls -1 -- DIR...` with several operands: a "DIR:" header, then one name a line, blank
    lines between directories (GNU ls sorts the operands; missing ones go to stderr)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.endswith(":") and line[:-1] in dirs:
            current = out.setdefault(line[:-1], [])
        elif line.strip() and current is not None:
            current.append(line.strip())
    return out


def existing_paths(text: str) -> set[str]:
    """`ls -1d -- PATH...`: the paths that exist are printed, one per line (errors go to stderr)."""
    return {line.strip() for line in text.splitlines() if line.strip()}


# --- podman images ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalImage:
    id: str
    names: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def podman_images(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """`podman images --format json`: a JSON list of {Id, Names, Labels, ...}; (id, names)."""
    try:
        doc = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    out = []
    for item in doc if isinstance(doc, list) else []:
        if isinstance(item, dict) and isinstance(item.get("Id"), str):
            names = item.get("Names") or item.get("RepoTags") or []
            out.append((item["Id"], tuple(str(n) for n in names)))
    return out


def podman_inspect(text: str) -> list[LocalImage]:
    """`podman image inspect ID...`: a JSON list; Config.Labels and Config.Env per image."""
    try:
        doc = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    out = []
    for item in doc if isinstance(doc, list) else []:
        if not isinstance(item, dict):
            continue
        config = item.get("Config") or {}
        labels = config.get("Labels") or item.get("Labels") or {}
        env = {}
        for pair in config.get("Env") or []:
            key, _, value = str(pair).partition("=")
            env[key] = value
        out.append(
            LocalImage(
                str(item.get("Id", "")),
                tuple(str(n) for n in item.get("RepoTags") or item.get("Names") or []),
                {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
                env,
            )
        )
    return out


@dataclass(frozen=True)
class Xid:
    bus: str
    code: int
    text: str


def xid_events(text: str) -> list[Xid]:
    """Kernel log lines "NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus."."""
    out = []
    for line in text.splitlines():
        m = re.search(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)", line)
        if m:
            out.append(Xid(m[1].lower(), int(m[2]), m[3].strip()))
    return out


def dnf_pins(versionlock: str, dnf_conf: str, prefixes: tuple[str, ...]) -> list[str]:
    """NVIDIA packages pinned by the versionlock list (NEVRA lines, `!` excludes) or by
    `exclude=`/`excludepkgs=` in dnf.conf's [main]."""
    pins = []
    for raw in versionlock.splitlines():
        line = raw.strip().lstrip("!")
        name = re.sub(r"^\d+:", "", line)
        if line and not raw.strip().startswith("#") and name.startswith(prefixes):
            pins.append(f"versionlock: {raw.strip()}")
    section = ""
    for raw in dnf_conf.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "main" and key.strip() in ("exclude", "excludepkgs"):
            for word in re.split(r"[,\s]+", value.strip()):
                if word and word.lstrip("*").startswith(prefixes):
                    pins.append(f"dnf.conf exclude={word}")
    return pins

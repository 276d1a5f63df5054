"""Read a host: run every probe through the allow-list and parse what comes back into HostState.

Only this module talks to the host (through ReadOnlyHost). Probes that depend on an earlier
answer (the CDI spec's paths, the images podman lists) are chained here; everything after
this is pure. A missing command or a failed probe is kept as its Output so a check can say
exactly what was missing.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.host import parsers
from builder.preflight import allowlist
from builder.preflight.host_gpus import merged_gpus
from builder.preflight.host_state import HostState
from builder.preflight.hostio import HostUnreachable, Output, ReadOnlyHost
from builder.preflight.model import UpgradePlan
from builder.preflight.repos_probe import repos_step


def _listing(host: ReadOnlyHost, state: HostState) -> dict[str, list[str]]:
    """Every configuration directory preflight reads (modprobe.d, CDI), in one `ls`."""
    dirs = [*host_rules.MODPROBE_DIRS, *host_rules.CDI_SPEC_DIRS]
    out = state.outputs["ls"] = host.run("ls", "-1", "--", *dirs)
    return parsers.ls_dirs(out.stdout, dirs)


def _exists(host: ReadOnlyHost, paths: list[str]) -> tuple[set[str], Output]:
    found: set[str] = set()
    last = None
    for i in range(0, len(paths), 200):
        last = host.run("ls", "-1d", "--", *paths[i : i + 200])
        found |= parsers.existing_paths(last.stdout)
    assert last is not None
    return found, last


Step = Callable[[ReadOnlyHost, "HostState"], None]


def gather(
    host: ReadOnlyHost, *, images: bool = True, repos: UpgradePlan | None = None
) -> HostState:
    """Every probe, in order; raises HostUnreachable when the first one cannot get through.
    Each step runs isolated: an exception inside one (an odd file, a parser meeting something
    new) is kept as that step's error and the others still run (TRAINIMG_DEBUG=1 raises it).
    With `repos` (--repos), the host's dnf is asked what it offers for that plan's driver."""
    state = HostState(host.name)
    o = state.outputs
    o["uname"] = host.reach()
    state.kernel = (o["uname"].stdout.strip() or None) if o["uname"].ok else None
    for name, step in STEPS:
        if name == "images" and not (images and state.podman_version is not None):
            continue
        _isolated(name, functools.partial(step, host, state), state)
    if repos is not None:  # after the packages and kernels it asks about
        _isolated(REPOS_STEP, lambda: repos_step(host, state, repos), state)
    return state


def _isolated(name: str, run: Callable[[], None], state: HostState) -> None:
    """One step; its exception is kept as that step's error (HostUnreachable goes up)."""
    try:
        run()
    except HostUnreachable:
        raise
    except Exception as exc:
        if os.environ.get("TRAINIMG_DEBUG"):
            raise
        state.errors[name] = f"{type(exc).__name__}: {exc}"


def _os(host: ReadOnlyHost, state: HostState) -> None:
    o = state.outputs
    o["os-release"] = host.read("/etc/os-release")
    state.os = parsers.os_release(o["os-release"].stdout) if o["os-release"].ok else None


def _packages(host: ReadOnlyHost, state: HostState) -> None:
    """rpm only on an EL host: os-release says so (Debian ships an `rpm` too)."""
    o = state.outputs
    if state.family == "el":
        o["rpm"] = host.run("rpm", "-q", "--qf", allowlist.RPM_QF, *sorted(allowlist.RPM_PACKAGES))
    if "rpm" in o and not o["rpm"].missing:
        state.rpm = parsers.rpm_q(o["rpm"].stdout)
        o["rpm-kmods"] = host.run("rpm", "-qa", "--qf", allowlist.RPM_QF, allowlist.RPM_KMOD_GLOB)
        state.kmods = parsers.precompiled_kmods(parsers.rpm_q(o["rpm-kmods"].stdout))
        o["rpm-nscq"] = host.run("rpm", "-qa", "--qf", allowlist.RPM_QF, allowlist.RPM_NSCQ_GLOB)
        if o["rpm-nscq"].ok:
            state.nscq = parsers.rpm_q(o["rpm-nscq"].stdout).installed
    o["grubby"] = host.run("grubby", "--default-kernel")
    state.default_kernel = parsers.grubby_default(o["grubby"].stdout) if o["grubby"].ok else None


def _driver(host: ReadOnlyHost, state: HostState) -> None:
    """The kernel module (loaded and on disk), PCI, then NVML only when the nvidia module is
    loaded: with no module, nvidia-smi can make nvidia-modprobe load it, which is a change."""
    o = state.outputs
    o["proc-modules"] = host.read("/proc/modules")
    state.modules = parsers.proc_modules(o["proc-modules"].stdout) if o["proc-modules"].ok else None
    o["nvrm"] = host.read("/proc/driver/nvidia/version")
    state.module = parsers.nvidia_version(o["nvrm"].stdout) if o["nvrm"].ok else None
    o["sys-module"] = host.read("/sys/module/nvidia/version")
    sysmod = o["sys-module"]
    state.sys_module_version = DriverVersion.parse(sysmod.stdout) if sysmod.ok else None
    o["modinfo"] = host.run("modinfo", "-F", "license", "nvidia")
    state.installed_flavour = (
        parsers.module_license(o["modinfo"].stdout) if o["modinfo"].ok else None
    )
    o["modinfo-version"] = host.run("modinfo", "-F", "version", "nvidia")
    mv = o["modinfo-version"]
    state.installed_module_version = DriverVersion.parse(mv.stdout) if mv.ok else None
    o["lspci"] = host.run("lspci", "-nnk", "-d", "10de:")
    state.pci = parsers.lspci_nvidia(o["lspci"].stdout) if o["lspci"].ok else None
    state.sys_pci = _sys_pci(host, state)
    if not state.nvidia_loaded:
        return
    o["smi"] = host.run(
        "nvidia-smi", f"--query-gpu={allowlist.SMI_GPU_FIELDS}", "--format=csv,noheader"
    )
    if o["smi"].ok:
        state.smi_gpus = parsers.smi_gpus(o["smi"].stdout)
        o["smi-q"] = host.run("nvidia-smi", "-q")
        state.smi_q = parsers.smi_q(o["smi-q"].stdout) if o["smi-q"].ok else None
        o["smi-apps"] = host.run(
            "nvidia-smi",
            f"--query-compute-apps={allowlist.SMI_APP_FIELDS}",
            "--format=csv,noheader",
        )
        state.apps = parsers.smi_apps(o["smi-apps"].stdout) if o["smi-apps"].ok else None


def _sys_pci(host: ReadOnlyHost, state: HostState) -> tuple[parsers.SysPciDevice, ...] | None:
    """The NVIDIA GPUs the kernel's PCI inventory lists, a witness that needs neither lspci nor
    a driver: every device's vendor id first, then the device and class ids of NVIDIA's, each
    in as few `cat` probes as the allow-list's bound allows. None where it cannot be read."""
    directory = host_rules.SYS_PCI_DEVICES
    o = state.outputs
    o["ls-pci"] = host.run("ls", "-1", "--", directory)
    if not o["ls-pci"].ok:
        return None
    buses = parsers.sys_pci_listing(o["ls-pci"].stdout, directory)
    vendors = _sys_attrs(host, state, "vendor", [f"{directory}/{b}/vendor" for b in buses])
    if vendors is None:
        return None
    nvidia = [p.rsplit("/", 2)[-2] for p, v in vendors.items() if v == "0x10de"]
    paths = [f"{directory}/{b}/{attr}" for b in nvidia for attr in ("device", "class")]
    ids = _sys_attrs(host, state, "ids", paths)
    return None if ids is None else parsers.sys_pci_gpus(directory, {**vendors, **ids})


def _sys_attrs(
    host: ReadOnlyHost, state: HostState, what: str, paths: list[str]
) -> dict[str, str] | None:
    """`cat --` of sysfs id files, SYS_PCI_ATTRS_MAX a probe: path -> value (None: one probe
    failed or printed another number of lines than it was given files)."""
    values: dict[str, str] = {}
    for start in range(0, len(paths), allowlist.SYS_PCI_ATTRS_MAX):
        chunk = paths[start : start + allowlist.SYS_PCI_ATTRS_MAX]
        out = state.outputs[f"sys-pci-{what} {start}"] = host.run("cat", "--", *chunk)
        got = parsers.sys_pci_attrs(chunk, out.stdout) if out.ok else None
        if got is None:
            return None
        values.update(got)
    return values


def _gpus(host: ReadOnlyHost, state: HostState) -> None:
    smi_q = state.smi_q.gpus if state.smi_q else ()
    state.gpus = merged_gpus(
        state.smi_gpus, smi_q, state.pci, state.nvidia_loaded, state.sys_pci or ()
    )


def _dkms_secure_boot(host: ReadOnlyHost, state: HostState) -> None:
    o = state.outputs
    o["dkms"] = host.run("dkms", "status")
    state.dkms = parsers.dkms_status(o["dkms"].stdout) if o["dkms"].ok else None
    o["sb-state"] = host.run("mokutil", "--sb-state")
    state.secure_boot = parsers.sb_state(o["sb-state"].stdout + o["sb-state"].stderr)
    if o["sb-state"].missing:
        state.secure_boot = None
    if state.secure_boot == "enabled":
        key, o["mok-key"] = _exists(host, [host_rules.DKMS_MOK_CERT])
        state.mok_key_exists = host_rules.DKMS_MOK_CERT in key
        if state.mok_key_exists:
            o["mok-test"] = host.run("mokutil", "--test-key", host_rules.DKMS_MOK_CERT)
            state.mok_test = parsers.mok_test_key(o["mok-test"].stdout + o["mok-test"].stderr)
        o["mok-list"] = host.run("mokutil", "--list-enrolled")
        state.mok_enrolled = parsers.mok_list_enrolled(o["mok-list"].stdout)


def _nouveau(host: ReadOnlyHost, state: HostState) -> None:
    o = state.outputs
    o["lsmod"] = host.run("lsmod")
    state.lsmod = parsers.lsmod(o["lsmod"].stdout) if o["lsmod"].ok else None
    state.listing = _listing(host, state)
    confs: dict[str, str] = {}
    for directory in host_rules.MODPROBE_DIRS:
        for name in state.listing.get(directory, []):
            if name.endswith(".conf") and allowlist.permitted(("cat", f"{directory}/{name}")):
                out = host.read(f"{directory}/{name}")
                if out.ok:
                    confs[f"{directory}/{name}"] = out.stdout
    o["cmdline"] = host.read("/proc/cmdline")
    state.blacklist = parsers.nouveau_blacklist(
        confs, o["cmdline"].stdout if o["cmdline"].ok else ""
    )


def _services(host: ReadOnlyHost, state: HostState) -> None:
    o = state.outputs
    units = sorted(allowlist.UNITS)
    o["systemctl"] = host.run(
        "systemctl", "show", f"--property={allowlist.SYSTEMD_PROPERTIES}", *units
    )
    if o["systemctl"].ok:
        state.units = parsers.systemctl_show(o["systemctl"].stdout)
    o["fabricmanager"] = host.run("nv-fabricmanager", "--version")
    state.fm_version = parsers.fm_version(o["fabricmanager"].stdout + o["fabricmanager"].stderr)


def _container(host: ReadOnlyHost, state: HostState) -> None:
    o = state.outputs
    o["nvidia-ctk"] = host.run("nvidia-ctk", "--version")
    state.ctk_version = parsers.ctk_version(o["nvidia-ctk"].stdout) if o["nvidia-ctk"].ok else None
    o["podman"] = host.run("podman", "--version")
    state.podman_version = parsers.podman_version(o["podman"].stdout) if o["podman"].ok else None
    o["dockerd"] = host.run("dockerd", "--version")
    state.docker_version = parsers.dockerd_version(o["dockerd"].stdout) if o["dockerd"].ok else None
    o["containerd"] = host.run("containerd", "--version")
    ctrd = o["containerd"]
    state.containerd_version = parsers.containerd_version(ctrd.stdout) if ctrd.ok else None
    o["getenforce"] = host.run("getenforce")
    state.selinux = parsers.getenforce(o["getenforce"].stdout) if o["getenforce"].ok else None


def _admin(host: ReadOnlyHost, state: HostState) -> None:
    """Xid errors of this boot, a runfile install's traces, dnf pins on NVIDIA packages."""
    o = state.outputs
    o["xid"] = host.run(
        "journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic",
        f"--grep={allowlist.XID_PATTERN}",
    )  # fmt: skip
    # journalctl --grep exits 1 when nothing matches
    state.xids = parsers.xid_events(o["xid"].stdout) if o["xid"].rc in (0, 1) else None
    found, o["runfile"] = _exists(host, list(host_rules.RUNFILE_MARKERS))
    state.runfile = sorted(found)
    if state.family == "el":
        texts = []
        for path in (host_rules.DNF_VERSIONLOCK, host_rules.DNF_CONF):
            out = o[f"cat {path}"] = host.read(path)
            texts.append(out.stdout if out.ok else "")
        state.dnf_pins = parsers.dnf_pins(texts[0], texts[1], host_rules.NVIDIA_PACKAGE_PREFIXES)


def _disk_step(host: ReadOnlyHost, state: HostState) -> None:
    state.disk = _disk(host, state)


# (name, step): the name keys HostState.errors; checks.STEP_OF says which checks read which.
# REPOS_STEP runs after them, only with --repos (it needs the plan: repos_probe.repos_step).
REPOS_STEP = "repos"
STEPS: tuple[tuple[str, Step], ...] = (
    ("os", _os),
    ("packages", _packages),
    ("driver", _driver),
    ("gpus", _gpus),
    ("dkms", _dkms_secure_boot),
    ("nouveau", _nouveau),
    ("services", _services),
    ("container", _container),
    ("cdi", lambda host, state: _cdi(host, state, state.listing)),
    ("disk", _disk_step),
    ("admin", _admin),
    ("images", lambda host, state: _images(host, state)),
)


def _disk(host: ReadOnlyHost, state: HostState) -> list[parsers.DiskFree]:
    """Free space where a driver upgrade writes: one `df` when every path exists (one line per
    path, in order), else one per path (df skips a missing one and the order is lost)."""
    paths = sorted(host_rules.FREE_MB)
    out = state.outputs["df"] = host.run("df", "-P", "-k", *paths)
    lines = out.stdout.strip().splitlines()[1:]
    if out.ok and len(lines) == len(paths):
        pairs = [(p, "header\n" + line) for p, line in zip(paths, lines, strict=True)]
    else:
        pairs = []
        for p in paths:
            one = state.outputs[f"df {p}"] = host.run("df", "-P", "-k", p)
            if one.ok:
                pairs.append((p, one.stdout))
    return [d for p, text in pairs if (d := parsers.df_p(p, text)) is not None]


def _cdi(host: ReadOnlyHost, state: HostState, listing: dict[str, list[str]]) -> None:
    for directory in host_rules.CDI_SPEC_DIRS:
        for name in listing.get(directory, []):
            path = f"{directory}/{name}"
            if not allowlist.permitted(("cat", path)):
                continue
            out = state.outputs[f"cat {path}"] = host.read(path)
            if not out.ok:
                state.cdi_errors.append(f"{path}: {out.why()}")
                continue
            spec = parsers.cdi_spec(path, out.stdout)
            if isinstance(spec, str):
                state.cdi_errors.append(spec)
            elif spec.kind.startswith(host_rules.CDI_KIND_PREFIX):
                state.cdi_specs.append(spec)
    for spec in state.cdi_specs:
        paths = [p for p in spec.host_paths if allowlist.permitted(("ls", "-1d", "--", p))]
        if not paths:
            continue
        found, state.outputs[f"exists {spec.path}"] = _exists(host, paths)
        state.cdi_missing[spec.path] = [p for p in paths if p not in found]


def _podman_store(host: ReadOnlyHost, state: HostState) -> str | None:
    """Where this caller's podman keeps its images, if that store exists: `podman images`
    creates it (and its database) where podman never ran, which would change the host."""
    o = state.outputs
    o["id"] = host.run("id", "-u")
    root = o["id"].stdout.strip() == "0" if o["id"].ok else True
    conf = o[f"cat {host_rules.PODMAN_STORAGE_CONF}"] = host.read(host_rules.PODMAN_STORAGE_CONF)
    candidates = [parsers.graphroot(conf.stdout)] if conf.ok and root else []
    if root:
        candidates.append(host_rules.PODMAN_ROOT_STORE)
    else:
        o["home"] = host.run("printenv", "HOME")
        home = o["home"].stdout.strip() if o["home"].ok else ""
        if home.startswith("/"):
            candidates.append(f"{home.rstrip('/')}/{host_rules.PODMAN_USER_STORE}")
    paths = [
        c for c in dict.fromkeys(candidates) if c and allowlist.permitted(("ls", "-1d", "--", c))
    ]
    if not paths:
        return None
    found, o["podman-store"] = _exists(host, paths)
    return next((p for p in paths if p in found), None)


def _images(host: ReadOnlyHost, state: HostState) -> None:
    o = state.outputs
    store = _podman_store(host, state)
    if store is None:
        state.podman_store_note = (
            "local images not listed: podman has no image store for this user here (listing "
            "would create one; preflight only reads)"
        )
        return
    o["podman-images"] = host.run("podman", "images", "--format", "json")
    if not o["podman-images"].ok:
        return
    ids = [i for i, _ in parsers.podman_images(o["podman-images"].stdout)]
    ids = [i for i in dict.fromkeys(ids) if allowlist.permitted(("podman", "image", "inspect", i))]
    for start in range(0, len(ids), 100):
        out = o[f"podman-inspect {start}"] = host.run(
            "podman", "image", "inspect", *ids[start : start + 100]
        )
        if out.ok:
            state.images.extend(parsers.podman_inspect(out.stdout))

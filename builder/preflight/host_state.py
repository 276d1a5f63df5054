"""What preflight read from one host, parsed (HostState): every probe's raw Output, the typed
facts the parsers made of it, and what is derived from them (the running driver, a pending
reboot, the OS family). gather fills it; everything after it is pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.host import parsers
from builder.preflight.host_gpus import HostGpu
from builder.preflight.hostio import Output


@dataclass
class RepoAnswer:
    """What the host's dnf offers for a driver version and the boot kernels (`--repos`)."""

    version: str  # the driver asked for
    kernels: dict[str, str]  # boot kernel -> its role (running, next boot, running + next boot)
    refused: list[str] = field(default_factory=list)  # kernels not EL releases: never asked
    available: list[parsers.Available] = field(default_factory=list)
    streams: list[str] | None = None  # nvidia-driver streams; None: not listed
    cache: str = "cache"  # cache: dnf answered from its metadata cache; refreshed: it refreshed
    query: str = ""  # the outputs key of the repoquery that answered
    timeout_s: int = 0  # the seconds dnf was given
    resolved: dict[str, str] = field(default_factory=dict)  # kernel -> its install's outputs key
    note: str = ""  # why dnf was not (fully) asked


@dataclass
class HostState:
    name: str
    outputs: dict[str, Output] = field(default_factory=dict)
    kernel: str | None = None
    default_kernel: str | None = None
    os: parsers.OsRelease | None = None
    rpm: parsers.RpmQuery | None = None  # None: rpm is not there (not an RPM host)
    kmods: list[tuple[str, str, str]] = field(default_factory=list)
    nscq: dict[str, tuple[str, ...]] = field(default_factory=dict)  # libnvidia-nscq-<branch>
    modules: dict[str, tuple[int, tuple[str, ...]]] | None = None  # /proc/modules
    module: parsers.KernelModule | None = None  # the loaded kernel module
    sys_module_version: DriverVersion | None = None
    installed_flavour: str | None = None  # modinfo license of the module on disk
    installed_module_version: DriverVersion | None = None  # modinfo version of the module on disk
    pci: parsers.PciDevices | None = None  # None: lspci is not there
    # NVIDIA GPUs in /sys/bus/pci/devices (None: unreadable): the witness beside lspci
    sys_pci: tuple[parsers.SysPciDevice, ...] | None = None
    smi_gpus: list[parsers.SmiGpu] = field(default_factory=list)
    smi_q: parsers.SmiQuery | None = None
    gpus: list[HostGpu] = field(default_factory=list)
    apps: list[parsers.GpuProcess] | None = None
    dkms: parsers.DkmsStatus | None = None
    secure_boot: str | None = None
    mok_key_exists: bool | None = None
    mok_test: str | None = None
    mok_enrolled: list[str] = field(default_factory=list)
    lsmod: set[str] | None = None
    blacklist: parsers.Blacklist = field(
        default_factory=lambda: parsers.Blacklist(False, False, ())
    )
    units: dict[str, tuple[str, str]] = field(default_factory=dict)  # (active, unit file state)
    fm_version: DriverVersion | None = None
    ctk_version: str | None = None
    cdi_specs: list[parsers.CdiSpec] = field(default_factory=list)
    cdi_errors: list[str] = field(default_factory=list)
    cdi_missing: dict[str, list[str]] = field(default_factory=dict)  # spec path -> paths
    podman_version: str | None = None
    # the daemons that resolve CDI devices beside podman (None: not installed or unrecognised)
    docker_version: str | None = None
    containerd_version: str | None = None
    selinux: str | None = None
    disk: list[parsers.DiskFree] = field(default_factory=list)
    images: list[parsers.LocalImage] = field(default_factory=list)
    listing: dict[str, list[str]] = field(default_factory=dict)  # modprobe.d and CDI dirs
    xids: list[parsers.Xid] | None = None  # None: the kernel log could not be read
    runfile: list[str] = field(default_factory=list)  # a runfile install's traces that exist
    dnf_pins: list[str] | None = None  # None: not an EL host
    repos: RepoAnswer | None = None  # --repos: what dnf offers (None: not asked)
    errors: dict[str, str] = field(default_factory=dict)  # gather step -> its exception
    podman_store_note: str = ""  # why podman's images were not listed (no store: never ran)

    def out(self, probe: str) -> Output | None:
        return self.outputs.get(probe)

    @property
    def driver(self) -> DriverVersion | None:
        """The running driver: the loaded module's version, else what NVML reports."""
        if self.module is not None:
            return self.module.version
        return self.smi_gpus[0].driver if self.smi_gpus else None

    @property
    def nvml_mismatch(self) -> bool:
        """nvidia-smi says "Driver/library version mismatch": the userspace driver changed under
        a loaded module, and NVML/CUDA fail until the reboot."""
        smi = self.out("smi")
        return smi is not None and "version mismatch" in (smi.stdout + smi.stderr).lower()

    @property
    def nvidia_loaded(self) -> bool:
        """Is the nvidia module loaded? /proc/modules says; when it cannot be read, the
        module's own /proc/driver/nvidia/version (present only while it is loaded) does."""
        if self.modules is not None:
            return "nvidia" in self.modules
        out = self.out("nvrm")
        return out is not None and out.ok

    @property
    def loaded_driver(self) -> DriverVersion | None:
        if self.module is not None:
            return self.module.version
        return self.sys_module_version

    @property
    def userspace_driver(self) -> DriverVersion | None:
        """The installed userspace driver: the nvidia-driver package (EL), else None."""
        pkgs = self.rpm.installed.get("nvidia-driver", ()) if self.rpm else ()
        return DriverVersion.parse(pkgs[-1].split("-")[0]) if pkgs else None

    @property
    def installed_driver(self) -> DriverVersion | None:
        """What the next boot loads: the module on disk for the running kernel, else the
        userspace package's version."""
        return self.installed_module_version or self.userspace_driver

    @property
    def reboot_pending(self) -> bool:
        """Upgraded (or downgraded) on disk but not reloaded: the loaded module is not the
        installed driver."""
        loaded, installed = self.loaded_driver, self.installed_driver
        return bool(loaded and installed and loaded != installed)

    @property
    def next_driver(self) -> DriverVersion | None:
        """The driver after the next boot: the installed one when a reboot is pending."""
        return self.installed_driver if self.reboot_pending else self.driver

    @property
    def family(self) -> str | None:
        """el | debian | suse from /etc/os-release (None: unreadable or unknown)."""
        if self.os is None:
            return None
        return host_rules.os_family(self.os.id, self.os.id_like)

    @property
    def flavour(self) -> str | None:
        """open | proprietary: the loaded module's, else the one installed on disk."""
        return self.module.flavour if self.module is not None else self.installed_flavour

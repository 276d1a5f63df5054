"""The typed matrix: what matrix.yaml says once every value has passed its pattern."""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import Version

from builder.facts.driver_version import DriverVersion
from builder.facts.gpus import Gpu
from builder.facts.oses import Distro

ACCELERATORS = ("cuda", "cpu")
FLAVOURS = ("runtime", "devel")
FP8_BACKENDS = ("torchao", "transformer-engine", "none")
AXES = ("os", "accelerator", "driver", "cuda", "gcc", "python", "torch", "fp8", "flavour")
EXCLUSION_CODES = ("policy", "upstream", "rule", "capacity")


@dataclass(frozen=True)
class Pin:
    """A package pinned to a version: rpm `VERSION` (every release of it) or
    `[EPOCH:]VERSION-RELEASE` (one build), deb `=`; or, for an EL9 OS package, the version
    series EL guarantees (`series`: '3.12', '11'), installed by name and checked after; or, for
    an NVIDIA package, its branch series (`series` and `glob`: '570', installed as
    `name-570.*` and checked after)."""

    name: str
    version: str
    series: bool = False
    glob: bool = False


@dataclass(frozen=True)
class RepoMirror:
    """A site's mirror (or dated snapshot) of an OS's package repositories: it replaces the
    base image's own .repo files. Every package is still signature-checked (gpgcheck=1) against
    `gpgkey`, which the build fetches and checks by its sha256 before importing it."""

    repos: dict[str, str]  # repository id -> baseurl, in matrix order
    gpgkey: str  # http(s):// or file:///etc/pki/rpm-gpg/... (a key the base image carries)
    gpgkey_sha256: str
    ca: str | None = None  # a CA certificate for https baseurls, fetched and sha256-checked
    ca_sha256: str | None = None


@dataclass(frozen=True)
class CudaMirror:
    """A mirror of NVIDIA's CUDA repository for one OS family (its packages are NVIDIA's, so
    its key is NVIDIA's: `gpgkey_sha256` defaults to the matrix's)."""

    repo: str
    gpgkey: str
    gpgkey_sha256: str | None = None
    ca: str | None = None
    ca_sha256: str | None = None


@dataclass(frozen=True)
class Mirrors:
    """matrix.yaml's `mirrors:` (or a `trainimg build --mirrors FILE`): os key -> its mirror,
    OS family -> NVIDIA's repository mirror."""

    oses: dict[str, RepoMirror] = field(default_factory=dict)
    cuda: dict[str, CudaMirror] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.oses or self.cuda)


@dataclass(frozen=True)
class OsSpec:
    key: str
    distro: Distro
    base: str
    digest: str | None
    local: bool  # built here (debootstrap -> podman import), never pulled
    python: dict[str, Pin]  # "3.12" -> python3.12 pin; empty version = preinstalled in base
    gcc: dict[str, tuple[Pin, ...]]  # "11" -> gcc, gcc-c++ pins
    packages: tuple[Pin, ...]  # always installed
    devel_packages: tuple[Pin, ...] = ()  # devel flavour only (make, ninja-build)
    devel_repos: tuple[str, ...] = ()  # repository ids the devel install enables (EL9: crb)
    mirror: RepoMirror | None = None  # the site's mirror of its repositories (matrix mirrors:)

    @property
    def family(self) -> str:
        return self.distro.family

    @property
    def base_ref(self) -> str:
        return f"{self.base}@{self.digest}" if self.digest else self.base


@dataclass(frozen=True)
class DriverSpec:
    key: str
    branch: int
    min_version: DriverVersion
    kernel_module: str  # open | proprietary


@dataclass(frozen=True)
class CudaRepo:
    """NVIDIA's package repository for one OS family, with its signing key's checksum."""

    repo: str
    gpgkey: str
    gpgkey_sha256: str
    runtime: tuple[Pin, ...]
    devel: tuple[Pin, ...]
    ca: str | None = None  # a mirror's CA certificate (matrix mirrors:), sha256-checked
    ca_sha256: str | None = None


@dataclass(frozen=True)
class CudaSpec:
    version: Version
    repos: dict[str, CudaRepo]  # family -> repo


@dataclass(frozen=True)
class Reason:
    code: str
    text: str


@dataclass(frozen=True)
class Exclusion:
    match: dict[str, tuple[str, ...]]
    reason: Reason

    def excludes(self, values: dict[str, str | None]) -> bool:
        return all(values.get(k) in v for k, v in self.match.items())


@dataclass(frozen=True)
class Group:
    name: str
    axes: dict[str, tuple[str, ...]]
    gpus: tuple[Gpu, ...]
    exclude: tuple[Exclusion, ...]


@dataclass(frozen=True)
class Project:
    repository: str
    title: str
    vendor: str
    licenses: str
    source: str
    name_format: str
    default_cell: str  # what `trainimg build` and the demo build without a GPU or registry
    default_gpu_cell: str | None = None  # the demo's cell on a host with a GPU and a registry


@dataclass(frozen=True)
class Matrix:
    path: str
    project: Project
    oses: dict[str, OsSpec]
    drivers: dict[str, DriverSpec]
    cuda: dict[str, CudaSpec]
    python_packages: tuple[Pin, ...]
    groups: tuple[Group, ...]
    mirrors: Mirrors = field(default_factory=Mirrors)  # already applied to oses and cuda
    # key path -> line, for messages about values after loading (rule violations)
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Cell:
    """One image: a point of the matrix with every value resolved."""

    name: str
    group: str
    os: OsSpec
    accelerator: str
    driver: DriverSpec | None
    cuda: CudaSpec | None
    gcc: str
    python: str
    torch: Version  # with its local build tag: 2.9.1+cu128, 2.13.0+cpu
    fp8: str
    flavour: str
    gpus: tuple[Gpu, ...]
    python_packages: tuple[Pin, ...]
    # axis -> key path of the value in matrix.yaml, so a rule violation can name its line
    origin: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    cell_hash: str = ""

    def axis_values(self) -> dict[str, str | None]:
        return {
            "os": self.os.key,
            "accelerator": self.accelerator,
            "driver": self.driver.key if self.driver else None,
            "cuda": str(self.cuda.version) if self.cuda else None,
            "gcc": self.gcc,
            "python": self.python,
            "torch": self.torch.public,
            "fp8": self.fp8,
            "flavour": self.flavour,
        }


@dataclass(frozen=True)
class Excluded:
    """A point of the matrix an exclusion removed, kept so `explain` can say why."""

    name: str
    group: str
    values: dict[str, str | None]
    reason: Reason

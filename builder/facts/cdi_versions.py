"""CDI spec versions: which fields need which `cdiVersion`, and which podman, docker and
containerd release parses which.

A CDI spec can outrun the engine. nvidia-container-toolkit 1.19.1 writes `cdiVersion: 0.7.0`
(it adds `additionalGids` to device edits), and podman resolves devices with the CDI library it
vendors: a library that predates a spec version rejects it ("invalid version") and one that
predates a field rejects the file ("json: unknown field"), so `podman run --device
nvidia.com/gpu=...` fails with "unresolvable CDI devices". Each library release knows the spec
versions up to its own (its `validSpecVersions`); newer libraries still parse older versions.

Read 2026-12-03 from the sources each row names.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from builder.facts.sources import Source

READ = "2026-12-03"

CDI_SPEC_MD = Source(
    "https://github.com/cncf-tags/container-device-interface/blob/05ae4b5b/SPEC.md "
    f"(Released versions table; read {READ})"
)
CDI_VERSION_GO = Source(
    "https://github.com/cncf-tags/container-device-interface/blob/05ae4b5b/specs-go/version.go "
    f"(requiresV040 ... requiresV110; read {READ})"
)


@dataclass(frozen=True)
class SpecVersion:
    """A CDI spec version and the spec fields whose use requires it (JSON names, with where
    they sit), from the CDI library's requirement functions."""

    version: Version
    fields: tuple[str, ...]
    source: Source


# Oldest first. 0.8.0 and 1.0.0 changed only the Go API (no field needs them).
SPEC_VERSIONS: tuple[SpecVersion, ...] = (
    SpecVersion(Version("0.3.0"), (), CDI_SPEC_MD),
    SpecVersion(Version("0.4.0"), ("mounts[].type",), CDI_VERSION_GO),
    SpecVersion(
        Version("0.5.0"),
        ("deviceNodes[].hostPath", "a device name starting with a digit"),
        CDI_VERSION_GO,
    ),
    SpecVersion(
        Version("0.6.0"),
        ("annotations", "devices[].annotations", "a '.' in the kind's class"),
        CDI_VERSION_GO,
    ),
    SpecVersion(Version("0.7.0"), ("intelRdt", "additionalGids"), CDI_VERSION_GO),
    SpecVersion(Version("0.8.0"), (), CDI_SPEC_MD),
    SpecVersion(Version("1.0.0"), (), CDI_SPEC_MD),
    SpecVersion(
        Version("1.1.0"),
        ("netDevices", "intelRdt.schemata", "intelRdt.enableMonitoring"),
        CDI_VERSION_GO,
    ),
)
KNOWN_SPEC_VERSIONS = frozenset(sv.version for sv in SPEC_VERSIONS)


def _podman_go_mod(tag: str, lib: str) -> Source:
    return Source(
        f"https://github.com/containers/podman/blob/{tag}/go.mod "
        f"(container-device-interface {lib}; read {READ})"
    )


def _lib_version_go(tag: str) -> Source:
    return Source(
        f"https://github.com/cncf-tags/container-device-interface/tree/{tag} "
        f"(the newest spec version its version.go knows; read {READ})"
    )


@dataclass(frozen=True)
class EngineCdi:
    """From `engine` `min_version` on, the vendored CDI library `library` parses spec versions
    up to `newest_spec`; with `refuses_older_than_fields`, it also refuses a spec whose
    `cdiVersion` is older than a field it uses needs (its validateVersion compares the two)."""

    engine: str
    min_version: Version
    library: str
    newest_spec: Version
    sources: tuple[Source, ...]
    refuses_older_than_fields: bool = True


# Measured on this project's Debian 12 machine (podman 4.3.1+ds1-8+deb12u1, `podman run
# --device nvidia.com/gpu=0` of an image of one static binary, the spec alone in a private /run/cdi
# under `unshare --mount`: podman 4.3 reads no other spec directory), by
# tests/preflight/test_cdi_podman.py: a 0.5.0 spec's device runs; 0.6.0 and 0.7.0 specs, and an
# `additionalGids` edit, fail ("unresolvable CDI devices": the spec is skipped); a 0.4.0 spec
# that uses a 0.5.0 name form (a device named "0") runs: this library does not refuse a spec
# older than its fields (row 4.3.0; 4.1.0's older library is taken to behave alike).
DEBIAN12_PODMAN_MEASURED = Source(
    "measured: Debian 12 podman 4.3.1+ds1-8+deb12u1, CDI 0.4.0-0.7.0 specs "
    f"(tests/preflight/test_cdi_podman.py, {READ})"
)
# Oldest first: the first podman release of each CDI library generation (podman's go.mod at
# that tag; every later release vendors the same or a newer library). 4.0.x vendored a
# pre-release snapshot and has no native `--device` CDI (PODMAN_CDI_MIN in host.py).
PODMAN_CDI: tuple[EngineCdi, ...] = (
    EngineCdi("podman", Version("4.1.0"), "v0.4.0", Version("0.4.0"),
              (_podman_go_mod("v4.1.0", "v0.4.0"), _lib_version_go("v0.4.0")), False),
    EngineCdi("podman", Version("4.3.0"), "v0.5.2", Version("0.5.0"),
              (_podman_go_mod("v4.3.0", "v0.5.2"), _lib_version_go("v0.5.2"),
               DEBIAN12_PODMAN_MEASURED), False),
    EngineCdi("podman", Version("4.7.0"), "v0.6.1", Version("0.6.0"),
              (_podman_go_mod("v4.7.0", "v0.6.1"), _lib_version_go("v0.6.1"))),
    EngineCdi("podman", Version("5.1.0"), "v0.7.2", Version("0.7.0"),
              (_podman_go_mod("v5.1.0", "v0.7.2"), _lib_version_go("v0.7.2"))),
    EngineCdi("podman", Version("5.2.0"), "v0.8.0", Version("0.8.0"),
              (_podman_go_mod("v5.2.0", "v0.8.0"), _lib_version_go("v0.8.0"))),
    EngineCdi("podman", Version("5.5.0"), "v1.0.1", Version("1.0.0"),
              (_podman_go_mod("v5.5.0", "v1.0.1"), _lib_version_go("v1.0.1"))),
)  # fmt: skip
# CDI library v1.1.0 (spec 1.1.0, 2025-12-10): no podman release up to v5.8.2 (2026-04-13)
# vendors it, so no podman is known to parse a 1.1.0 spec.
PODMAN_NEWEST_READ = Version("5.8.2")


def _go_mod(repo: str, tag: str, file: str, lib: str) -> Source:
    return Source(
        f"https://github.com/{repo}/blob/{tag}/{file} "
        f"(container-device-interface {lib}; read {READ})"
    )


# docker (moby): dockerd resolves `--device nvidia.com/gpu=...` through CDI from 25.0.0 with
# `"features": {"cdi": true}` in daemon.json (experimental), on unless `"cdi": false` from
# 28.2.0 (cmd/dockerd/daemon.go cdiEnabled). The library is moby's vendor.mod (go.mod from
# docker-v29) at each release tag, read from a clone of github.com/moby/moby. 25.0.17 alone
# backports v0.8.1 (26.0.0 is back on v0.6.2): the table keeps 25.0.x at 0.6.0, which
# understates that one release.
DOCKER_CDI_MIN = Version("25.0.0")
DOCKER_CDI_DEFAULT = Version("28.2.0")
DOCKER_CDI_SOURCE = Source(
    "https://github.com/moby/moby/blob/v25.0.0/cmd/dockerd/daemon.go (features.cdi); "
    f"https://github.com/moby/moby/blob/v28.2.0/cmd/dockerd/daemon.go (cdiEnabled); read {READ}"
)
DOCKER_CDI: tuple[EngineCdi, ...] = (
    EngineCdi("docker", Version("25.0.0"), "v0.6.2", Version("0.6.0"),
              (_go_mod("moby/moby", "v25.0.0", "vendor.mod", "v0.6.2"), _lib_version_go("v0.6.2"))),
    EngineCdi("docker", Version("26.1.0"), "v0.7.1", Version("0.7.0"),
              (_go_mod("moby/moby", "v26.1.0", "vendor.mod", "v0.7.1"), _lib_version_go("v0.7.1"))),
    EngineCdi("docker", Version("27.4.0"), "v0.8.0", Version("0.8.0"),
              (_go_mod("moby/moby", "v27.4.0", "vendor.mod", "v0.8.0"), _lib_version_go("v0.8.0"))),
    EngineCdi("docker", Version("28.1.0"), "v1.0.1", Version("1.0.0"),
              (_go_mod("moby/moby", "v28.1.0", "vendor.mod", "v1.0.1"), _lib_version_go("v1.0.1"))),
    EngineCdi("docker", Version("29.2.0"), "v1.1.0", Version("1.1.0"),
              (_go_mod("moby/moby", "docker-v29.2.0", "go.mod", "v1.1.0"),
               _lib_version_go("v1.1.0"))),
)  # fmt: skip
DOCKER_NEWEST_READ = Version("29.5.1")
# containerd: the CRI plugin resolves CDI devices from 1.7.0 with `enable_cdi = true` (default
# false), on by default from 2.0.0 (pkg/cri/config/config_unix.go at v1.7.0,
# internal/cri/config/config_unix.go at v2.0.0: EnableCDI). The library is containerd's go.mod
# at each release tag (github.com/containerd/containerd): the 1.7 and 2.x lines each moved up
# in patch releases, in one order of spec versions (1.7.27 and 2.0.0 both parse 0.8.0).
# v0.5.4 is taken to behave as podman's measured v0.5.2 (it does not refuse a spec older than
# its fields); not measured here.
CONTAINERD_CDI_MIN = Version("1.7.0")
CONTAINERD_CDI_DEFAULT = Version("2.0.0")
CONTAINERD_CDI_SOURCE = Source(
    "https://github.com/containerd/containerd/blob/v1.7.0/pkg/cri/config/config_unix.go "
    "(EnableCDI false); https://github.com/containerd/containerd/blob/v2.0.0/internal/cri/"
    f"config/config_unix.go (EnableCDI true); read {READ}"
)
_CTRD = "containerd/containerd"
CONTAINERD_CDI: tuple[EngineCdi, ...] = (
    EngineCdi("containerd", Version("1.7.0"), "v0.5.4", Version("0.5.0"),
              (_go_mod(_CTRD, "v1.7.0", "go.mod", "v0.5.4"), _lib_version_go("v0.5.4")), False),
    EngineCdi("containerd", Version("1.7.12"), "v0.6.1", Version("0.6.0"),
              (_go_mod(_CTRD, "v1.7.12", "go.mod", "v0.6.1"), _lib_version_go("v0.6.1"))),
    EngineCdi("containerd", Version("1.7.16"), "v0.7.2", Version("0.7.0"),
              (_go_mod(_CTRD, "v1.7.16", "go.mod", "v0.7.2"), _lib_version_go("v0.7.2"))),
    EngineCdi("containerd", Version("1.7.27"), "v0.8.1", Version("0.8.0"),
              (_go_mod(_CTRD, "v1.7.27", "go.mod", "v0.8.1"), _lib_version_go("v0.8.1"))),
    EngineCdi("containerd", Version("2.0.0"), "v0.8.0", Version("0.8.0"),
              (_go_mod(_CTRD, "v2.0.0", "go.mod", "v0.8.0"), _lib_version_go("v0.8.0"))),
    EngineCdi("containerd", Version("2.0.5"), "v1.0.0", Version("1.0.0"),
              (_go_mod(_CTRD, "v2.0.5", "go.mod", "v1.0.0"), _lib_version_go("v1.0.0"))),
    EngineCdi("containerd", Version("2.2.1"), "v1.1.0", Version("1.1.0"),
              (_go_mod(_CTRD, "v2.2.1", "go.mod", "v1.1.0"), _lib_version_go("v1.1.0"))),
)  # fmt: skip
CONTAINERD_NEWEST_READ = Version("2.2.1")
ENGINE_CDI: dict[str, tuple[EngineCdi, ...]] = {
    "podman": PODMAN_CDI,
    "docker": DOCKER_CDI,
    "containerd": CONTAINERD_CDI,
}
NEWEST_READ = {
    "podman": PODMAN_NEWEST_READ,
    "docker": DOCKER_NEWEST_READ,
    "containerd": CONTAINERD_NEWEST_READ,
}
# The reports that named the failure on real hosts: podman 4.9.3 (Ubuntu 24.04) and RHEL 8's
# podman with nvidia-container-toolkit 1.19.1 specs ("unknown field additionalGids").
TOOLKIT_0_7_0_REPORTS = Source(
    "https://github.com/NVIDIA/nvidia-container-toolkit/issues/1860; "
    "https://github.com/NVIDIA/nvidia-container-toolkit/issues/1940"
)
# 1.19.1+ sets `cdiVersion` to the minimum its content needs (pkg/nvcdi/spec/
# set-minimum-version.go); `--feature-flag=no-additional-gids-for-device-nodes` (from 1.19.1)
# leaves `additionalGids` out. nvidia-ctk has no flag that sets the spec version itself.
TOOLKIT_NO_GIDS_FLAG = "--feature-flag=no-additional-gids-for-device-nodes"
# nvidia-cdi-refresh.service runs a bare `nvidia-ctk cdi generate` with this EnvironmentFile:
# the flag goes there as NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS (the flag's environment source).
TOOLKIT_REFRESH_ENV = "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"
TOOLKIT_NO_GIDS_ENV = "NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS=no-additional-gids-for-device-nodes"
TOOLKIT_NO_GIDS_SOURCE = Source(
    "https://github.com/NVIDIA/nvidia-container-toolkit/blob/v1.19.1/"
    "cmd/nvidia-ctk/cdi/generate/generate.go (feature-flag), pkg/nvcdi/api.go "
    "(FeatureNoAdditionalGIDsForDeviceNodes), pkg/nvcdi/spec/set-minimum-version.go, "
    f"deployments/systemd/nvidia-cdi-refresh.service; read {READ}"
)


def spec_version_of(text: str) -> Version | None:
    """A `cdiVersion` as the CDI library reads it (an optional leading "v"); None when it is no
    released spec version (every CDI library refuses it: "invalid version")."""
    try:
        v = Version(text.strip().removeprefix("v"))
    except ValueError:
        return None
    return v if v in KNOWN_SPEC_VERSIONS else None


def engine_newest_spec(engine: str, version: Version) -> EngineCdi | None:
    """The row of ENGINE_CDI[engine] that applies to this release (None: before its CDI)."""
    rows = [r for r in ENGINE_CDI[engine] if r.min_version <= version]
    return rows[-1] if rows else None


def engine_for_spec(engine: str, spec: Version) -> EngineCdi | None:
    """The first release of `engine` whose CDI library parses `spec` (None: none known to)."""
    return next((r for r in ENGINE_CDI[engine] if r.newest_spec >= spec), None)


def podman_newest_spec(podman: Version) -> EngineCdi | None:
    """The podman row that applies to this release (None: before native CDI)."""
    return engine_newest_spec("podman", podman)


def podman_for_spec(spec: Version) -> EngineCdi | None:
    """The first podman release whose CDI library parses `spec` (None: no podman known to)."""
    return engine_for_spec("podman", spec)


def field_version(name: str) -> Version:
    """The spec version a field of SPEC_VERSIONS needs."""
    return next(sv.version for sv in SPEC_VERSIONS if name in sv.fields)

"""matrix.yaml -> Matrix. Every value is checked here, so the rest of the code trusts the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.facts import drivers as driver_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.gpus import GPUS
from builder.facts.oses import DISTROS, EL_FAMILIES, NEW_DISTRO
from builder.matrix import model as m
from builder.matrix import validate as v
from builder.matrix.mirrors import TOP as TOP_MIRRORS
from builder.matrix.mirrors import apply_mirrors, read_mirrors
from builder.matrix.reader import Reader
from builder.matrix.yamlnodes import keypath_join, load, read_text

SCHEMA_VERSION = "1"
NAME_FIELDS = ("os", "accelerator", "driver", "cuda", "gcc", "python", "torch", "fp8", "flavour")


def load_matrix(path: str | Path) -> m.Matrix:
    """Read and validate a matrix file. Raises MatrixError naming file, line and key path."""
    p = Path(path)
    return parse_matrix(read_text(p, "the compatibility matrix"), str(p))


def parse_matrix(text: str, path: str = "matrix.yaml") -> m.Matrix:
    tree, lines = load(text, path)
    r = Reader(path, lines)
    top = r.mapping(
        tree,
        "",
        ("schema", "project", "oses", "drivers", "cuda", "groups"),
        ("python_packages", TOP_MIRRORS),
    )
    if top["schema"] != SCHEMA_VERSION:
        r.fail("schema", f"unsupported schema {top['schema']!r}: this trainimg reads schema 1")
    oses = {
        key: _os(r, key, value)
        for key, value in r.mapping(top["oses"], "oses", open_keys=True).items()
    }
    drivers = {
        key: _driver(r, key, value)
        for key, value in r.mapping(top["drivers"], "drivers", open_keys=True).items()
    }
    cudas = {
        key: _cuda(r, key, value)
        for key, value in r.mapping(top["cuda"], "cuda", open_keys=True).items()
    }
    packages = _pins(r, top.get("python_packages", {}), "python_packages", v.VERSION)
    groups = tuple(
        _group(r, i, g, oses, drivers, cudas) for i, g in enumerate(r.seq(top["groups"], "groups"))
    )
    names = [g.name for g in groups]
    for i, name in enumerate(names):
        if name in names[:i]:
            r.fail(
                keypath_join(keypath_join("groups", i), "name"), f"duplicate group name {name!r}"
            )
    project = _project(r, top["project"])
    matrix = m.Matrix(path, project, oses, drivers, cudas, packages, groups, lines=lines)
    return apply_mirrors(matrix, read_mirrors(r, top.get(TOP_MIRRORS)), r)


def _project(r: Reader, value: Any) -> m.Project:
    kp = "project"
    d = r.mapping(
        value,
        kp,
        ("repository", "title", "vendor", "licenses", "source", "name_format", "default_cell"),
        ("default_gpu_cell",),
    )
    repo = r.text(d["repository"], f"{kp}.repository", v.IMAGE_REF)
    if ":" in repo.rsplit("/", 1)[-1]:
        r.fail(f"{kp}.repository", f"{repo!r} carries a tag: give the repository only")
    fmt = r.text(d["name_format"], f"{kp}.name_format", v.NAME_FORMAT)
    for field in v.format_fields(fmt):
        if field not in NAME_FIELDS:
            r.fail(
                f"{kp}.name_format",
                f"unknown field {{{field}}} (valid: {', '.join(NAME_FIELDS)})",
            )
    return m.Project(
        repository=repo,
        title=r.text(d["title"], f"{kp}.title", v.TEXT),
        vendor=r.text(d["vendor"], f"{kp}.vendor", v.TEXT),
        licenses=r.text(d["licenses"], f"{kp}.licenses", v.TEXT),
        source=r.text(d["source"], f"{kp}.source", v.URL),
        name_format=fmt,
        default_cell=r.text(d["default_cell"], f"{kp}.default_cell", v.CELL_NAME),
        default_gpu_cell=(
            r.text(d["default_gpu_cell"], f"{kp}.default_gpu_cell", v.CELL_NAME)
            if d.get("default_gpu_cell") is not None
            else None
        ),
    )


def _pins(
    r: Reader, value: Any, kp: str, pattern: v.Pattern, *, os_family: str = ""
) -> tuple[m.Pin, ...]:
    """name -> version pins; `os_family` el9 reads an OS package's pin (`_el9_os_pin`)."""
    if value is None:
        return ()
    d = r.mapping(value, kp, open_keys=True)
    pins = []
    for key, version in d.items():
        name = r.text(key, keypath_join(kp, key), v.PACKAGE)
        ikp = keypath_join(kp, key)
        if os_family in EL_FAMILIES:
            pins.append(_el9_os_pin(r, version, ikp, name))
        else:
            pins.append(m.Pin(name, _package_version(r, version, ikp, pattern, name)))
    return tuple(pins)


def _package_version(r: Reader, value: Any, kp: str, pattern: v.Pattern, name: str) -> str:
    """A package's version; for rpm, first the glob that dnf would match against nothing."""
    if pattern is v.RPM_VERSION and isinstance(value, str) and any(c in value for c in "*?["):
        r.fail(
            kp,
            f"{value!r} is a glob: dnf matches '{name}-{value}' against whole versions, so a "
            "series glob can miss every build (shadow-utils-4.9.* finds no 2:4.9-<release>), "
            "and hadolint counts it as unpinned; give VERSION (every release of it, e.g. '4.9') "
            "or [EPOCH:]VERSION-RELEASE (one build, e.g. '2:4.9-15.el9')",
        )
    return r.text(value, kp, pattern)


def _el9_os_pin(r: Reader, value: Any, kp: str, name: str) -> m.Pin:
    """An EL9 OS package: the version series EL guarantees ('3.12', '11': installed by name,
    checked after) - its repositories keep only the current minor's builds, so a pin on one
    version stops resolving at the next errata - or one [EPOCH:]VERSION-RELEASE build, which
    only a dated snapshot mirror keeps."""
    if isinstance(value, str) and any(c in value for c in "*?["):
        r.fail(
            kp,
            f"{value!r} is a glob: give the version series EL guarantees (e.g. '3.12', "
            "'11': the build checks the installed version against it) or one build "
            "[EPOCH:]VERSION-RELEASE (e.g. '2:4.9-15.el9', for a dated snapshot mirror)",
        )
    if isinstance(value, str) and v.RPM_SERIES.matches(value):
        return m.Pin(name, value, series=True)
    if isinstance(value, str) and v.RPM_BUILD.matches(value):
        return m.Pin(name, value)
    r.fail(
        kp,
        f"invalid EL9 package pin {value!r} for {name}: give the version series EL "
        "guarantees (e.g. '3.12', '11') or one build [EPOCH:]VERSION-RELEASE (e.g. "
        "'2:4.9-15.el9')",
    )


def version_pattern(family: str) -> v.Pattern:
    """How an OS family's package manager spells a pinned version."""
    return v.RPM_VERSION if family in EL_FAMILIES else v.PACKAGE_VERSION


def _os(r: Reader, key: str, value: Any) -> m.OsSpec:
    kp = keypath_join("oses", key)
    r.text(key, kp, v.KEY)
    d = r.mapping(
        value,
        kp,
        ("base", "python"),
        ("distro", "digest", "local", "gcc", "packages", "devel_packages", "devel_repos"),
    )
    distro_key = r.text(d.get("distro", key), f"{kp}.distro", v.KEY)
    if distro_key not in DISTROS:
        where = f"{kp}.distro" if "distro" in d else kp
        r.fail(where, f"unknown distro {distro_key!r} (known: {', '.join(DISTROS)}; {NEW_DISTRO})")
    distro = DISTROS[distro_key]
    family = distro.family
    pattern = version_pattern(family)
    digest = d.get("digest")
    if digest is not None:
        digest = r.text(digest, f"{kp}.digest", v.DIGEST)
    local = r.boolean(d.get("local", False), f"{kp}.local")
    base = r.text(d["base"], f"{kp}.base", v.IMAGE_REF)
    if local and not base.startswith("localhost/"):
        r.fail(f"{kp}.base", f"a local base must be named localhost/...: got {base!r}")
    python: dict[str, m.Pin] = {}
    for ver, pin in r.mapping(d["python"], f"{kp}.python", open_keys=True).items():
        pkp = keypath_join(f"{kp}.python", ver)
        r.text(ver, pkp, v.PYTHON)
        p = r.mapping(pin, pkp, ("package",), ("version",))
        version = p.get("version")
        name = r.text(p["package"], f"{pkp}.package", v.PACKAGE)
        if version is None and family in EL_FAMILIES:
            r.fail(
                pkp,
                f"missing required key 'version': dnf installs {name} on {family.upper()}, pinned "
                f"to the series EL guarantees (e.g. '{ver}') or one build [EPOCH:]VERSION-RELEASE",
            )
        if version is None:
            python[ver] = m.Pin(name, "")
        elif family in EL_FAMILIES:
            python[ver] = _el9_os_pin(r, version, f"{pkp}.version", name)
        else:
            python[ver] = m.Pin(name, _package_version(r, version, f"{pkp}.version", pattern, name))
    gcc: dict[str, tuple[m.Pin, ...]] = {}
    for major, spec in r.mapping(d.get("gcc", {}), f"{kp}.gcc", open_keys=True).items():
        gkp = keypath_join(f"{kp}.gcc", major)
        r.text(major, gkp, v.GCC)
        gcc[major] = _pins(r, spec, gkp, pattern, os_family=family)
    devel_repos: list[str] = []
    for i, item in enumerate(r.seq(d.get("devel_repos", []), f"{kp}.devel_repos", non_empty=False)):
        ikp = keypath_join(f"{kp}.devel_repos", i)
        repo = r.text(item, ikp, v.KEY)
        if repo not in distro.optional_repos:
            r.fail(
                ikp,
                f"{repo!r} is not a disabled repository of {distro.name} that an install may "
                f"enable (known: {', '.join(distro.optional_repos) or 'none'})",
            )
        devel_repos.append(repo)
    return m.OsSpec(
        key=key,
        distro=distro,
        base=base,
        digest=digest,
        local=local,
        python=python,
        gcc=gcc,
        packages=_pins(r, d.get("packages"), f"{kp}.packages", pattern, os_family=family),
        devel_packages=_pins(
            r, d.get("devel_packages"), f"{kp}.devel_packages", pattern, os_family=family
        ),
        devel_repos=tuple(devel_repos),
    )


def _version(r: Reader, value: Any, kp: str) -> Version:
    text = r.text(value, kp, v.VERSION)
    try:
        return Version(text)
    except InvalidVersion:  # pragma: no cover - the pattern admits only PEP 440 versions
        r.fail(kp, f"not a version: {text!r}")


def _driver(r: Reader, key: str, value: Any) -> m.DriverSpec:
    kp = keypath_join("drivers", key)
    r.text(key, kp, v.KEY)
    d = r.mapping(value, kp, ("branch", "min_version", "kernel_module"))
    branch = r.integer(
        r.text(d["branch"], f"{kp}.branch", v.DRIVER_BRANCH), f"{kp}.branch", 300, 999
    )
    text = r.text(d["min_version"], f"{kp}.min_version", v.DRIVER_VERSION)
    min_version = DriverVersion(text)
    if min_version.major != branch:
        r.fail(
            f"{kp}.min_version",
            f"{min_version} is not on branch {branch} (expected {branch}.x, e.g. {branch}.124.06)",
        )
    module = r.choice(d["kernel_module"], f"{kp}.kernel_module", driver_rules.KERNEL_MODULES)
    return m.DriverSpec(key, branch, min_version, module)


def _cuda(r: Reader, key: str, value: Any) -> m.CudaSpec:
    kp = keypath_join("cuda", key)
    version = _version(r, key, kp)
    if len(version.release) != 3 or version.local:
        r.fail(kp, f"CUDA versions are MAJOR.MINOR.PATCH, e.g. 12.8.1: got {key!r}")
    repos: dict[str, m.CudaRepo] = {}
    for family, spec in r.mapping(value, kp, (), (*EL_FAMILIES, "debian")).items():
        fkp = keypath_join(kp, family)
        d = r.mapping(spec, fkp, ("repo", "gpgkey", "gpgkey_sha256", "runtime"), ("devel",))
        repo = r.text(d["repo"], f"{fkp}.repo", v.URL)
        if repo.endswith(".repo"):
            r.fail(
                f"{fkp}.repo",
                f"{repo!r} is a .repo file: give the repository's base URL (e.g. "
                "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64); "
                "the template writes the .repo file itself, gpgcheck=1 with the local key",
            )
        repos[family] = m.CudaRepo(
            repo=repo,
            gpgkey=r.text(d["gpgkey"], f"{fkp}.gpgkey", v.URL),
            gpgkey_sha256=r.text(d["gpgkey_sha256"], f"{fkp}.gpgkey_sha256", v.SHA256),
            runtime=_nvidia_pins(r, d["runtime"], f"{fkp}.runtime", family),
            devel=_nvidia_pins(r, d.get("devel"), f"{fkp}.devel", family),
        )
    return m.CudaSpec(version, repos)


def _nvidia_pins(r: Reader, value: Any, kp: str, family: str) -> tuple[m.Pin, ...]:
    """NVIDIA's packages: exact (VERSION or [EPOCH:]VERSION-RELEASE) or, on EL9, a branch
    series ('570.*': dnf takes the newest build of the branch, the build checks it after)."""
    if family not in EL_FAMILIES or value is None:
        return _pins(r, value, kp, version_pattern(family))
    pins = []
    for key, version in r.mapping(value, kp, open_keys=True).items():
        name = r.text(key, keypath_join(kp, key), v.PACKAGE)
        ikp = keypath_join(kp, key)
        if isinstance(version, str) and v.NVIDIA_SERIES.matches(version):
            pins.append(m.Pin(name, version[:-2], series=True, glob=True))
        elif isinstance(version, str) and any(c in version for c in "*?["):
            r.fail(
                ikp,
                f"{version!r} is not a branch series: give the branch followed by '.*' (e.g. "
                f"'570.*': every {name} build of the R570 branch), VERSION or "
                "[EPOCH:]VERSION-RELEASE",
            )
        else:
            pins.append(m.Pin(name, _package_version(r, version, ikp, v.RPM_VERSION, name)))
    return tuple(pins)


def _group(
    r: Reader,
    index: int,
    value: Any,
    oses: dict[str, m.OsSpec],
    drivers: dict[str, m.DriverSpec],
    cudas: dict[str, m.CudaSpec],
) -> m.Group:
    kp = keypath_join("groups", index)
    d = r.mapping(value, kp, ("name", "axes"), ("gpus", "exclude"))
    name = r.text(d["name"], f"{kp}.name", v.KEY)
    raw_axes = r.mapping(d["axes"], f"{kp}.axes", (), m.AXES)
    known: dict[str, tuple[str, ...]] = {
        "os": tuple(oses),
        "accelerator": m.ACCELERATORS,
        "driver": tuple(drivers),
        "cuda": tuple(cudas),
        "fp8": m.FP8_BACKENDS,
        "flavour": m.FLAVOURS,
    }
    patterns = {"gcc": v.GCC, "python": v.PYTHON, "torch": v.VERSION}
    axes: dict[str, tuple[str, ...]] = {}
    for axis in m.AXES:
        akp = f"{kp}.axes.{axis}"
        if axis not in raw_axes:
            if axis in ("driver", "cuda"):
                continue  # CPU groups have neither
            r.fail(f"{kp}.axes", f"missing axis {axis!r}")
        values = r.seq(raw_axes[axis], akp)
        out: list[str] = []
        for i, item in enumerate(values):
            ikp = keypath_join(akp, i)
            if axis in known:
                out.append(r.choice(item, ikp, known[axis]))
            else:
                out.append(r.text(item, ikp, patterns[axis]))
            if axis == "torch" and Version(out[-1]).local:
                r.fail(
                    ikp,
                    f"give the public version ({Version(out[-1]).public}); the build "
                    "tag (+cu128, +cpu) follows from the accelerator and CUDA axes",
                )
            if out[-1] in out[:-1]:
                r.fail(ikp, f"{out[-1]!r} is listed twice")
        axes[axis] = tuple(out)
    has_cpu, has_cuda = "cpu" in axes["accelerator"], "cuda" in axes["accelerator"]
    if has_cpu and ("driver" in axes or "cuda" in axes):
        r.fail(
            f"{kp}.axes", "CPU cells take no driver or cuda axis: put them in a group of their own"
        )
    if has_cuda and ("driver" not in axes or "cuda" not in axes):
        r.fail(f"{kp}.axes", "CUDA cells need both a driver and a cuda axis")
    gpus = []
    for i, item in enumerate(r.seq(d.get("gpus", []), f"{kp}.gpus", non_empty=False)):
        gkp = keypath_join(f"{kp}.gpus", i)
        gpus.append(GPUS[r.choice(item, gkp, tuple(GPUS))])
    exclude = tuple(
        _exclusion(r, f"{kp}.exclude", j, e, axes)
        for j, e in enumerate(r.seq(d.get("exclude", []), f"{kp}.exclude", non_empty=False))
    )
    return m.Group(name, axes, tuple(gpus), exclude)


def _exclusion(
    r: Reader, parent: str, index: int, value: Any, axes: dict[str, tuple[str, ...]]
) -> m.Exclusion:
    kp = keypath_join(parent, index)
    d = r.mapping(value, kp, ("match", "reason"))
    match: dict[str, tuple[str, ...]] = {}
    for axis, wanted in r.mapping(d["match"], f"{kp}.match", (), m.AXES).items():
        akp = f"{kp}.match.{axis}"
        items = wanted if isinstance(wanted, list) else [wanted]
        for i, item in enumerate(items):
            if item not in axes.get(axis, ()):
                r.fail(
                    akp if not isinstance(wanted, list) else keypath_join(akp, i),
                    f"{item!r} is not a value of axis {axis} in this group "
                    f"(values: {', '.join(axes.get(axis, ())) or 'none'})",
                )
        match[axis] = tuple(items)
    if not match:
        r.fail(f"{kp}.match", "an exclusion must match at least one axis")
    rd = r.mapping(d["reason"], f"{kp}.reason", ("code", "text"))
    reason = m.Reason(
        r.choice(rd["code"], f"{kp}.reason.code", m.EXCLUSION_CODES),
        r.text(rd["text"], f"{kp}.reason.text", v.TEXT),
    )
    return m.Exclusion(match, reason)

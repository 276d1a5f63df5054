"""What a fatbin scan means for a GPU: will each library's kernels run on it, natively or by JIT?

A kernel module (one fatbin container: the device code of one translation unit) runs on a GPU
when it carries SASS the GPU can execute, or PTX the driver can JIT-compile for it
(https://docs.nvidia.com/cuda/blackwell-compatibility-guide/index.html; builder.facts.gpus):
- SASS sm_XY (and the family target sm_XYf) runs on compute capability X.Z with Z >= Y
  (same major only: sm_100 does not run on 12.0); arch-specific SASS sm_XYa only on X.Y;
- PTX compute_XY is JIT-compiled for any GPU of compute capability >= X.Y; compute_XYa only
  for X.Y and compute_XYf for the same major.
A module that carries only arch- or family-specific code (sm_100f, sm_90a) is built with features
other GPUs lack, so a library can launch it only where those exist: it chooses it at run time,
and elsewhere it is never loaded (libnccl 2.27.5 has 12 modules for sm_50..sm_120 and 4 with
sm_100f only: on an H100 those 4 are not a missing kernel).
How many modules must carry code for the GPU depends on how the library picks its kernels
(builder/facts/kernel_dispatch.py). A library with one uniform arch list (libtorch_cuda) runs
natively when every module has SASS for the GPU; when some module has only PTX, it runs after a
JIT compile at first use; when some module has neither, those kernels fail with "no kernel image
is available for execution on the device". A library that ships per-architecture kernel sets and
chooses among them at run time (cuBLAS, cuDNN, ...) runs when its dispatch set has code for the
GPU: at least one module with SASS (natively) or PTX (by JIT) for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from builder.arches.fatbin import arch_key
from builder.errors import TrainimgError
from builder.facts import gpus, kernel_dispatch
from builder.facts.gpus import CC


def parse_gpu(text: str) -> tuple[str, CC]:
    """'b200', 'rtx5090', 'sm_120', '12.0' or '120' -> (display name, compute capability)."""
    key = text.strip().lower()
    if key in gpus.GPUS:
        g = gpus.GPUS[key]
        return f"{g.name} ({g.sm})", g.cc
    try:
        if "." in key:
            major, minor = key.split(".", 1)
            cc = (int(major), int(minor))
        else:
            cc = gpus.parse_sm(key if key.startswith(("sm_", "compute_")) else f"sm_{key}")
    except ValueError:
        known = ", ".join(sorted(gpus.GPUS))
        raise TrainimgError(
            f"unknown GPU {text!r}: give a GPU key ({known}), an arch (sm_100) or a compute "
            "capability (10.0)"
        ) from None
    names = [g.name for g in gpus.by_cc(cc)]
    label = f"sm_{cc[0]}{cc[1]}"
    return (f"{label} ({', '.join(names)})" if names else label), cc


_TARGET = re.compile(r"^(sm|compute|lto)_(\d+)([af]?)$")


def _target(name: str) -> tuple[str, CC, str] | None:
    """'sm_90a' -> ('sm', (9, 0), 'a'); None for names this module does not judge."""
    m = _TARGET.match(name)
    if m is None:
        return None
    arch = int(m.group(2))
    return m.group(1), (arch // 10, arch % 10), m.group(3)


def sass_runs(name: str, cc: CC) -> bool:
    t = _target(name)
    if t is None or t[0] != "sm":
        return False
    _, sass, suffix = t
    if suffix == "a":
        return sass == cc
    return gpus.sass_runs_on(sass, cc)


def ptx_jits(name: str, cc: CC) -> bool:
    t = _target(name)
    if t is None or t[0] != "compute":
        return False
    _, ptx, suffix = t
    if suffix == "a":
        return ptx == cc
    if suffix == "f":
        return ptx[0] == cc[0] and cc[1] >= ptx[1]
    return cc >= ptx


@dataclass(frozen=True)
class Coverage:
    """How the modules of one library fare on one GPU."""

    path: str
    modules: int  # containers with device code
    native: int  # modules with SASS that runs on the GPU
    jit: int  # modules with only PTX for it
    missing: int  # modules with neither
    sass: tuple[str, ...]  # the SASS targets that run on the GPU
    ptx: tuple[str, ...]  # the PTX targets the driver can JIT for it
    rule: str = kernel_dispatch.UNIFORM
    documented: bool = False  # OPAQUE: the vendor documents this GPU's architecture
    # modules with only arch- or family-specific code (sm_100f, sm_90a) for other GPUs: such
    # code cannot run anywhere else, so a library launches it only where it can - chosen at run
    # time, never loaded here, and no gap in a uniform library (libnccl's sm_100f kernels)
    elsewhere: int = 0

    @property
    def blocking(self) -> bool:
        """Whether this library decides if the image runs on the GPU."""
        return self.rule != kernel_dispatch.OPTIONAL

    @property
    def verdict(self) -> str:
        if self.rule == kernel_dispatch.OPAQUE:
            return "documented" if self.documented else "no"
        if self.rule == kernel_dispatch.PER_ARCH:
            if self.native:
                return "yes"
            return "jit" if self.jit else "no"
        if self.missing or not (self.native or self.jit):
            return "no"
        return "jit" if self.jit else "yes"

    def explain(self) -> str:
        if self.rule == kernel_dispatch.OPAQUE:
            return (
                f"{'documented' if self.documented else 'no'}: its kernels are not in .nv_fatbin "
                f"(only {self.modules} helper module(s) there), so the scan cannot judge them; "
                f"NVIDIA {'documents' if self.documented else 'does not document'} this "
                "architecture for the release"
            )
        if self.rule == kernel_dispatch.OPTIONAL:
            return self._explain_uniform() + " (optional ops: not on the trainer's path)"
        if self.rule == kernel_dispatch.PER_ARCH:
            return self._explain_per_arch()
        return self._explain_uniform()

    def _explain_uniform(self) -> str:
        others = (
            f" ({self.elsewhere} more carry only other GPUs' arch-specific code, chosen at run "
            "time and never loaded here)"
            if self.elsewhere
            else ""
        )
        general = self.modules - self.elsewhere
        if self.verdict == "yes":
            kind = "general " if self.elsewhere else ""
            return (
                f"yes: all {general} {kind}kernel modules carry SASS that runs on it "
                f"({', '.join(self.sass)}){others}"
            )
        if self.verdict == "jit":
            return (
                f"only by JIT: {self.jit} of {general} kernel modules carry no SASS for "
                f"it, only PTX ({', '.join(self.ptx)}) that the driver compiles at first use"
                + others
            )
        return (
            f"no: {self.missing} of {general} kernel modules carry neither SASS nor PTX "
            "for it ('no kernel image is available for execution on the device')" + others
        )

    def _explain_per_arch(self) -> str:
        others = f"{self.missing} of {self.modules} modules hold kernels for other GPUs only"
        why = "it picks its kernels per architecture at run time"
        if self.native:
            return (
                f"yes: {self.native} of {self.modules} kernel modules carry SASS that runs on it "
                f"({', '.join(self.sass)}); {others}, {why}"
            )
        if self.jit:
            return (
                f"only by JIT: no module carries SASS for it; {self.jit} of {self.modules} "
                f"carry PTX ({', '.join(self.ptx)}) that the driver compiles at first use; {why}"
            )
        return f"no: none of its {self.modules} kernel modules carries SASS or PTX for it ({why})"


def coverage(
    path: str,
    modules: Sequence[Sequence[str]],
    cc: CC,
    rule: str = kernel_dispatch.UNIFORM,
    documented: bool = False,
) -> Coverage:
    """Judge each module (the target names of one fatbin container) for compute capability cc,
    and the library by `rule` (builder/facts/kernel_dispatch.py)."""
    native = jit = missing = elsewhere = 0
    sass: set[str] = set()
    ptx: set[str] = set()
    counted = 0
    for targets in modules:
        if not targets:
            continue
        counted += 1
        runs = [t for t in targets if sass_runs(t, cc)]
        jits = [t for t in targets if ptx_jits(t, cc)]
        sass.update(runs)
        ptx.update(jits)
        if runs:
            native += 1
        elif jits:
            jit += 1
        elif rule != kernel_dispatch.PER_ARCH and all(_arch_specific(t) for t in targets):
            elsewhere += 1
        else:
            missing += 1
    return Coverage(
        path,
        counted,
        native,
        jit,
        missing,
        tuple(sorted(sass, key=arch_key)),
        tuple(sorted(ptx, key=arch_key)),
        rule,
        documented,
        elsewhere,
    )


def _arch_specific(name: str) -> bool:
    """sm_90a, sm_100f, compute_100a: code that runs only on one GPU or one family."""
    t = _target(name)
    return t is not None and t[2] in ("a", "f")


def library_coverage(library: Mapping[str, Any], cc: CC) -> Coverage:
    """Coverage of one library as LibraryScan.to_dict() (or the in-image scan) describes it,
    judged by the dispatch rule its file name has in builder/facts/kernel_dispatch.py."""
    path = str(library["path"])
    rule = kernel_dispatch.rule_for(path)
    return coverage(path, library["per_container"], cc, rule.kind, cc[0] in rule.documented)


def overall(covs: list[Coverage]) -> str:
    """'no' when a library that decides has no code for the GPU, 'jit' when some need a JIT,
    'documented' when the rest run natively but some (opaque) were judged only from NVIDIA's
    documentation, 'yes' only when the scan itself shows native code in every one. Optional
    libraries are shown but never decide."""
    verdicts = {c.verdict for c in covs if c.blocking}
    for verdict in ("no", "jit", "documented"):
        if verdict in verdicts:
            return verdict
    return "yes"


def documented_only(covs: list[Coverage]) -> list[str]:
    """Paths of the deciding libraries whose verdict is NVIDIA's documentation, not the scan."""
    return [c.path for c in covs if c.blocking and c.verdict == "documented"]

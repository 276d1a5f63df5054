"""`--repos`: ask the host's own dnf whether the driver's packages install there.

For the plan's driver (the target, else the driver the next boot runs) and every kernel that
boots (the running one and grubby's default), one `dnf repoquery` lists what the host's
repositories offer of NVIDIA's packages (builder/facts/nvidia_packages.py): the driver, the
precompiled kmods of that version (every kernel's), the DKMS kmods, dkms (EPEL) and
kernel-devel of each boot kernel; then `dnf module list nvidia-driver` its module streams.
Then, for each boot kernel that has a way in, `dnf install --assumeno` of exactly those
packages (the driver, the kmod or the DKMS set): dnf resolves the transaction against what is
installed and answers no to it (it needs root; as another user dnf refuses, and the finding
says the transaction was not resolved). All run `--cacheonly` first: they read dnf's metadata
cache and write nothing. Only when there
is no cache (dnf never ran, or was cleaned) are they run again without it, and then dnf
refreshes its metadata cache (the one thing it writes; dnf also appends to its own logs). Every
argument is a fixed word, the validated driver version or a validated EL kernel release
(allowlist.DNF_SPEC): no host value reaches a shell.
"""

from __future__ import annotations

import time

from builder.facts import nvidia_packages as nv_pkgs
from builder.host import parsers
from builder.preflight import allowlist
from builder.preflight import repos_route as route_of
from builder.preflight.host_state import HostState, RepoAnswer
from builder.preflight.hostio import PROBE_GRACE_S, Output, ReadOnlyHost
from builder.preflight.model import UpgradePlan
from builder.preflight.repos_route import DNF_TIMEOUT_S, asked_version

REPOQUERY_PROBE = "dnf-repoquery"
MODULES_PROBE = "dnf-modules"
RESOLVE_PROBE = "dnf-resolve"


def boot_kernels(state: HostState) -> dict[str, str]:
    """The kernels that boot, each with its role: the running one and the next boot's."""
    roles: dict[str, list[str]] = {}
    for kernel, role in ((state.kernel, "running"), (state.default_kernel, "next boot")):
        if kernel:
            roles.setdefault(kernel, []).append(role)
    return {k: " + ".join(r) for k, r in roles.items()}


def repo_specs(version: str, kernels: list[str]) -> list[str]:
    """The repoquery's package specs: fixed names, the driver version, the kernels' devel."""
    return [
        f"{nv_pkgs.DRIVER_PACKAGE}-{version}",
        *(
            nv_pkgs.PRECOMPILED_KMOD[f].format(driver=version, kernel="*")
            for f in ("proprietary", "open")
        ),
        *(f"{name}-{version}" for name in nv_pkgs.DKMS_KMOD.values()),
        nv_pkgs.DKMS_PACKAGE,
        *(f"{nv_pkgs.KERNEL_DEVEL}-{k}" for k in kernels),
    ]


def dnf_timeout(host: ReadOnlyHost) -> int:
    return max(host.timeout, DNF_TIMEOUT_S)


# Seconds of the host's deadline (--host-timeout) a dnf call needs at the least: past it, dnf
# is not started, and the host's other answers stand (a probe started too late would make the
# whole host unreachable).
_MIN_LEFT_S = 15


class _OutOfTime(Exception):
    pass


def _dnf(host: ReadOnlyHost, *argv: str) -> Output:
    seconds = dnf_timeout(host)
    if host.deadline is not None:
        left = int(host.deadline - time.monotonic()) - PROBE_GRACE_S
        if left < _MIN_LEFT_S:
            raise _OutOfTime(f"the per-host deadline ({host.host_timeout} s) left {max(left, 0)} s")
        seconds = min(seconds, left)
    return host.run("dnf", *argv, timeout=seconds)


def repos_step(host: ReadOnlyHost, state: HostState, plan: UpgradePlan) -> None:
    """Ask dnf (EL hosts only, where a driver version is known); fills state.repos."""
    version = asked_version(state, plan)
    if state.family != "el" or version is None:
        return
    kernels = boot_kernels(state)
    valid = [k for k in kernels if nv_pkgs.kernel_base(k) is not None]
    answer = RepoAnswer(version, kernels, [k for k in kernels if k not in valid])
    answer.timeout_s = dnf_timeout(host)
    state.repos = answer
    try:
        _ask(host, state, answer, plan, valid)
    except _OutOfTime as exc:
        answer.note = f"dnf was not started: {exc} (raise --host-timeout)"


def _ask(
    host: ReadOnlyHost, state: HostState, answer: RepoAnswer, plan: UpgradePlan, valid: list[str]
) -> None:
    version = answer.version
    specs = repo_specs(version, valid)
    o = state.outputs
    o[REPOQUERY_PROBE] = out = _dnf(host, "-q", "--cacheonly", *allowlist.DNF_REPOQUERY, *specs)
    cache: tuple[str, ...] = ("--cacheonly",)
    answer.query = REPOQUERY_PROBE
    if not out.ok and parsers.dnf_no_cache(out.stderr):
        cache, answer.cache, answer.query = (), "refreshed", f"{REPOQUERY_PROBE} (refresh)"
        o[answer.query] = out = _dnf(host, "-q", *allowlist.DNF_REPOQUERY, *specs)
    if not out.ok:
        return
    answer.available = parsers.dnf_repoquery(out.stdout)
    o[MODULES_PROBE] = mods = _dnf(host, "-q", *cache, *allowlist.DNF_MODULE_LIST)
    if mods.ok or "No matching Modules" in mods.stderr:
        answer.streams = parsers.dnf_module_streams(mods.stdout, nv_pkgs.MODULE)
    _resolve(host, state, answer, plan, cache)


def _resolve(
    host: ReadOnlyHost, state: HostState, ans: RepoAnswer, plan: UpgradePlan, cache: tuple[str, ...]
) -> None:
    """For each boot kernel with a route, `dnf install --assumeno` its packages (with the
    driver): dnf resolves the transaction against what is installed and answers no."""
    driver = route_of.driver_there(state, ans)
    done: dict[tuple[str, ...], str] = {}
    for kernel in ans.kernels:
        found = (
            None
            if kernel in ans.refused
            else route_of.route(state, ans, kernel, route_of.flavours(state, plan))
        )
        if found is None:
            continue
        specs = (*(() if driver is None or driver[1] is None else (driver[1],)), *found.install)
        if not specs:
            continue
        if specs not in done:
            done[specs] = key = f"{RESOLVE_PROBE} {kernel}"
            state.outputs[key] = _dnf(host, "-q", *cache, *allowlist.DNF_INSTALL, *specs)
        ans.resolved[kernel] = done[specs]

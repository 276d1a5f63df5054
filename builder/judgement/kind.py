"""What a finding means for an upgrade gate (pure): its kind, derived from the finding's severity
on the host as it is (`now`) and after the planned driver change (`plan`), and the exit code a
run's worst kind gives.

Severity says how bad a finding is; the kind says whose fault it is, which is what an admin
gates an upgrade on: a plan that breaks a working GPU or image must stop the upgrade (exit 1),
while a host that is already broken, or an image that never ran on this GPU, is no reason to
hold back a plan that makes nothing worse (exit 4), and a risk only needs a look (exit 3).
The kinds are derived here once, from the two verdicts every check already gives, never set by
hand per check; docs/preflight.md has the table.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from builder.judgement.severity import BLOCK, WARN, Severity


class Kind(StrEnum):
    """Ordered from least to most serious (worst_kind takes the last).

    info: nothing to act on (ok, skipped, or a fault the plan repairs); risk: a warning, worth
    a look; never-ran: an image that does not run on this host's GPUs and driver now and will
    not after the plan (e.g. torch 2.11 cells without sm_70 kernels on a V100): no working
    image is lost; broken-now: a host fault that blocks now and that the plan does not fix (a
    hung nvidia-smi, a GPU fallen off the bus, a failed fabric manager); breaks: the plan makes
    something fail that does not fail now (a GPU the target drops, an image that stops
    running, a pending MIG mode change the upgrade's GPU reset applies).
    """

    INFO = "info"
    RISK = "risk"
    NEVER_RAN = "never-ran"
    BROKEN_NOW = "broken-now"
    BREAKS = "breaks"

    @property
    def rank(self) -> int:
        return _ORDER.index(self)


_ORDER = (Kind.INFO, Kind.RISK, Kind.NEVER_RAN, Kind.BROKEN_NOW, Kind.BREAKS)
INFO, RISK, NEVER_RAN, BROKEN_NOW, BREAKS = _ORDER


def kind_of(
    now: Severity | None,
    plan: Severity | None,
    *,
    planned: bool,
    same_reason: bool = True,
    image: bool = False,
) -> Kind:
    """The kind of one finding.

    now: its severity on the host as it is (None: not judged now, as the target checks are
    not, or an image with no driver to run on); plan: its severity after the plan (ignored
    without one: `planned` False judges `now` alone); same_reason: the now and the plan
    findings block for the same reason code (a check that blocks now for one reason and after
    the plan for another is broken by the plan); image: an image's verdict, whose failure is
    the image x GPU x driver's, not a host fault.

    Without a plan nothing can break: a block is broken-now (a host) or never-ran (an image).
    """
    after = plan if planned else now
    if after is None or after.rank < WARN.rank:
        return INFO
    if after is not BLOCK:
        return RISK
    if image:
        failed_before = not planned or now is None or now is BLOCK
        return NEVER_RAN if failed_before else BREAKS
    if not planned or (now is BLOCK and same_reason):
        return BROKEN_NOW
    return BREAKS


def worst_kind(kinds: Iterable[Kind]) -> Kind:
    """The most serious kind (info when there is none)."""
    return max(kinds, key=lambda k: k.rank, default=INFO)


# The exit-code table (docs/preflight.md "Two verdicts, and the exit code"; `preflight --help`).
# 2 is bad input, the CLI's (TrainimgError).
EXIT_OK, EXIT_BREAKS, EXIT_RISK, EXIT_BROKEN_NOW = 0, 1, 3, 4
EXIT_OF: dict[Kind, int] = {
    BREAKS: EXIT_BREAKS,
    BROKEN_NOW: EXIT_BROKEN_NOW,
    NEVER_RAN: EXIT_BROKEN_NOW,
    RISK: EXIT_RISK,
    INFO: EXIT_OK,
}
# (code, meaning): the table docs/preflight.md and `trainimg preflight --help` print; the worst
# counted kind decides, so 1 beats 4 beats 3.
EXIT_TABLE: tuple[tuple[int, str], ...] = (
    (
        0,
        "nothing counted: every finding is info (ok, skipped, or a fault the plan repairs), "
        "or of a kind --fail-on leaves out",
    ),
    (
        1,
        "breaks: the plan makes something fail that works now (a GPU the target drops, an "
        "image that stops running, a pending MIG mode change the upgrade's GPU reset "
        "applies, a plan that cannot install)",
    ),
    (
        4,
        "broken-now or never-ran, nothing that breaks: the host is already failing and the "
        "plan does not fix it (a hung nvidia-smi, a GPU fallen off the bus, a failed fabric "
        "manager, an unreachable host), or an image never ran on this GPU and still will not",
    ),
    (3, "risk only: warnings to look at, nothing blocks"),
    (2, "bad input (an option, inventory or record that cannot be used), nothing judged"),
)
FAILING = (BREAKS, BROKEN_NOW, NEVER_RAN, RISK)  # the kinds --fail-on may name
DEFAULT_FAIL_ON: frozenset[Kind] = frozenset(FAILING)


def exit_code_of_kinds(kinds: Iterable[Kind], fail_on: frozenset[Kind] = DEFAULT_FAIL_ON) -> int:
    """The exit code of a run: its worst kind among those `fail_on` counts (0 when none)."""
    return EXIT_OF[worst_kind(k for k in kinds if k in fail_on)]


def parse_fail_on(text: str) -> frozenset[Kind]:
    """`--fail-on breaks,broken-now`: the kinds that fail the run. ValueError names the value
    and the kinds that are valid."""
    words = [w.strip() for w in text.split(",")]
    valid = ", ".join(FAILING)
    if not text.strip() or any(not w for w in words):
        raise ValueError(f"{text!r}: expected a comma list of kinds from {valid}")
    bad = [w for w in words if w not in {k.value for k in FAILING}]
    if bad:
        why = " (info never fails a run)" if "info" in bad else ""
        raise ValueError(f"{text!r}: {bad[0]!r} is not a kind{why}; valid: {valid}")
    return frozenset(Kind(w) for w in words)

"""The upgrade plan every host check and the image impact judge against (what `--target-driver`,
`--target-module`, `--strict` and `--repos` ask)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.facts import drivers as driver_rules
from builder.facts.driver_version import DriverVersion

if TYPE_CHECKING:
    from builder.preflight.host_state import HostState


@dataclass(frozen=True)
class UpgradePlan:
    target: DriverVersion | None = None
    target_module: str | None = None  # open | proprietary, as asked; None: keep/derive
    strict: bool = False  # --strict: a driver branch past its end of life blocks
    repos: bool = False  # --repos: ask the host's dnf what installs the driver's packages

    def flavour(self, state: HostState) -> str | None:
        """The kernel-module flavour the upgrade installs: asked, else the only one the branch
        ships (open from R620), else what runs now, else the branch's default (open from R560)."""
        if self.target is None:
            return None
        if self.target_module:
            return self.target_module
        if self.target.major >= driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH:
            return "open"  # the only flavour the branch ships
        if state.flavour:
            return state.flavour
        return (
            "open" if self.target.major >= driver_rules.OPEN_DEFAULT_FROM_BRANCH else "proprietary"
        )

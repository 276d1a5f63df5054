"""A component's licences as its package states them (pure): an SPDX id or expression where the
stated text is one (cyclonedx-python-lib's LicenseFactory decides), else the stated text as a
licence name (Debian's DEP-5 short names, GPL-2+, are not SPDX ids; a wheel's free-text License
field). Nothing stated, nothing claimed: the component carries no licence (CycloneDX has no
NOASSERTION; an absent `licenses` is the schema's "not known").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cyclonedx.model.license import License

try:
    from cyclonedx.contrib.license.factories import LicenseFactory
except ImportError:  # cyclonedx-python-lib before its contrib package: the older location
    from cyclonedx.factory.license import LicenseFactory

# What older metadata writes when it states nothing (setuptools' default License: UNKNOWN).
NOT_STATED = frozenset({"", "unknown", "none", "noassertion"})
_FACTORY = LicenseFactory()


def _stated(value: object) -> str:
    text = " ".join(str(value or "").split())
    return "" if text.lower() in NOT_STATED else text


def from_text(value: object) -> list[License]:
    """One licence (id, expression or name) from a package's licence field; [] when none."""
    text = _stated(value)
    return [_FACTORY.make_from_string(text)] if text else []


def from_classifiers(classifiers: Iterable[str]) -> list[License]:
    """A wheel's `License :: ...` trove classifiers, each as the licence name it gives
    (`License :: OSI Approved :: MIT License` -> `MIT License`)."""
    names = sorted(
        {c.rsplit("::", 1)[-1].strip() for c in classifiers if c.startswith("License ::")}
    )
    return [_FACTORY.make_with_name(n) for n in names if _stated(n)]


def of_wheel(dist: Mapping[str, Any] | None) -> list[License]:
    """License-Expression or one-line License (the probe keeps the first it finds), else the
    classifiers; [] for a distribution the inventory did not read licences for."""
    if not dist:
        return []
    return from_text(dist.get("license")) or from_classifiers(dist.get("license_classifiers") or ())


def of_os_package(pkg: Mapping[str, Any]) -> list[License]:
    """An rpm's License tag or a deb's DEP-5 `Files: *` licence, as the probe read it."""
    return from_text(pkg.get("license"))

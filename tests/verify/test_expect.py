"""What verify expects of an image, from its matrix cell or from its labels alone."""

from __future__ import annotations

from builder.facts.oses import DISTROS
from builder.verify import expect as expectations
from tests.matrices import load

# An OS entry of its own name on a known distribution: the os-release it expects is the
# distribution's, whatever the entry is called.
LAB = (
    ("  rocky9:\n    base:", "  rocky9-lab:\n    distro: rocky9\n    base:"),
    ("os: [rocky9]", "os: [rocky9-lab]"),
)


def test_os_release_comes_from_the_distro_not_the_os_key() -> None:
    matrix, expansion = load(*LAB)
    cell = next(c for c in expansion.cells if c.os.key == "rocky9-lab")
    got = expectations.from_cell(cell, matrix.project)
    assert got["os"] == "rocky9-lab"
    assert got["os_release"] == ["rocky", "9"]


def test_every_distro_has_an_os_release_expectation() -> None:
    for distro in DISTROS.values():
        assert distro.os_release_id and distro.version_id, distro.key


def test_from_labels_knows_a_distro_key_and_not_an_unknown_os() -> None:
    assert expectations.from_labels({"io.trainimg.os": "debian12"})["os_release"] == [
        "debian",
        "12",
    ]
    assert expectations.from_labels({"io.trainimg.os": "elsewhere"})["os_release"] == ["", ""]

"""The SBOM's dependency edges between Python distributions (builder/sbom/edges.py): each
Requires-Dist whose marker holds under the image's Python, to what is installed beside it."""

from __future__ import annotations

import json
from typing import Any

from builder.build.lock import BuildRecord
from builder.sbom import cyclonedx
from builder.sbom.edges import dependency_edges
from tests.sbom.conftest import CELL

ENV = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.2",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "6.1.0",
    "platform_system": "Linux",
    "platform_version": "#1 SMP",
    "python_full_version": "3.11.2",
    "python_version": "3.11",
    "sys_platform": "linux",
}


def _inv(**requires: list[str]) -> dict[str, Any]:
    names = {"torch", "filelock", "Jinja2", "MarkupSafe", "triton", "numpy", "sympy", "opt-einsum"}
    return {
        "markers": ENV,
        "python": [{"name": n, "requires": requires.get(n, [])} for n in sorted(names)],
    }


def test_an_edge_for_each_requirement_whose_marker_holds_in_the_image() -> None:
    inv = _inv(
        torch=[
            "filelock",
            "jinja2 >=3.0",
            'triton ==3.5.0 ; platform_system == "Linux" and platform_machine == "x86_64"',
            'pywin32 ; sys_platform == "win32"',  # not this image's platform, nor installed
            'numpy ; python_version < "3.10"',  # the image's Python is 3.11
            'opt-einsum >=3.3 ; extra == "opt-einsum"',  # an extra: nobody asked for it here
            "sympy>=1.13.3",
            "not a requirement ((",
            "torch",  # itself
        ],
        Jinja2=["MarkupSafe>=2.0", 'Babel>=2.7 ; extra == "i18n"'],
    )
    assert dependency_edges(inv) == {
        "torch": ["filelock", "jinja2", "sympy", "triton"],
        "jinja2": ["markupsafe"],
    }


def test_the_marker_environment_is_the_image_s_not_the_builder_s() -> None:
    arm = _inv(torch=['triton ; platform_machine == "x86_64"', "filelock"])
    arm["markers"] = {**ENV, "platform_machine": "aarch64"}
    assert dependency_edges(arm) == {"torch": ["filelock"]}


def test_an_inventory_recorded_before_requires_dist_was_kept_has_no_edges() -> None:
    old = _inv(torch=["filelock"])
    del old["markers"]
    assert dependency_edges(old) == {}


def test_the_default_cell_s_sbom_says_what_torch_needs(
    record: BuildRecord, inventory: dict[str, Any]
) -> None:
    doc = json.loads(
        cyclonedx.sbom_json(
            cyclonedx.build_bom(f"localhost/trainimg:{CELL}", record, inventory, cell=CELL)
        )
    )
    refs = {c["name"]: c["bom-ref"] for c in doc["components"] if "purl" in c}
    depends = {d["ref"]: set(d.get("dependsOn", ())) for d in doc["dependencies"]}
    torch = depends[refs["torch"]]
    assert {refs["filelock"], refs["jinja2"], refs["sympy"]} <= torch
    assert refs["markupsafe"] in depends[refs["jinja2"]]
    assert refs["mpmath"] in depends[refs["sympy"]]

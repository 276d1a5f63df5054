"""The inventory probe's licence reading (builder/sbom/inventory.py): its DEP-5 reader, run
in-process on copyright files written here, and the whole probe run by the venv's Python on
this Debian machine (dpkg-query and importlib.metadata as inside a Debian image)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.sbom.edges import dependency_edges
from builder.sbom.inventory import INVENTORY_PROBE

DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: foo

Files: debian/*
Copyright: 2020 Someone
License: MIT

Files: *
Copyright: 2019 Upstream
License: GPL-2+
 This program is free software; ...
"""


def _dep5_reader() -> Callable[[str], str]:
    source = INVENTORY_PROBE[INVENTORY_PROBE.index("def dep5_license") :]
    source = source[: source.index('\nwith open("/etc/os-release")')]
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - the probe's own function, as the image runs it
    reader: Callable[[str], str] = namespace["dep5_license"]
    return reader


def test_dep5_gives_the_files_star_licence_and_free_form_gives_none(tmp_path: Path) -> None:
    read = _dep5_reader()
    (tmp_path / "dep5").write_text(DEP5)
    assert read(str(tmp_path / "dep5")) == "GPL-2+"  # Files: *, its first line only
    (tmp_path / "free").write_text("This is foo, written by Someone.\nLicense: GPL\n")
    assert read(str(tmp_path / "free")) == ""  # not machine-readable: not known
    no_star = DEP5.replace("Files: *", "Files: src/*")
    (tmp_path / "no-star").write_text(no_star)
    assert read(str(tmp_path / "no-star")) == ""
    assert read(str(tmp_path / "absent")) == ""


@pytest.mark.integration
def test_the_probe_reads_licences_and_libraries_on_debian() -> None:
    if not Path("/usr/bin/dpkg-query").exists():
        pytest.skip("needs dpkg-query (a Debian machine)")
    out = subprocess.run(
        [sys.executable, "-c", INVENTORY_PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    inv = json.loads(out.splitlines()[-1])
    assert inv["package_type"] == "deb"
    stated = [p for p in inv["packages"] if p.get("license")]
    assert 0 < len(stated) < len(inv["packages"])  # DEP-5 ones only
    dists = {d["name"].lower(): d for d in inv["python"]}
    assert dists["trainimg"]["license"] == "Apache-2.0"  # pyproject.toml's
    torch = dists["torch"]
    assert torch["license"] or torch["license_classifiers"]
    assert any("/site-packages/torch/_C." in p for p in torch["libraries"])
    # the interpreter's own marker environment, and the edges it gives (builder/sbom/edges.py)
    assert inv["markers"]["python_version"] == "{}.{}".format(*sys.version_info[:2])
    assert {"filelock", "jinja2", "sympy"} <= set(dependency_edges(inv)["torch"])

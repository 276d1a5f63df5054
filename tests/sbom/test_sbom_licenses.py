"""Licences as a package states them (builder/sbom/licenses.py): SPDX where the text is SPDX,
the stated name otherwise, nothing where nothing is stated; an rpm's License tag reaches its
component; a CUDA library takes the version of the wheel (or toolkit) that installed it."""

from __future__ import annotations

import json

from builder.build.lock import BuildRecord
from builder.sbom import cyclonedx, licenses


def test_spdx_where_spdx_else_the_stated_name() -> None:
    (mit,) = licenses.from_text("MIT")
    assert getattr(mit, "id", None) == "MIT"
    (expr,) = licenses.from_text("MIT OR Apache-2.0")
    assert getattr(expr, "value", None) == "MIT OR Apache-2.0"
    (deb,) = licenses.from_text("GPL-2+")  # a DEP-5 short name, not an SPDX id
    assert getattr(deb, "name", None) == "GPL-2+"


def test_nothing_stated_nothing_claimed() -> None:
    for value in (None, "", "  ", "UNKNOWN", "NOASSERTION"):
        assert licenses.from_text(value) == []
    assert licenses.of_wheel(None) == []
    assert licenses.of_wheel({"name": "x", "license": "", "license_classifiers": []}) == []


def test_a_wheel_falls_back_to_its_classifiers() -> None:
    dist = {
        "license": "",
        "license_classifiers": [
            "License :: OSI Approved :: MIT License",
            "License :: OSI Approved :: Apache Software License",
        ],
    }
    names = [getattr(x, "name", None) for x in licenses.of_wheel(dist)]
    assert names == ["Apache Software License", "MIT License"]
    (own,) = licenses.of_wheel({**dist, "license": "BSD-3-Clause"})  # its own field first
    assert getattr(own, "id", None) == "BSD-3-Clause"


def test_an_rpm_license_tag_reaches_its_component(record: BuildRecord) -> None:
    inventory = {
        "os_release": {"ID": "rocky", "VERSION_ID": "9.6", "NAME": "Rocky Linux"},
        "package_type": "rpm",
        "packages": [
            {"name": "bash", "version": "5.1.8-9.el9", "arch": "x86_64", "license": "GPLv3+"},
            {"name": "zlib", "version": "1.2.11-40.el9", "arch": "x86_64", "license": "zlib"},
            {"name": "gpg-pubkey", "version": "8483c65d-5ccc5b19", "arch": "(none)"},
        ],
        "python": [],
    }
    bom = cyclonedx.build_bom("localhost/trainimg:x", record, inventory, cell="x")
    doc = json.loads(cyclonedx.sbom_json(bom))
    by_name = {c["name"]: c for c in doc["components"]}
    assert by_name["bash"]["licenses"] == [{"license": {"name": "GPLv3+"}}]
    assert by_name["zlib"]["licenses"] == [{"license": {"id": "Zlib"}}]
    assert "licenses" not in by_name["gpg-pubkey"]


SITE = "/opt/venv/lib/python3.11/site-packages"


def test_a_cuda_library_takes_the_version_of_what_installed_it(record: BuildRecord) -> None:
    cublas = f"{SITE}/nvidia/cublas/lib/libcublas.so.12"
    inventory = {
        "python": [
            {"name": "nvidia-cublas-cu12", "version": "12.8.4.1", "libraries": [cublas]},
            {"name": "torchao", "version": "0.18.0", "author": "PyTorch Team"},
        ],
        "cuda_libraries": [
            {"path": p, "sass": ["sm_90"], "ptx": []}
            for p in (
                cublas,  # its wheel's RECORD lists it
                f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9",  # no wheel lists it: unknown
                f"{SITE}/torchao/_C.abi3.so",  # no RECORD read: the wheel named like its dir
                "/usr/local/cuda-12.8/lib64/libcufft.so.11",  # the toolkit's directory
                "/usr/local/cuda/compat/libcuda.so.1",  # cuda-compat: a driver's version
            )
        ],
    }
    doc = json.loads(
        cyclonedx.sbom_json(
            cyclonedx.build_bom("localhost/trainimg:x", record, inventory, cell="x")
        )
    )
    got = {c["name"]: (c["version"], c["supplier"]["name"]) for c in doc["components"]}
    nvidia = "NVIDIA Corporation"
    assert got["libcublas.so.12"] == ("12.8.4.1", nvidia)
    assert got["libcudnn.so.9"] == (cyclonedx.UNKNOWN_VERSION, nvidia)
    assert got["_C.abi3.so"] == ("0.18.0", "PyTorch Team")
    assert got["libcufft.so.11"] == ("12.8", nvidia)
    assert got["libcuda.so.1"] == (cyclonedx.UNKNOWN_VERSION, nvidia)

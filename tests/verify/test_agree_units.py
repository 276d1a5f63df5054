"""The supply_chain check's judgement: labels, lock record, SBOM and installed wheels."""

from __future__ import annotations

from typing import Any

from builder.verify.agree import disagreements

IMAGE = "sha256:" + "1" * 64
LABELS = {"io.trainimg.cell": "c", "io.trainimg.torch.version": "2.13.0+cpu"}
RECORD: dict[str, Any] = {
    "image_id": IMAGE,
    "labels": dict(LABELS),
    "wheels": {"torch==2.13.0+cpu": "a" * 64, "Jinja2==3.1.6": "b" * 64},
}
INSTALLED = {"torch": "2.13.0+cpu", "jinja2": "3.1.6", "pip": "23.0.1"}


def _sbom(wheels: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    root = {
        "hashes": [{"alg": "SHA-256", "content": IMAGE[7:]}],
        "properties": [{"name": f"trainimg:label:{k}", "value": v} for k, v in labels.items()],
    }
    comps = []
    for pin, sha in wheels.items():
        name, _, version = pin.partition("==")
        comps.append({"name": name, "version": version, "purl": f"pkg:pypi/{name}@{version}",
                      "hashes": [{"alg": "SHA-256", "content": sha}]})  # fmt: skip
    return {"metadata": {"component": root}, "components": comps}


def test_everything_agrees() -> None:
    sbom = _sbom(RECORD["wheels"], LABELS)
    assert disagreements(IMAGE, LABELS, RECORD, INSTALLED, sbom) == []


def test_a_changed_label_a_swapped_wheel_and_an_extra_package_are_named() -> None:
    labels = {**LABELS, "io.trainimg.torch.version": "2.13.0+cu128"}
    installed = {**INSTALLED, "torch": "2.14.0", "flashinfer": "0.3"}
    found = disagreements(IMAGE, labels, RECORD, installed)
    assert any("label io.trainimg.torch.version" in f for f in found)
    assert "torch: the lock pins 2.13.0+cpu, the image has 2.14.0" in found
    assert "flashinfer 0.3 is installed but no lock entry names it" in found


def test_an_sbom_of_other_wheels_or_another_image_is_named() -> None:
    sbom = _sbom({**RECORD["wheels"], "torch==2.13.0+cpu": "f" * 64}, LABELS)
    found = disagreements(IMAGE, LABELS, RECORD, INSTALLED, sbom)
    assert found == [
        "wheel torch==2.13.0+cpu: the lock says sha256 aaaaaaaaaaaa, the SBOM ffffffffffff"
    ]
    two = "sha256:" + "2" * 64
    other = disagreements(
        two, LABELS, {**RECORD, "image_id": two}, INSTALLED, _sbom(RECORD["wheels"], LABELS)
    )
    assert any("the SBOM describes" in f for f in other)

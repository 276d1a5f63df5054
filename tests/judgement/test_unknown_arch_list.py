"""An arch list no fact records is "unknown" in the label, in the image judgement and in the
matrix's gpu.arch warning: never an empty list that reads as "compiled for nothing"."""

from __future__ import annotations

from packaging.version import Version

from builder.facts import torch_builds
from builder.judgement.image_facts import arch_list_from_labels
from builder.judgement.matrix import check_cell
from builder.judgement.severity import WARN
from builder.matrix.expand import expand
from builder.matrix.load import parse_matrix
from builder.spec import labels
from builder.spec.cell_hash import with_cell_hashes
from tests.conftest import REPO
from tests.matrices import TODAY

# torch 2.12.1's cu130 wheel was not scanned: its arch list is unknown
UNSCANNED = ("torch: [2.13.0, 2.14.1]", "torch: [2.12.1, 2.14.1]")


def test_the_cuda_13_arch_lists_are_the_scanned_ones_and_others_unknown() -> None:
    assert torch_builds.arch_list(Version("2.13.0+cu130"), "cuda") == (
        "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")  # fmt: skip
    assert torch_builds.arch_list(Version("2.12.1+cu130"), "cuda") is None
    assert torch_builds.arch_list(Version("2.11.0+cu128"), "cuda") is not None


def test_an_unknown_arch_list_is_unknown_in_label_and_judgement() -> None:
    text = (REPO / "matrix.yaml").read_text()
    assert UNSCANNED[0] in text
    matrix = parse_matrix(text.replace(*UNSCANNED), "matrix.yaml")
    expansion = with_cell_hashes(expand(matrix), matrix.project)
    c = expansion.find("rocky9-cu130-py3.12-torch2.12.1-runtime")
    assert c is not None
    label = labels.cell_labels(c, matrix.project)[labels.ARCH_LIST_LABEL]
    assert label == "unknown"
    assert arch_list_from_labels({labels.ARCH_LIST_LABEL: label}) is None
    arch = [f for f in check_cell(c, TODAY) if f.id == "gpu.arch"]
    assert arch and all(f.severity is WARN for f in arch)
    assert all("is unknown" in f.message and "nothing" not in f.message for f in arch)

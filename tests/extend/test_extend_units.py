"""The pure parts of `trainimg extend`: requirements judged against a lock, the constraints
file, the child's Containerfile, --copy specs, the fingerprint comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from builder.extend import containerfile, fingerprint, requirements
from builder.spec.labels import PARENT_CELL_LABEL

LOCKED: dict[NormalizedName, Version] = {
    canonicalize_name("torch"): Version("2.13.0+cpu"),
    canonicalize_name("numpy"): Version("2.3.5"),
    canonicalize_name("nvidia-nccl-cu12"): Version("2.27.5"),
}


def _reqs(tmp_path: Path, text: str) -> tuple[requirements.UserRequirement, ...]:
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    return requirements.parse(path)


def test_a_requirement_that_excludes_the_locked_version_is_refused(tmp_path: Path) -> None:
    reqs = _reqs(
        tmp_path, "einops==0.8.1\nTorch>=2.14\nnumpy<3  # fine\nnvidia_nccl_cu12==2.28.3\n"
    )
    why = requirements.replacing(reqs, LOCKED)
    assert len(why) == 2
    assert "line 2" in why[0] and "torch 2.13.0+cpu" in why[0] and "torch>=2.14" in why[0]
    assert "nvidia-nccl-cu12 2.27.5" in why[1] and "==2.28.3" in why[1]


def test_requirements_that_allow_the_locked_versions_pass(tmp_path: Path) -> None:
    reqs = _reqs(tmp_path, "torch\nnumpy>=2,<3\neinops\n")
    assert requirements.replacing(reqs, LOCKED) == []


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("--index-url https://example.org/simple", "no other pip options"),
        ("-e .", "no other pip options"),
        ("foo @ https://example.org/foo.whl", "URLs"),
        ("foo==", "is not a requirement"),
    ],
)
def test_bad_lines_name_the_file_and_line(tmp_path: Path, line: str, says: str) -> None:
    with pytest.raises(requirements.RequirementsError, match=says) as err:
        _reqs(tmp_path, f"einops\n{line}\n")
    assert "requirements.txt:2" in str(err.value)


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(requirements.RequirementsError, match="no requirement"):
        _reqs(tmp_path, "# nothing\n\n")


def test_constraints_pin_every_locked_package() -> None:
    text = requirements.constraints_txt(LOCKED)
    assert text.splitlines()[1:] == [
        "numpy==2.3.5",
        "nvidia-nccl-cu12==2.27.5",
        "torch==2.13.0+cpu",
    ]


PARENT = "sha256:" + "ab" * 32


def test_the_child_containerfile(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    model = tmp_path / "model.yaml"
    model.write_text("x: 1\n")
    copies = [containerfile.parse_copy(f"{app}:/workspace/app", 0)]
    copies.append(containerfile.parse_copy(f"{model}:/workspace/model.yaml", 1))
    text = containerfile.render(PARENT, "cell-a", {PARENT_CELL_LABEL: "cell-a"}, copies)
    assert text.count(f"FROM {PARENT}") == 2
    assert "--require-hashes --no-deps" in text
    assert "-c /tmp/wheels/constraints.txt" in text
    assert 'COPY --chown=1000:1000 ["copy/0/app/", "/workspace/app"]' in text
    assert 'COPY --chown=1000:1000 ["copy/1/model.yaml", "/workspace/model.yaml"]' in text
    assert f'{PARENT_CELL_LABEL}="cell-a"' in text
    assert "\nUSER" not in text  # the parent's unprivileged user throughout
    assert "COPY --from=extra --chown=0:0 /tmp/stage/ /opt/venv/" in text


@pytest.mark.parametrize(
    "dest", ["relative/path", "/a/../etc", "/with space", "/quote'd", "/x;rm -rf /"]
)
def test_copy_destinations_are_plain_absolute_paths(tmp_path: Path, dest: str) -> None:
    with pytest.raises(containerfile.CopySpecError, match="DEST"):
        containerfile.parse_copy(f"{tmp_path}:{dest}", 0)


def test_copy_source_must_exist(tmp_path: Path) -> None:
    with pytest.raises(containerfile.CopySpecError, match="not a file or directory"):
        containerfile.parse_copy(f"{tmp_path / 'nope'}:/workspace/x", 0)


def test_label_values_cannot_reach_the_containerfile_unquoted() -> None:
    from builder.errors import RenderError

    with pytest.raises(RenderError):
        containerfile.render(PARENT, "c", {PARENT_CELL_LABEL: 'x" $(id)'}, [])


FP = {
    "torch": "2.13.0+cpu",
    "torch_cuda": None,
    "torch_libraries": {"libtorch_cpu.so": "0" * 64},
    "nvidia_wheels": [],
    "nccl": None,
    "cudnn": None,
    "torchao": "0.18.0",
    "torchao_ops": ["torchao::a"],
    "sass": {"/opt/venv/x.so": ["sm_90a"]},
}


def test_the_same_stack_has_no_differences() -> None:
    child = {**FP, "sass": {**FP["sass"], "/opt/venv/new.so": ["sm_80"]}}  # type: ignore[dict-item]
    assert fingerprint.compare_fingerprints(FP, child) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("torch", "2.13.0+cu128"),
        ("torch_libraries", {"libtorch_cpu.so": "1" * 64}),
        ("nvidia_wheels", ["nvidia-nccl-cu12==2.28.3"]),
        ("torchao_ops", []),
        ("sass", {"/opt/venv/x.so": ["sm_80"]}),
    ],
)
def test_each_changed_part_is_named(field: str, value: object) -> None:
    diffs = fingerprint.compare_fingerprints(FP, {**FP, field: value})
    assert len(diffs) == 1
    assert field in diffs[0].field or "SASS" in diffs[0].field
    assert "the parent has" in str(diffs[0])


GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "extend.Containerfile"


def test_golden_child_containerfile() -> None:
    """Set UPDATE_GOLDEN=1 to rewrite it after a deliberate template change; hadolint checks it
    with the committed Containerfiles (tests/spec/test_shipped.py)."""
    import os

    copies = [containerfile.Copy(GOLDEN.parent, "/workspace/app")]
    labels = {PARENT_CELL_LABEL: "debian12-cpu-py3.11-torch2.13.0-runtime"}
    text = containerfile.render(PARENT, "debian12-cpu-py3.11-torch2.13.0-runtime", labels, copies)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")

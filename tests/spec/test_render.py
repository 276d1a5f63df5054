"""Rendering: golden files (like HPCCM's), structure of every Containerfile, drift, atomicity."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from builder.atomic_file import atomic_write
from builder.build.context import assemble
from builder.commands.render_cmd import write_all
from builder.errors import RenderError
from builder.facts import torch_builds
from builder.spec import wheel_groups
from builder.spec.labels import (
    BASE_PINNED_LABEL,
    CELL_HASH_LABEL,
    DRIVER_MIN_LABEL,
    GCC_LABEL,
    cell_labels,
)
from builder.spec.render import (
    BASE_TEMPLATE,
    TEMPLATE_DIR,
    drift,
    environment,
    render_all,
    render_cell,
)
from tests.conftest import write_standin_trainer
from tests.matrices import copy_templates, load

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
MATRIX, EXPANSION = load()


def rendered() -> dict[str, str]:
    return {p.parent.name: t for p, t in render_all(REPO, EXPANSION.cells, MATRIX.project).items()}


@pytest.mark.parametrize("name", [c.name for c in EXPANSION.cells])
def test_golden(name: str) -> None:
    """Set UPDATE_GOLDEN=1 to rewrite tests/data/golden after a deliberate template change."""
    text = rendered()[name]
    golden = GOLDEN / f"{name}.Containerfile"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


# Renders every cell in a fresh interpreter and prints {cell: text} as JSON.
RENDER_IN_A_PROCESS = (
    "import json, sys; from tests.spec.test_render import rendered; "
    "json.dump(rendered(), sys.stdout)"
)


@pytest.mark.parametrize("seed", ["0", "1", "4242"])
@pytest.mark.integration
def test_output_is_the_same_in_every_process(seed: str) -> None:
    """Two renders in one process share their hash seed, set order and caches, so they would
    agree even when the output is not deterministic: render in fresh interpreters with
    different PYTHONHASHSEEDs and compare with the committed golden files, byte for byte."""
    proc = subprocess.run(
        [sys.executable, "-c", RENDER_IN_A_PROCESS],
        cwd=REPO,
        env={**os.environ, "PYTHONHASHSEED": seed},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    texts = json.loads(proc.stdout)
    assert sorted(texts) == sorted(c.name for c in EXPANSION.cells)
    for name, text in texts.items():
        golden = (GOLDEN / f"{name}.Containerfile").read_text(encoding="utf-8")
        assert text == golden, f"{name} rendered with PYTHONHASHSEED={seed} differs from golden"


def instructions(text: str) -> list[str]:
    """Instruction keywords in order, continuation lines and comments skipped."""
    out, cont = [], False
    for line in text.splitlines():
        if not cont and line and not line.startswith("#") and not line.startswith(" "):
            out.append(line.split()[0])
        cont = line.endswith("\\")
    return out


def label_block(text: str) -> dict[str, str]:
    block = text[text.index("LABEL \\") :].split("\n\n", 1)[0]
    return dict(re.findall(r'^\s+([a-z0-9.-]+)="([^"]*)"', block, re.M))


@pytest.mark.parametrize("cell", EXPANSION.cells, ids=lambda c: c.name)
def test_structure(cell: object) -> None:
    from builder.matrix.model import Cell

    assert isinstance(cell, Cell)
    text = rendered()[cell.name]
    ins = instructions(text)
    assert ins[0] == "FROM"
    # the trainer is the last layer; only the build-time labels (no layer) follow it
    assert ins[-6:] == ["COPY", "ENTRYPOINT", "CMD", "ARG", "ARG", "LABEL"]
    assert "trainer/ /opt/trainimg/trainer/" in text[: text.index("\nENTRYPOINT")].splitlines()[-1]
    users = [line for line in text.splitlines() if line.startswith("USER ")]
    assert users == ["USER 1000:1000"]
    assert ins.index("USER") < len(ins) - 3  # the trainer is copied as the unprivileged user
    want = cell_labels(cell, MATRIX.project) | {CELL_HASH_LABEL: cell.cell_hash}
    assert label_block(text) == want
    for pin in cell.python_packages:
        assert f"#   {pin.name}=={pin.version}\n" in text
    assert f"#   torch=={torch_builds.pip_pin(cell.torch)}\n" in text
    # Three stages, plain syntax every engine builds: no RUN --mount, the wheelhouse only in the
    # venv stage, each group COPY'd before its hash-pinned install, the final stage copies it.
    assert "--mount" not in text
    froms = [line for line in text.splitlines() if line.startswith("FROM ")]
    assert froms == [f"FROM {cell.os.base_ref} AS os", "FROM os AS venv", "FROM os"]
    final = text[text.index("\nFROM os\n") :]
    assert "wheelhouse" not in final and "/wheels" not in final
    for group in wheel_groups.groups(cell):
        copy = text.index(f"COPY wheelhouse/{group}/ /wheels/{group}/")
        install = text.index(f"-r /wheels/{group}/requirements.txt")
        assert copy < install
        assert f"COPY --from=venv /stage/{group}/ /opt/venv/" in final
    assert text.count("pip install --no-index --require-hashes --no-deps") == len(
        wheel_groups.groups(cell)
    )
    if cell.cuda:
        assert 'ENV NVIDIA_REQUIRE_CUDA="cuda>=12.8 brand=unknown,driver>=470' in text
        assert 'ENV NVIDIA_DRIVER_CAPABILITIES="compute,utility"' in text
        assert 'ENV NVIDIA_VISIBLE_DEVICES="all"' in text
        assert want[DRIVER_MIN_LABEL] == "570.124.06"
        if cell.os.family == "el9":
            assert "sha256sum -c --strict" in text
    else:
        assert "NVIDIA_" not in text
        assert "apt-get" not in text and "dnf" not in text  # air-gapped: no package manager
    compiler = cell.os.gcc.get(cell.gcc, ())
    if cell.os.family == "el9":  # every flavour: torch.compile builds C/C++ at run time
        for pin in (*compiler, cell.os.python[cell.python]):
            assert (
                pin.series and f"      '{pin.name}' \\\n" in text
            )  # by name, then its series checked
            assert (
                f"rpm -q --qf '%{{VERSION}}' '{pin.name}') && case \"$v\" in '{pin.version}'|"
                in text
            )
        assert f"      'python{cell.python}-devel' \\\n" in text
    if cell.os.family == "debian":  # the base brings the compiler: checked, not installed
        assert "apt-get" not in text
        assert "'gcc-12' 'g++-12' make ninja" in text and "Python.h" in text
    elif cell.flavour == "devel":
        assert "      'gcc' \\\n" in text and want[GCC_LABEL] == "11"
        if cell.cuda:
            assert (
                'ENV LIBRARY_PATH="/opt/venv/lib/nvidia-link:/usr/local/cuda-12.8/lib64/stubs"'
                in text
            )


def test_unpinned_base_is_warned_and_labelled() -> None:
    m, e = load(
        (
            "    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
            "",
        )
    )
    text = render_cell(environment(REPO), e.cells[0], m.project)
    assert "# WARNING: the base image is not pinned by digest" in text
    assert label_block(text)[BASE_PINNED_LABEL] == "false"
    assert "FROM quay.io/rockylinux/rockylinux:9.6 AS os\n" in text


def test_pinned_base_is_used_by_digest() -> None:
    text = rendered()["rocky9-cu128-py3.12-torch2.9.1-runtime"]
    assert "FROM quay.io/rockylinux/rockylinux:9.6@sha256:0123456789abcdef" in text
    assert "WARNING" not in text


def test_undefined_template_value_is_an_error(tmp_path: Path) -> None:
    root = copy_templates(tmp_path)
    base = root / BASE_TEMPLATE
    base.write_text(base.read_text().replace("{{ base_ref }}", "{{ base_reff }}"))
    with pytest.raises(RenderError, match="'base_reff' is undefined"):
        render_all(root, EXPANSION.cells, MATRIX.project)


def test_missing_family_template(tmp_path: Path) -> None:
    root = copy_templates(tmp_path)
    (root / "images" / "templates" / "debian.Containerfile.j2").unlink()
    with pytest.raises(RenderError, match=r"debian\.Containerfile\.j2 not found"):
        render_all(root, EXPANSION.cells, MATRIX.project)


def test_the_base_template_is_at_the_top_and_every_family_extends_it() -> None:
    """The layout the design card names: Containerfile.base beside matrix.yaml and images/."""
    assert (REPO / BASE_TEMPLATE).is_file()
    families = sorted((REPO / TEMPLATE_DIR).glob("*.Containerfile.j2"))
    assert [f.name for f in families] == ["debian.Containerfile.j2", "el9.Containerfile.j2"]
    for family in families:
        assert f'{{% extends "{BASE_TEMPLATE}" %}}' in family.read_text(), family


def test_the_base_template_drives_every_cell_and_the_build_hash(tmp_path: Path) -> None:
    root = copy_templates(tmp_path / "project")
    trainer = write_standin_trainer(tmp_path / "trainer")
    before = render_all(root, EXPANSION.cells, MATRIX.project)
    base = root / BASE_TEMPLATE
    base.write_text(
        base.read_text().replace(
            "FROM {{ os_stage }} AS venv", "FROM {{ os_stage }} AS venv\n# edited"
        )
    )
    after = render_all(root, EXPANSION.cells, MATRIX.project)
    assert before.keys() == after.keys()
    for rel, text in after.items():
        assert "\n# edited\n" in text and "# edited" not in before[rel], rel

    def build_hash(text: str) -> str:
        return assemble(text, trainer, None, buildargs={}, labels={}, base="sha256:0").build_hash

    assert all(build_hash(before[rel]) != build_hash(after[rel]) for rel in after)


def test_a_missing_base_template_is_named(tmp_path: Path) -> None:
    root = copy_templates(tmp_path)
    (root / BASE_TEMPLATE).unlink()
    with pytest.raises(
        RenderError, match=r"template Containerfile\.base not found .*beside matrix"
    ):
        render_all(root, EXPANSION.cells, MATRIX.project)


def test_write_then_drift(tmp_path: Path) -> None:
    root = copy_templates(tmp_path)
    outputs = render_all(root, EXPANSION.cells, MATRIX.project)
    first = write_all(root, outputs)
    assert len(first.missing) == len(outputs) and drift(root, outputs).clean
    victim = next(iter(outputs))
    (root / victim).write_text((root / victim).read_text() + "RUN echo edited\n")
    stale = root / "images" / "old-cell" / "Containerfile"
    stale.parent.mkdir()
    stale.write_text("# Rendered by trainimg 0.0.1\nFROM x\n")
    hand = root / "images" / "hand-made" / "Containerfile"
    hand.parent.mkdir()
    hand.write_text("FROM scratch\n")
    d = drift(root, outputs)
    assert d.changed == (victim,) and d.stale == (Path("images/old-cell/Containerfile"),)
    assert not d.missing
    write_all(root, outputs)
    assert drift(root, outputs).clean
    assert not stale.parent.exists()
    assert hand.exists(), "files trainimg did not write are never touched"


def test_atomic_write_leaves_old_file_and_no_temp_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "Containerfile"
    target.write_text("old\n")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["Containerfile"]


def test_written_files_are_as_readable_as_any_new_file(tmp_path: Path) -> None:
    """mkstemp makes 0600 files: a rendered Containerfile or images/lock.json must get what a
    new file gets (0666 less the umask), and a file written again keeps its mode."""
    old = os.umask(0o022)
    try:
        fresh = tmp_path / "images" / "lock.json"
        atomic_write(fresh, "{}\n")
        assert fresh.stat().st_mode & 0o777 == 0o644
        kept = tmp_path / "Containerfile"
        kept.write_text("old\n")
        kept.chmod(0o640)
        atomic_write(kept, "new\n")
        assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_text() == "new\n"
    finally:
        os.umask(old)

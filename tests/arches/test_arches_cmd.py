"""`trainimg arches`: files, directories and images; the --gpu verdicts and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.arches import coverage as arches
from builder.arches import scan as image_scan
from builder.arches.fatbin import scan_paths
from builder.cli import main
from builder.engines.base import RunResult
from builder.errors import TrainimgError
from builder.spec.labels import VERIFY_LABEL
from tests.fake_engine import FakeEngine

from .fatbin_bytes import PTX, SASS, container, elf64, entry


@pytest.fixture
def libdir(tmp_path: Path) -> Path:
    d = tmp_path / "site"
    d.mkdir()
    hopper_only = container(entry(SASS, 80), entry(SASS, 90), entry(PTX, 90))
    both = container(entry(SASS, 90), entry(SASS, 100), entry(SASS, 120))
    (d / "libhopper.so").write_bytes(elf64({".nv_fatbin": hopper_only}))
    (d / "libboth.so").write_bytes(elf64({".nv_fatbin": both + both}))
    (d / "libcpu.so").write_bytes(elf64({".text": b"\x90" * 16}))
    return d


def test_parse_gpu() -> None:
    assert arches.parse_gpu("b200") == ("NVIDIA B200 (sm_100)", (10, 0))
    assert arches.parse_gpu("RTX5090")[1] == (12, 0)
    assert arches.parse_gpu("sm_103")[1] == (10, 3)
    assert arches.parse_gpu("12.1")[1] == (12, 1)
    assert arches.parse_gpu("90")[1] == (9, 0)
    with pytest.raises(TrainimgError, match="unknown GPU 'tpu'"):
        arches.parse_gpu("tpu")


@pytest.mark.parametrize(
    ("modules", "cc", "verdict"),
    [
        ([["sm_90", "sm_100"]], (10, 3), "yes"),  # same major, higher minor: B300 runs sm_100
        ([["sm_100"]], (12, 0), "no"),  # never across majors
        ([["sm_100a"]], (10, 3), "no"),  # arch-specific: that exact GPU only
        ([["sm_100a"]], (10, 0), "yes"),
        ([["sm_100f"]], (10, 3), "yes"),  # family: same major
        ([["sm_90", "compute_90"]], (12, 0), "jit"),  # plain PTX JITs for anything newer
        ([["compute_100f"]], (12, 0), "no"),
        ([["compute_120"]], (10, 0), "no"),  # PTX never runs on an older GPU
        ([["sm_120"], ["sm_90"]], (12, 0), "no"),  # one module short: not covered
        ([["sm_120"], ["compute_90"]], (12, 1), "jit"),
        ([["lto_90"]], (9, 0), "no"),
        # a module of another GPU's arch-specific code only is never loaded here (libnccl's
        # sm_100f kernels on an H100); one of plain code for older GPUs only is a gap
        ([["sm_90", "sm_100"], ["sm_100f"]], (9, 0), "yes"),
        ([["sm_90", "sm_100"], ["sm_100a", "sm_120a"]], (9, 0), "yes"),
        ([["sm_90", "sm_100"], ["sm_80"]], (9, 0), "no"),
        ([["sm_90"], ["sm_100f"]], (12, 0), "no"),  # the general module lacks sm_120
    ],
)
def test_coverage_rules(modules: list[list[str]], cc: tuple[int, int], verdict: str) -> None:
    assert arches.coverage("lib", modules, cc).verdict == verdict


def test_cli_directory_with_gpus(libdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arches", str(libdir), "--gpu", "h100"]) == 0
    out = capsys.readouterr().out
    assert "libboth.so" in out and "SASS in every module : sm_90 sm_100 sm_120" in out
    assert "2 libraries with CUDA device code, 1 without" in out
    assert "NVIDIA H100 (sm_90): runs natively" in out
    assert main(["arches", str(libdir), "--gpu", "b200"]) == 0  # libhopper by PTX JIT
    assert "only after a PTX JIT compile" in capsys.readouterr().out
    assert main(["arches", str(libdir), "--gpu", "a100"]) == 1  # libboth has no sm_80
    assert "does NOT run" in capsys.readouterr().out


def test_cli_json(libdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arches", str(libdir / "libboth.so"), "--gpu", "rtx5090", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "trainimg.arches" and data["target_kind"] == "path"
    [lib] = data["libraries"]
    assert lib["sass"] == ["sm_90", "sm_100", "sm_120"] and lib["containers"] == 2
    assert "per_container" not in lib
    [gpu] = data["gpus"]
    assert gpu["cc"] == [12, 0] and gpu["verdict"] == "yes"
    assert gpu["libraries"][0]["native"] == 2


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a library at all")
    assert main(["arches", str(text)]) == 2
    assert "not an ELF file" in capsys.readouterr().err
    assert main(["arches", str(tmp_path), "--gpu", "nonsense"]) == 2
    assert "unknown GPU 'nonsense'" in capsys.readouterr().err


def test_cli_real_torch_on_b200_and_rtx5090(
    torch_cu128: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lib = torch_cu128 / "torch" / "lib" / "libtorch_cuda.so"
    assert main(["arches", str(lib), "--gpu", "b200", "--gpu", "rtx5090", "--gpu", "b300"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA B200 (sm_100): yes: all 397 kernel modules" in out
    assert "GeForce RTX 5090 (sm_120): yes" in out
    assert "NVIDIA B300 (sm_103): yes" in out  # sm_100 SASS runs on 10.3
    assert main(["arches", str(lib), "--gpu", "sm_61"]) == 1  # Pascal: dropped from cu128


def test_image_scan_runs_the_reader_inside(libdir: Path) -> None:
    """The image path: the reader source goes in as `python3 -c`, JSON comes back."""
    engine = FakeEngine()
    payload = json.dumps(scan_paths([libdir]).to_dict())
    engine.run_result = RunResult(0, "noise\n" + payload + "\n", "")
    data = image_scan.scan_image(engine, "localhost/img:1", ["/opt/venv"])
    spec = engine.last_run
    assert spec.entrypoint == ["python3"] and spec.network == "none"
    assert spec.command[0] == "-c" and "0xBA55ED50" in spec.command[1]
    assert spec.command[2:] == ["--skip-missing", "/opt/venv"]
    assert spec.labels == {VERIFY_LABEL: "arches"}
    assert len(data["libraries"]) == 2
    engine.run_result = RunResult(127, "", 'exec: "python3": executable file not found in $PATH')
    with pytest.raises(TrainimgError, match="the image has no python3"):
        image_scan.scan_image(engine, "localhost/img:1")


def test_reader_source_is_self_contained() -> None:
    src = image_scan.reader_source()
    imports = [ln for ln in src.splitlines() if ln.startswith(("import ", "from "))]
    assert imports and all("builder" not in ln for ln in imports), imports


def test_documented_is_never_said_to_run_natively(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cuFFT keeps its kernels outside .nv_fatbin: its verdict is NVIDIA's documentation, and a
    summary that rests on it says so instead of "runs natively"."""
    d = tmp_path / "site" / "nvidia" / "cufft" / "lib"
    d.mkdir(parents=True)
    both = container(entry(SASS, 90), entry(SASS, 100), entry(SASS, 120))
    (d.parent.parent.parent / "libboth.so").write_bytes(elf64({".nv_fatbin": both}))
    (d / "libcufft.so.11").write_bytes(elf64({".nv_fatbin": container(entry(SASS, 52))}))
    covs = [
        arches.library_coverage(lib.to_dict(), (10, 0)) for lib in scan_paths([tmp_path]).libraries
    ]
    assert sorted(c.verdict for c in covs) == ["documented", "yes"]
    assert arches.overall(covs) == "documented"
    assert arches.documented_only(covs) == [str(d / "libcufft.so.11")]
    assert main(["arches", str(tmp_path / "site"), "--gpu", "b200"]) == 0
    out = capsys.readouterr().out
    assert "runs natively:" not in out
    assert "NVIDIA B200 (sm_100): runs natively where the scan can tell" in out
    assert "judged from NVIDIA's documentation only: libcufft.so.11" in out
    assert main(["arches", str(tmp_path / "site"), "--gpu", "b200", "--json"]) == 0
    [gpu] = json.loads(capsys.readouterr().out)["gpus"]
    assert gpu["verdict"] == "documented" and gpu["documented"] == ["libcufft.so.11"]

"""The build context and its build hash: what changes the hash, what does not, the tarball."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from builder.build.context import BuildContext, ContextError, assemble
from builder.build.wheelhouse import Locked, Selection, sha256_file
from builder.spec.trainer_version import TrainerVersionError, trainer_version
from tests.conftest import write_standin_trainer

CONTAINERFILE = "FROM localhost/base\nCOPY trainer/ /opt/trainimg/trainer/\n"


@pytest.fixture
def trainer(tmp_path: Path) -> Path:
    t = write_standin_trainer(tmp_path / "src" / "trainer", "1.2.3")
    (t / "models").mkdir()
    (t / "models" / "tiny.py").write_text("WIDTH = 64\n")
    return t


@pytest.fixture
def wheels(tmp_path: Path) -> Selection:
    wh = tmp_path / "wh"
    wh.mkdir()
    for name in ("a-1.0-py3-none-any.whl", "b-2.0-py3-none-any.whl"):
        (wh / name).write_bytes(name.encode())
    return Selection(wh, tuple(_locked(p) for p in sorted(wh.glob("*.whl"))), ("torch", "rest"))


def _locked(path: Path) -> Locked:
    name, version = path.name.split("-")[:2]
    group = "torch" if name == "a" else "rest"
    return Locked(path, canonicalize_name(name), Version(version), sha256_file(path), group)


def ctx(trainer: Path, wheels: Selection | None, **kw: object) -> BuildContext:
    args: dict[str, object] = {"buildargs": {"X": "1"}, "labels": {}, "base": "sha256:b"}
    args.update(kw)
    text = str(args.pop("containerfile", CONTAINERFILE))
    return assemble(text, trainer, wheels, **args)  # type: ignore[arg-type]


def names(c: BuildContext) -> list[str]:
    data = io.BytesIO()
    c.write_tar(data)
    data.seek(0)
    with tarfile.open(fileobj=data) as tar:
        return tar.getnames()


def test_layout(trainer: Path, wheels: Selection) -> None:
    assert names(ctx(trainer, wheels)) == [
        "Containerfile",
        "trainer",
        "trainer/__init__.py",
        "trainer/__main__.py",
        "trainer/models",
        "trainer/models/tiny.py",
        "wheelhouse",
        "wheelhouse/torch",
        "wheelhouse/torch/requirements.txt",
        "wheelhouse/torch/a-1.0-py3-none-any.whl",
        "wheelhouse/rest",
        "wheelhouse/rest/requirements.txt",
        "wheelhouse/rest/b-2.0-py3-none-any.whl",
    ]
    tar = io.BytesIO()
    ctx(trainer, wheels).write_tar(tar)
    tar.seek(0)
    with tarfile.open(fileobj=tar) as t:
        member = t.extractfile("wheelhouse/rest/requirements.txt")
        assert member is not None
        req = member.read().decode()
    assert f"b==2.0 --hash=sha256:{wheels.files[1][1]}\n" in req and "a==" not in req
    assert "wheelhouse" in names(ctx(trainer, None))  # an empty wheelhouse/ still exists


def test_hash_covers_every_input(trainer: Path, wheels: Selection, tmp_path: Path) -> None:
    base = ctx(trainer, wheels).build_hash
    assert len(base) == 16
    assert ctx(trainer, wheels, containerfile=CONTAINERFILE + "# x\n").build_hash != base
    assert ctx(trainer, wheels, buildargs={}).build_hash != base
    assert ctx(trainer, wheels, labels={"k": "v"}).build_hash != base
    assert ctx(trainer, wheels, base="sha256:other").build_hash != base
    assert ctx(trainer, None).build_hash != base
    (trainer / "models" / "tiny.py").write_text("WIDTH = 128\n")
    changed = ctx(trainer, wheels).build_hash
    assert changed != base
    (trainer / "models" / "tiny.py").chmod(0o755)
    assert ctx(trainer, wheels).build_hash != changed  # the mode reaches the image too
    first = wheels.files[0][0]
    first.write_bytes(b"another build of a-1.0")
    rehashed = Selection(wheels.directory, (_locked(first), wheels.wheels[1]), wheels.groups)
    assert ctx(trainer, rehashed).build_hash != ctx(trainer, wheels).build_hash


def test_hash_ignores_timestamps_caches_and_location(
    trainer: Path, wheels: Selection, tmp_path: Path
) -> None:
    base = ctx(trainer, wheels).build_hash
    os.utime(trainer / "__main__.py", (1, 1))
    (trainer / "__pycache__").mkdir()
    (trainer / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (trainer / "models" / "tiny.pyc").write_bytes(b"\0")
    assert ctx(trainer, wheels).build_hash == base
    moved = tmp_path / "elsewhere" / "trainer"
    shutil.copytree(trainer, moved)
    assert ctx(moved, wheels).build_hash == base


def test_tarball_is_deterministic(trainer: Path, wheels: Selection) -> None:
    one, two = io.BytesIO(), io.BytesIO()
    ctx(trainer, wheels).write_tar(one)
    os.utime(trainer / "__init__.py", (12345, 12345))
    ctx(trainer, wheels).write_tar(two)
    assert one.getvalue() == two.getvalue()
    one.seek(0)
    with tarfile.open(fileobj=one) as tar:
        members = tar.getmembers()
    assert {(m.uid, m.gid, m.mtime) for m in members} == {(0, 0, 0)}
    assert {m.mode for m in members} <= {0o644, 0o755}


def test_a_file_changed_after_hashing_is_caught(trainer: Path, wheels: Selection) -> None:
    c = ctx(trainer, wheels)
    wheels.files[1][0].write_bytes(b"swapped underneath")
    with pytest.raises(ContextError, match="changed while"):
        c.write_tar(io.BytesIO())


def test_trainer_version_is_read_as_text(trainer: Path) -> None:
    assert trainer_version(trainer) == "1.2.3"
    (trainer / "__init__.py").write_text('"""doc"""\n\n__version__: str = "0.4.0.dev1"\n')
    assert trainer_version(trainer) == "0.4.0.dev1"
    (trainer / "__init__.py").write_text('__version__ = "1.0; rm -rf /"\n')
    with pytest.raises(TrainerVersionError, match="not a plain version"):
        trainer_version(trainer)
    (trainer / "__init__.py").write_text("VERSION = 1\n")
    with pytest.raises(TrainerVersionError, match="__version__"):
        trainer_version(trainer)
    with pytest.raises(TrainerVersionError, match="missing"):
        trainer_version(trainer.parent / "nowhere")


def test_trainer_must_be_runnable_and_plain(trainer: Path, wheels: Selection) -> None:
    (trainer / "link.py").symlink_to(trainer / "__init__.py")
    with pytest.raises(ContextError, match="symbolic link"):
        ctx(trainer, wheels)
    (trainer / "link.py").unlink()
    (trainer / "__main__.py").unlink()
    with pytest.raises(ContextError, match="python -m trainer"):
        ctx(trainer, wheels)

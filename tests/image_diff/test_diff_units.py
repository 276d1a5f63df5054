"""`trainimg diff`'s reading and comparison, on docker-archive tarballs made here (the layout
podman's and Docker's image save write: manifest.json, the config, one tar per layer)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from builder.image_diff.archive import layer_entries, read_saved
from builder.image_diff.compare import (
    ImageDiff,
    compare_config,
    compare_files,
    compare_layers,
    history_difference,
)


def _layer(files: dict[str, tuple[bytes, int]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, (data, mtime) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _archive(path: Path, layers: list[bytes], labels: dict[str, str], created: str) -> Path:
    diff_ids = ["sha256:" + hashlib.sha256(b).hexdigest() for b in layers]
    config = {
        "created": created,
        "config": {"Labels": labels, "User": "1000:1000"},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": created, "created_by": f"step {i}"} for i in range(len(layers))],
    }
    blobs = {"config.json": json.dumps(config).encode()}
    names = []
    for d, blob in zip(diff_ids, layers, strict=True):
        names.append(f"{d[7:]}.tar")
        blobs[names[-1]] = blob
    manifest = [{"Config": "config.json", "RepoTags": [], "Layers": names}]
    blobs["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in blobs.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_the_first_differing_layer_and_its_files_are_named(tmp_path: Path) -> None:
    base = _layer({"etc/os-release": (b"ID=debian\n", 0)})
    a_top = _layer({"opt/x.pyc": (b"\x00stamp-1", 0), "opt/same": (b"s", 0), "opt/gone": (b"g", 0)})
    b_top = _layer({"opt/x.pyc": (b"\x00stamp-2", 0), "opt/same": (b"s", 7), "opt/new": (b"n", 0)})
    a = read_saved(_archive(tmp_path / "a.tar", [base, a_top], {"k": "1"}, "2026-11-29T00:00:00Z"))
    b = read_saved(_archive(tmp_path / "b.tar", [base, b_top], {"k": "2"}, "2026-12-01T10:00:00Z"))
    diff = ImageDiff()
    compare_config(a.config, b.config, diff)
    compare_layers(a.diff_ids, b.diff_ids, diff)
    assert diff.differing_layers == [1]
    files = compare_files(layer_entries(a, 1), layer_entries(b, 1))
    assert files[0] == "- /opt/gone"
    assert files[1] == "+ /opt/new"
    assert files[2] == "~ /opt/same: mtime 0 -> 7"
    assert files[3].startswith("~ /opt/x.pyc: content ")
    diff.files[1] = files
    text = diff.text()
    assert "k: '1' -> '2'" in text
    assert "created: 2026-11-29T00:00:00Z -> 2026-12-01T10:00:00Z" in text
    assert "1 of 2 layers the same" in text
    assert "files of layer 2: 4 differ" in text
    assert not diff.same


def test_the_same_archive_has_no_difference(tmp_path: Path) -> None:
    layer = _layer({"a": (b"1", 0)})
    a = read_saved(_archive(tmp_path / "a.tar", [layer], {"k": "1"}, "2026-11-29T00:00:00Z"))
    diff = ImageDiff()
    compare_config(a.config, a.config, diff)
    compare_layers(a.diff_ids, a.diff_ids, diff)
    assert diff.same
    assert compare_files(layer_entries(a, 0), layer_entries(a, 0)) == []


def test_a_difference_outside_the_named_keys_is_named_by_its_path() -> None:
    """Two configurations alike in labels, config, creation and history commands, differing in
    a history comment: `same` would be a lie; the path and both values are given instead."""
    base = {
        "created": "2026-11-30T02:21:41Z",
        "config": {"User": "1000:1000", "Labels": {"a": "1"}},
        "history": [{"created_by": "RUN x", "comment": "FROM os"}],
        "rootfs": {"type": "layers", "diff_ids": ["sha256:aa"]},
    }
    other = {**base, "history": [{"created_by": "RUN x", "comment": "FROM 1a2b"}]}
    other["rootfs"] = {"type": "layers", "diff_ids": ["sha256:bb"]}  # the layers' own business
    diff = ImageDiff()
    compare_config(base, other, diff)
    assert not diff.same
    assert diff.config == ["history[0].comment: 'FROM os' -> 'FROM 1a2b'"]


def test_an_added_layer_lists_its_files_and_the_differing_step_is_named(tmp_path: Path) -> None:
    base = _layer({"etc/os-release": (b"ID=debian\n", 0)})
    extra = _layer({"opt/venv/new.pth": (b"import evil\n", 0), "opt/venv/bin/x": (b"#!", 0)})
    a = read_saved(_archive(tmp_path / "a.tar", [base], {"k": "1"}, "2026-11-29T00:00:00Z"))
    b = read_saved(_archive(tmp_path / "b.tar", [base, extra], {"k": "1"}, "2026-11-29T00:00:00Z"))
    diff = ImageDiff()
    compare_config(a.config, b.config, diff)
    compare_layers(a.diff_ids, b.diff_ids, diff)
    assert diff.differing_layers == [1]
    assert diff.layers == [f"layer 2: added ({b.diff_ids[1][:19]}…)"]
    assert diff.config == ["history: step 2 of 2 differs (1 steps -> 2): (none) -> 'step 1'"]
    diff.files[1] = compare_files({}, layer_entries(b, 1))
    text = diff.text()
    assert "None" not in text
    assert "+ /opt/venv/new.pth" in text and "+ /opt/venv/bin/x" in text


def test_the_first_differing_history_step_is_named_with_both_commands() -> None:
    a = ["FROM base", "RUN pip install torch==2.11.0", "COPY trainer/ /opt/trainer"]
    b = ["FROM base", "RUN pip install torch==2.13.0", "COPY trainer/ /opt/trainer"]
    assert history_difference(a, b) == (
        "history: step 2 of 3 differs: 'RUN pip install torch==2.11.0' -> "
        "'RUN pip install torch==2.13.0'"
    )

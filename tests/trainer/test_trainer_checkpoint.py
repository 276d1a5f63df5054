"""Atomic, checksummed, keep-last-N checkpoints; every kind of bad checkpoint is exit 2."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer import checkpoint
from trainer.errors import BadInput

WEIGHTS = torch.arange(1000.0)
STATE: dict[str, Any] = {
    "model": {"w": WEIGHTS},
    "optimizer": {"state": {}, "param_groups": []},
    "rng": {"torch": torch.get_rng_state(), "cuda": [], "python": random.getstate()},
    "data_position": {"step": 1},
}
META: dict[str, Any] = {
    "config": {"train": {}, "precision": {}},
    "arch": {},
    "data": {},
    "world_size": 1,
}


def test_round_trip_and_keep_last(tmp_path: Path) -> None:
    for step in (1, 2, 3, 4):
        checkpoint.save(tmp_path, step, STATE, META, keep_last=2)
    assert [s for s, _ in checkpoint.list_steps(tmp_path)] == [3, 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000003", "step_00000004"]
    loaded = checkpoint.load(tmp_path / "step_00000004")
    assert loaded.step == 4 and torch.equal(loaded.state["model"]["w"], WEIGHTS)
    assert checkpoint.find_resume("latest", tmp_path) == tmp_path / "step_00000004"
    # The same step saved again replaces it whole.
    checkpoint.save(tmp_path, 4, STATE | {"data_position": {"step": 44}}, META, keep_last=2)
    assert checkpoint.load(tmp_path / "step_00000004" / "state.pt").state["data_position"] == {
        "step": 44
    }


def _corrupt_byte(path: Path) -> None:
    data = bytearray((path / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "state.pt").write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = (path / "state.pt").read_bytes()
    (path / "state.pt").write_bytes(data[: len(data) // 2])


def _drop_meta(path: Path) -> None:
    (path / "meta.json").unlink()


def _garble_meta(path: Path) -> None:
    (path / "meta.json").write_text("{not json")


def _rehash(path: Path, **meta_changes: Any) -> None:
    """Damage that a checksum cannot see: meta.json names the new state.pt's hash."""
    meta = json.loads((path / "meta.json").read_text())
    meta["state_sha256"] = hashlib.sha256((path / "state.pt").read_bytes()).hexdigest()
    for key, value in meta_changes.items():
        if value is None:
            del meta[key]
        else:
            meta[key] = value
    (path / "meta.json").write_text(json.dumps(meta))


def _wrong_keys(path: Path) -> None:
    torch.save({"model": {}}, path / "state.pt")
    _rehash(path)


def _meta_wrong_type(path: Path) -> None:
    _rehash(path, step="four")


def _meta_missing_key(path: Path) -> None:
    _rehash(path, arch=None)


def _bad_rng(path: Path) -> None:
    torch.save(STATE | {"rng": {"torch": torch.zeros(3), "python": [1, 2]}}, path / "state.pt")
    _rehash(path)


def _bad_model(path: Path) -> None:
    torch.save(STATE | {"model": {"w": [1.0, 2.0]}}, path / "state.pt")
    _rehash(path)


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (_corrupt_byte, "does not match the sha256"),
        (_truncate, "does not match the sha256"),
        (_drop_meta, "cannot read meta.json"),
        (_garble_meta, "cannot read meta.json"),
        (_wrong_keys, "lacks optimizer, rng, data_position"),
        (_meta_wrong_type, "'step' should be a JSON int"),
        (_meta_missing_key, "the key 'arch' is missing"),
        (_bad_rng, "malformed generator state"),
        (_bad_model, "not a mapping of names to tensors"),
    ],
)
def test_damaged_checkpoints_are_refused(tmp_path: Path, damage: object, needle: str) -> None:
    path = checkpoint.save(tmp_path, 1, STATE, META, keep_last=1)
    damage(path)  # type: ignore[operator]
    with pytest.raises(BadInput, match=needle):
        checkpoint.load(path)


def test_a_flipped_byte_is_invisible_to_torch_load_alone(tmp_path: Path) -> None:
    """Why the sha256 is there."""
    path = checkpoint.save(tmp_path, 1, STATE, META, keep_last=1)
    _corrupt_byte(path)
    damaged = torch.load(path / "state.pt", weights_only=True)
    assert not torch.equal(damaged["model"]["w"], WEIGHTS)


def test_stale_temporaries_are_removed_and_not_listed(tmp_path: Path) -> None:
    (tmp_path / ".tmp-step_00000007-123").mkdir()
    (tmp_path / ".old-step_00000002-9").mkdir()
    (tmp_path / "notes").mkdir()
    assert checkpoint.list_steps(tmp_path) == []
    assert checkpoint.find_resume("latest", tmp_path) is None
    checkpoint.remove_stale(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]


def test_directory_and_resume_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(BadInput, match="not writable"):
        checkpoint.prepare_dir(str(blocker / "ckpt"))
    with pytest.raises(BadInput, match="no such checkpoint"):
        checkpoint.find_resume(str(tmp_path / "nope"), None)
    with pytest.raises(BadInput, match="needs --ckpt-dir"):
        checkpoint.find_resume("latest", None)


def test_newest_valid_checkpoint_wins_and_all_bad_is_an_error(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        checkpoint.save(tmp_path, step, STATE, META, keep_last=3)
    _corrupt_byte(tmp_path / "step_00000003")
    loaded, notes = checkpoint.load_newest_valid(tmp_path)
    assert loaded is not None and loaded.step == 2
    assert "skipping" in notes[0] and "step_00000003" in notes[0] and "step_00000002" in notes[-1]
    for step in (1, 2):
        _corrupt_byte(tmp_path / f"step_{step:08d}")
    with pytest.raises(BadInput, match="all 3 are corrupt"):
        checkpoint.load_newest_valid(tmp_path)

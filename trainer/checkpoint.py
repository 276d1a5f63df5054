"""Checkpoints in a mounted directory: atomic, checksummed, keep-last-N.

Each checkpoint is a directory `step_00000120/` with `state.pt` (model, optimizer, scaler, RNG
states, data position, health windows) and `meta.json` (step, sha256 of state.pt, the config,
the data fingerprint). It is written under a temporary name, fsynced, then renamed into place
and the parent directory fsynced, so a crash or `podman stop` never leaves a half-written
checkpoint under a real name. torch.load does not notice flipped bytes in a tensor, hence the
sha256, checked on resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

import torch

from trainer import __version__
from trainer.errors import BadInput, TrainerError

FORMAT: Final = 1
STATE_FILE: Final = "state.pt"
META_FILE: Final = "meta.json"
_NAME: Final = re.compile(r"^step_(\d{8})$")
_STALE: Final = re.compile(r"^\.(tmp|old)-step_\d{8}-\d+$")
_REQUIRED: Final = ("model", "optimizer", "rng", "data_position")
_CHUNK: Final = 1 << 22


def step_name(step: int) -> str:
    return f"step_{step:08d}"


class _HashingWriter:
    """A write-through file wrapper that hashes what torch.save writes (no second read)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.digest = hashlib.sha256()
        self.size = 0
        self.failure: OSError | None = None  # torch.save reports it as a RuntimeError

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        try:
            return self.f.write(data)
        except OSError as exc:
            self.failure = exc
            raise

    def flush(self) -> None:
        self.f.flush()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def prepare_dir(path: str) -> Path:
    """Create the directory if needed and prove it is writable (BadInput otherwise)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BadInput(
            f"checkpoint dir {path} is not writable ({exc.strerror or exc}); mount a writable "
            "volume there or pass another --ckpt-dir"
        ) from exc
    return p


def remove_stale(path: Path) -> None:
    """Leftovers of an interrupted save (temporary or superseded directories)."""
    for child in path.iterdir():
        if _STALE.match(child.name) and child.is_dir():
            shutil.rmtree(child, ignore_errors=True)


def list_steps(path: Path) -> list[tuple[int, Path]]:
    found = []
    for child in path.iterdir() if path.is_dir() else ():
        m = _NAME.match(child.name)
        if m and child.is_dir():
            found.append((int(m.group(1)), child))
    return sorted(found)


class WriteFailed(TrainerError):
    """The disk refused a checkpoint (full, gone read-only, quota): exit 2, earlier ones intact."""


def save(
    path: Path, step: int, state: dict[str, Any], meta: dict[str, Any], keep_last: int
) -> Path:
    """Write checkpoint `step` atomically, then drop all but the newest `keep_last`.

    A failed write (disk full, quota) removes its temporary directory and raises WriteFailed;
    the checkpoints already there are untouched."""
    tmp = path / f".tmp-{step_name(step)}-{os.getpid()}"
    try:
        return _save(path, tmp, step, state, meta, keep_last)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WriteFailed(
            f"checkpoint dir {path}: writing {step_name(step)} failed "
            f"({exc.strerror or exc}); the earlier checkpoints are intact. Free space there, "
            "lower checkpoint.keep_last or pass another --ckpt-dir, then --resume"
        ) from exc


def _save(
    path: Path, tmp: Path, step: int, state: dict[str, Any], meta: dict[str, Any], keep_last: int
) -> Path:
    pid = os.getpid()
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    with open(tmp / STATE_FILE, "wb") as f:
        writer = _HashingWriter(f)
        try:
            torch.save(state, writer)  # type: ignore[arg-type]
        except RuntimeError as exc:
            if writer.failure is None:
                raise
            raise writer.failure from exc
        f.flush()
        os.fsync(f.fileno())
    full_meta = {
        "format": FORMAT,
        "trainer_version": __version__,
        "step": step,
        "created_unix": time.time(),
        "state_sha256": writer.digest.hexdigest(),
        "state_bytes": writer.size,
        **meta,
    }
    with open(tmp / META_FILE, "w", encoding="utf-8") as f:
        json.dump(full_meta, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)
    final = path / step_name(step)
    if final.exists():  # the same step saved again (e.g. interrupted right after a resume)
        old = path / f".old-{step_name(step)}-{pid}"
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)
    _fsync_dir(path)
    for _, stale in list_steps(path)[:-keep_last]:
        shutil.rmtree(stale, ignore_errors=True)
    return final


@dataclass(frozen=True)
class Loaded:
    path: Path
    step: int
    state: dict[str, Any]
    meta: dict[str, Any]


def _corrupt(path: Path, why: str) -> BadInput:
    return BadInput(
        f"checkpoint {path} is corrupt or incomplete: {why}. Remove it to resume from an older "
        "one, or start without --resume"
    )


def load(path: Path) -> Loaded:
    """Read and verify a checkpoint directory (or its state.pt); BadInput when it is bad."""
    if path.name == STATE_FILE:
        path = path.parent
    if not path.is_dir():
        raise BadInput(f"checkpoint {path} does not exist")
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _corrupt(path, f"cannot read {META_FILE} ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _corrupt(path, f"{META_FILE} is not a format-{FORMAT} checkpoint description")
    digest = hashlib.sha256()
    try:
        with open(path / STATE_FILE, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise _corrupt(path, f"cannot read {STATE_FILE} ({exc.strerror or exc})") from exc
    if digest.hexdigest() != meta.get("state_sha256"):
        raise _corrupt(path, f"{STATE_FILE} does not match the sha256 in {META_FILE}")
    problem = _meta_problem(meta)
    if problem:
        raise _corrupt(path, f"{META_FILE}: {problem}")
    try:
        state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a bad archive
        raise _corrupt(path, f"torch.load failed ({type(exc).__name__}: {exc})") from exc
    if not isinstance(state, dict):
        raise _corrupt(path, f"{STATE_FILE} holds a {type(state).__name__}, not a mapping")
    missing = [k for k in _REQUIRED if k not in state]
    if missing:
        raise _corrupt(path, f"{STATE_FILE} lacks {', '.join(missing)}")
    problem = _state_problem(state)
    if problem:
        raise _corrupt(path, f"{STATE_FILE}: {problem}")
    return Loaded(path=path, step=meta["step"], state=state, meta=meta)


# meta.json keys this trainer reads, with their JSON types
_META_TYPES: Final = {
    "step": int,
    "state_sha256": str,
    "config": dict,
    "arch": dict,
    "data": dict,
    "world_size": int,
}


def _meta_problem(meta: dict[str, Any]) -> str | None:
    for key, kind in _META_TYPES.items():
        if key not in meta:
            return f"the key {key!r} is missing"
        value = meta[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"{key!r} should be a JSON {kind.__name__}, not {value!r}"[:200]
    if meta["step"] < 0 or meta["world_size"] < 1:
        return f"step {meta['step']} / world_size {meta['world_size']} out of range"
    train = meta["config"].get("train")
    precision = meta["config"].get("precision")
    if not isinstance(train, dict) or not isinstance(precision, dict):
        return "config lacks its train/precision sections"
    return None


def _state_problem(state: dict[str, Any]) -> str | None:
    """Shapes of the parts the loop reads, so a bad state is exit 2, not a traceback later."""
    model = state["model"]
    if not isinstance(model, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items()
    ):
        return "'model' is not a mapping of names to tensors"
    optim = state["optimizer"]
    if not isinstance(optim, dict) or not {"state", "param_groups"} <= set(optim):
        return "'optimizer' lacks state/param_groups"
    rng = state["rng"]
    if not isinstance(rng, dict) or not isinstance(rng.get("torch"), torch.Tensor):
        return "'rng' lacks the torch generator state"
    cuda = rng.get("cuda", [])
    if (
        rng["torch"].dtype != torch.uint8
        or not isinstance(cuda, list)
        or not all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in cuda)
    ):
        return "'rng' holds a malformed generator state"
    py = rng.get("python")
    if not (
        isinstance(py, list | tuple)
        and len(py) == 3
        and isinstance(py[0], int)
        and isinstance(py[1], list | tuple)
        and len(py[1]) == 625
        and all(isinstance(x, int) for x in py[1])
    ):
        return "'rng' holds a malformed Python random state"
    position = state["data_position"]
    if not isinstance(position, dict) or not isinstance(position.get("step"), int):
        return "'data_position' lacks its step"
    return None


def find_resume(resume: str, ckpt_dir: Path | None) -> Path | None:
    """`latest` → the newest checkpoint in `ckpt_dir` (None if there is none yet), else a path."""
    if resume != "latest":
        p = Path(resume)
        if not p.exists():
            raise BadInput(f"--resume {resume}: no such checkpoint")
        return p
    if ckpt_dir is None:
        raise BadInput("--resume needs --ckpt-dir (where the checkpoints are)")
    steps = list_steps(ckpt_dir)
    return steps[-1][1] if steps else None


def load_newest_valid(ckpt_dir: Path) -> tuple[Loaded | None, list[str]]:
    """The newest checkpoint that loads, and a warning for each newer one that did not.

    A crash can leave the newest checkpoint bad (a disk that lied about fsync, a bit flip); the
    one before it is a better start than none. When every checkpoint is bad this is BadInput:
    silently starting from scratch would throw the run away.
    """
    warnings: list[str] = []
    steps = list_steps(ckpt_dir)
    for _, path in reversed(steps):
        try:
            loaded = load(path)
        except BadInput as exc:
            warnings.append(f"skipping {exc}")
            continue
        if warnings:
            warnings.append(f"resuming from {path}, the newest valid checkpoint")
        return loaded, warnings
    if steps:
        raise BadInput(
            f"no valid checkpoint in {ckpt_dir}: all {len(steps)} are corrupt ("
            + "; ".join(warnings)
            + "). Remove them to start fresh"
        )
    return None, warnings

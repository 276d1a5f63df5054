"""Token data: a memory-mapped `.bin` (uint16/uint32), a text file read as bytes, or synthetic.

Batches are a pure function of (seed, split, step): the sequences of optimizer step s are drawn
from a generator seeded with (seed, split, s), and each rank and micro-batch takes its slice of
that global batch. So the data position is just the step number, a resumed run sees exactly
the data it would have seen, and 1 or N processes train on the same samples per step.
Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch

from trainer.config import DataConfig
from trainer.errors import BadInput

TOKEN_DTYPES: Final = {"uint16": np.uint16, "uint32": np.uint32}
_SPLITS: Final = {"train": 0, "eval": 1}
# A vocabulary found by scanning a .bin file is rounded up to this, so the head stays a
# multiple of 16 (an FP8-eligible shape) and the embedding table a tidy size.
_VOCAB_ROUND: Final = 64
_SCAN_LIMIT: Final = 1 << 28  # tokens scanned for the vocabulary size (512 MiB of uint16)
SYNTHETIC_TOKENS_MAX: Final = 1 << 16  # tokens the synthetic stream uses, at most

Array = npt.NDArray[np.int64]


class SyntheticTokens:
    """A learnable stream: each token follows a fixed random successor with probability 0.8,
    else a random token, over a subset of the vocabulary. A small model's loss falls within a
    few steps (from ln V towards about 1.3 nats), which is what CPU checks need.

    Sampling is vectorised over positions (a per-position loop costs tens of ms per batch,
    enough to blur a GPU benchmark): the successor map is a permutation, so k steps along it
    are k places along the token's cycle, counted from the last random restart.
    """

    follow_p: Final = 0.8

    def __init__(self, vocab_size: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 0xDA7A])
        self.vocab_size = vocab_size
        size = min(vocab_size, max(64, vocab_size // 8), SYNTHETIC_TOKENS_MAX)
        self.subset = rng.choice(vocab_size, size=size, replace=False).astype(np.int64)
        # Everything below is indexed by a token's place in `subset`, so memory follows the
        # subset, not the vocabulary (model.vocab_size 2**32 must reach the memory check).
        self._order = np.argsort(self.subset)
        self._successor = self._place(rng.permutation(self.subset))
        successor = self._successor
        # The permutation's cycles end to end, and where each token sits in them.
        self.cycles = np.zeros(size, dtype=np.int64)
        self.cycle_start = np.zeros(size, dtype=np.int64)
        self.cycle_len = np.ones(size, dtype=np.int64)
        self.cycle_pos = np.zeros(size, dtype=np.int64)
        seen = np.zeros(size, dtype=bool)
        filled = 0
        for first in range(size):
            if seen[first]:
                continue
            cycle = [first]
            while (nxt := int(successor[cycle[-1]])) != first:
                cycle.append(nxt)
            members = np.array(cycle, dtype=np.int64)
            seen[members] = True
            self.cycles[filled : filled + len(cycle)] = members
            self.cycle_start[members] = filled
            self.cycle_len[members] = len(cycle)
            self.cycle_pos[members] = np.arange(len(cycle))
            filled += len(cycle)

    def _place(self, tokens: Array) -> Array:
        """Where each token (of the subset) sits in `subset`."""
        found: Array = self._order[np.searchsorted(self.subset[self._order], tokens)]
        return found

    def successor(self, tokens: Array) -> Array:
        """The token each of `tokens` (of the subset) is followed by, when it is followed."""
        out: Array = self.subset[self._successor[self._place(tokens)]]
        return out

    def sample(self, rng: np.random.Generator, count: int, length: int) -> Array:
        restart = rng.random((count, length)) >= self.follow_p
        restart[:, 0] = True
        fresh = rng.integers(0, len(self.subset), size=(count, length))  # places in subset
        t = np.arange(length)
        last = np.maximum.accumulate(np.where(restart, t, 0), axis=1)
        start = np.take_along_axis(fresh, last, axis=1)
        steps = t - last
        index = self.cycle_start[start] + (self.cycle_pos[start] + steps) % self.cycle_len[start]
        out: Array = self.subset[self.cycles[index]]
        return out


class FileTokens:
    """A 1-D token array on disk (memory-mapped), split into train and a held-out tail."""

    def __init__(self, tokens: np.ndarray, vocab_size: int, eval_tokens: int) -> None:
        self.tokens = tokens
        self.vocab_size = vocab_size
        self.eval_tokens = eval_tokens
        self.train_end = len(tokens) - eval_tokens

    def sample(self, rng: np.random.Generator, count: int, length: int, split: str) -> Array:
        lo, hi = (0, self.train_end) if split == "train" else (self.train_end, len(self.tokens))
        starts = rng.integers(lo, hi - length + 1, size=count)
        return np.stack([np.asarray(self.tokens[s : s + length], dtype=np.int64) for s in starts])


@dataclass(frozen=True)
class Source:
    """What `open_source` found: a description for logs and the vocabulary the data needs."""

    kind: str
    description: str
    vocab_size: int
    synthetic: SyntheticTokens | None
    file: FileTokens | None
    fingerprint: dict[str, object]


def _detect_format(cfg: DataConfig) -> str:
    if cfg.format != "auto":
        return cfg.format
    if cfg.source == "synthetic":
        return "synthetic"
    return "bin" if cfg.source.endswith(".bin") else "text"


def _scan_vocab(tokens: np.ndarray) -> int:
    top = int(np.max(tokens[:_SCAN_LIMIT]))
    return -(-(top + 1) // _VOCAB_ROUND) * _VOCAB_ROUND


def open_source(cfg: DataConfig, seq_len: int, *, vocab_size: int | None, seed: int) -> Source:
    """Open and check the data before any model is built (missing/empty/short → BadInput).

    A file's last `eval_fraction` (at least one sequence) is held out whether or not this run
    evaluates, so the training split, and with it a resumed run's batches, never depends on
    the eval settings.

    `vocab_size` is the model's explicit setting, if any; otherwise the data decides it
    (256 for bytes and synthetic data, the largest token id for a .bin file).
    """
    kind = _detect_format(cfg)
    if kind == "synthetic":
        vocab = vocab_size or 256
        return Source(
            kind="synthetic",
            description=f"synthetic (vocab {vocab})",
            vocab_size=vocab,
            synthetic=SyntheticTokens(vocab, seed),
            file=None,
            fingerprint={"kind": "synthetic", "vocab": vocab},
        )
    path = Path(cfg.source)
    if not path.exists():
        raise BadInput(f"data file {path} does not exist")
    if not path.is_file():
        raise BadInput(f"data file {path} is not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise BadInput(f"data file {path} is empty")
    dtype = TOKEN_DTYPES[cfg.token_dtype] if kind == "bin" else np.uint8
    itemsize = np.dtype(dtype).itemsize
    if size % itemsize:
        raise BadInput(
            f"data file {path}: {size} bytes is not a whole number of {cfg.token_dtype} tokens "
            "(is data.token_dtype right?)"
        )
    try:
        tokens = np.memmap(path, dtype=dtype, mode="r")
        fingerprint_sha = ends_sha256(path, size)
    except OSError as exc:
        raise BadInput(f"data file {path}: cannot read it ({exc.strerror or exc})") from exc
    n = len(tokens)
    eval_tokens = max(seq_len + 1, int(n * cfg.eval_fraction)) if cfg.eval_fraction else 0
    if n - eval_tokens < seq_len + 1:
        need = seq_len + 1 + eval_tokens
        raise BadInput(
            f"data file {path} holds {n} tokens; seq_len {seq_len} needs at least {need}"
            + (
                " (train plus the held-out eval split; data.eval_fraction 0 drops it)"
                if eval_tokens
                else ""
            )
        )
    vocab = vocab_size or (256 if kind == "text" else _scan_vocab(tokens))
    return Source(
        kind=kind,
        description=f"{kind} {path} ({n:,} tokens, vocab {vocab})",
        vocab_size=vocab,
        synthetic=None,
        file=FileTokens(tokens, vocab, eval_tokens),
        fingerprint={
            "kind": kind,
            "bytes": size,
            "ends_sha256": fingerprint_sha,
            "token_dtype": cfg.token_dtype if kind == "bin" else "uint8",
            "eval_fraction": cfg.eval_fraction,
        },
    )


_END: Final = 1 << 20  # bytes hashed at each end of a data file


def ends_sha256(path: Path, size: int) -> str:
    """sha256 of the file's size, first MiB and last MiB: the same data wherever it is mounted,
    and a regenerated file of the same size is told apart (hashing all of a large corpus at
    every start would cost minutes)."""
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        digest.update(f.read(_END))
        if size > _END:
            f.seek(max(_END, size - _END))
            digest.update(f.read(_END))
    return digest.hexdigest()


class Batches:
    """The (inputs, targets) of one rank's micro-batches, on `device`."""

    def __init__(
        self,
        source: Source,
        *,
        seed: int,
        seq_len: int,
        batch_size: int,
        grad_accum: int,
        rank: int,
        world: int,
        device: torch.device,
    ) -> None:
        self.source = source
        self.seed = seed
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.grad_accum = grad_accum
        self.rank = rank
        self.world = world
        self.micro = batch_size // (grad_accum * world)
        self.device = device
        self._cache_key: tuple[str, int] | None = None
        self._cache: Array | None = None

    def _global(self, split: str, key: int, count: int) -> Array:
        if self._cache_key != (split, key) or self._cache is None:
            rng = np.random.default_rng([self.seed, _SPLITS[split], key])
            length = self.seq_len + 1
            if self.source.synthetic is not None:
                self._cache = self.source.synthetic.sample(rng, count, length)
            else:
                assert self.source.file is not None
                self._cache = self.source.file.sample(rng, count, length, split)
            self._cache_key = (split, key)
        return self._cache

    def _to_device(self, seqs: Array) -> tuple[torch.Tensor, torch.Tensor]:
        if int(seqs.max()) >= self.source.vocab_size:
            raise BadInput(
                f"data: token id {int(seqs.max())} is outside the vocabulary "
                f"({self.source.vocab_size}); set model.vocab_size"
            )
        t = torch.from_numpy(seqs)
        if self.device.type == "cuda":
            t = t.pin_memory().to(self.device, non_blocking=True)
        elif self.device.type != "cpu":
            t = t.to(self.device)
        return t[:, :-1], t[:, 1:]

    def train(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Micro-batch `micro` of optimizer step `step` (1-based), this rank's share."""
        seqs = self._global("train", step, self.batch_size)
        start = (micro * self.world + self.rank) * self.micro
        return self._to_device(seqs[start : start + self.micro])

    def eval(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Held-out batch `index`: the same batches at every evaluation."""
        seqs = self._global("eval", index, self.micro * self.world)
        start = self.rank * self.micro
        return self._to_device(seqs[start : start + self.micro])

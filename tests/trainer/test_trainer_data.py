"""Token files, synthetic data and the per-step batches every process agrees on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trainer.config import DataConfig
from trainer.data import Batches, Source, open_source
from trainer.errors import BadInput


def _batches(source: Source, rank: int = 0, world: int = 1, accum: int = 1) -> Batches:
    return Batches(
        source,
        seed=3,
        seq_len=8,
        batch_size=8,
        grad_accum=accum,
        rank=rank,
        world=world,
        device=torch.device("cpu"),
    )


def test_bin_file_is_memory_mapped_and_batches_are_real_windows(tmp_path: Path) -> None:
    tokens = np.arange(1000, dtype=np.uint32) * 70  # unique ids, the largest 69930
    path = tmp_path / "tokens.bin"
    tokens.tofile(path)
    cfg = DataConfig(source=str(path), token_dtype="uint32")  # noqa: S106 - a dtype name
    src = open_source(cfg, 8, vocab_size=None, seed=3)
    assert src.kind == "bin"
    assert src.vocab_size == 69952  # 69930 + 1, rounded up to a multiple of 64
    x, y = _batches(src).train(1, 0)
    assert x.shape == (8, 8) and torch.equal(x[:, 1:], y[:, :-1])
    data = torch.from_numpy(tokens.astype(np.int64))
    for row in x:  # each row is a contiguous window of the file, from the train split
        start = int(torch.nonzero(data == row[0])[0])
        assert torch.equal(data[start : start + 8], row)
        assert start + 9 <= src.file.train_end  # type: ignore[union-attr]


def test_text_is_bytes(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(("hello trainer " * 50).encode())
    src = open_source(DataConfig(source=str(path), eval_fraction=0.0), 8, vocab_size=None, seed=3)
    assert src.kind == "text" and src.vocab_size == 256
    x, _ = _batches(src).train(5, 0)
    assert set(bytes(x.flatten().tolist())) <= set(b"helo trainr")


def test_batches_are_a_function_of_the_step_and_split_across_ranks() -> None:
    src = open_source(DataConfig(), 8, vocab_size=None, seed=3)
    single = _batches(src)
    assert torch.equal(single.train(4, 0)[0], _batches(src).train(4, 0)[0])
    assert not torch.equal(single.train(4, 0)[0], single.train(5, 0)[0])
    assert not torch.equal(single.train(4, 0)[0], single.eval(4)[0])
    # Two ranks x two micro-batches see exactly the single process's global batch.
    parts = [
        _batches(src, rank=r, world=2, accum=2).train(4, m)[0] for m in range(2) for r in range(2)
    ]
    assert torch.equal(torch.cat(parts), single.train(4, 0)[0])


def test_synthetic_data_is_learnable_structure() -> None:
    src = open_source(DataConfig(), 8, vocab_size=None, seed=3)
    x, y = _batches(src).train(1, 0)
    assert src.synthetic is not None
    follows = (src.synthetic.successor(x.numpy()) == y.numpy()).mean()
    assert 0.7 < follows < 0.9  # 0.8 by construction, plus random hits


@pytest.mark.parametrize(
    ("content", "name", "needle"),
    [
        (None, "missing.bin", "does not exist"),
        (b"", "empty.bin", "is empty"),
        (b"abc", "odd.bin", "not a whole number of uint16 tokens"),
        (b"ab" * 10, "short.bin", "needs at least"),
    ],
)
def test_unusable_files_are_input_errors(
    tmp_path: Path, content: bytes | None, name: str, needle: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(BadInput, match=needle):
        open_source(DataConfig(source=str(path)), 8, vocab_size=None, seed=0)


def test_token_outside_the_vocabulary_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "tokens.bin"
    np.full(100, 300, dtype=np.uint16).tofile(path)
    src = open_source(DataConfig(source=str(path)), 8, vocab_size=256, seed=0)
    with pytest.raises(BadInput, match="outside the vocabulary"):
        _batches(src).train(1, 0)

"""The facts that change with every release, as data files (builder/facts/data/*.json) that
`trainimg facts refresh --write` rewrites: each file says where it was read and on which day.

The loader is pure: it reads only these files of the package, validates every key it takes and
names the file and the key when one is wrong.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.errors import TrainimgError

FACTS_DATA_DIR = Path(__file__).resolve().parent / "data"
TORCH_PYPI_FILE = FACTS_DATA_DIR / "torch_pypi.json"
CUDA_RELEASES_FILE = FACTS_DATA_DIR / "cuda_releases.json"


class FactsDataError(TrainimgError):
    """A facts data file is malformed: the message names the file and the key."""


@dataclass(frozen=True)
class TorchRelease:
    """One release of PyPI's plain torch wheel: its CUDA build (cu128, cu130, ...; None for a
    CPU-only release), the CUDA pin its METADATA carries, its CPython tags, the day it was read."""

    version: Version
    cuda: str | None
    cuda_pin: str | None
    python: tuple[str, ...]
    read: dt.date
    note: str = ""


@dataclass(frozen=True)
class CudaReleaseRow:
    version: Version
    min_driver: str
    confirmed: bool


@dataclass(frozen=True)
class DataFile:
    """A facts file's header: what it holds, where it was read, and when."""

    path: Path
    source: str
    read: dt.date


def _fail(path: Path, key: str, why: str) -> FactsDataError:
    return FactsDataError(f"{path}: {key}: {why}")


def load_data_file(path: Path) -> dict[str, Any]:
    """A facts data file as its JSON object (validated by the parse_* functions)."""
    return _load(path)


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FactsDataError(f"{path}: cannot be read as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _fail(path, "(top)", "must be a JSON object")
    return data


def _str(path: Path, key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(path, key, f"must be a non-empty string, not {value!r}")
    return value


def _date(path: Path, key: str, value: object) -> dt.date:
    try:
        return dt.date.fromisoformat(_str(path, key, value))
    except ValueError:
        raise _fail(path, key, f"must be a date YYYY-MM-DD, not {value!r}") from None


def _version(path: Path, key: str, value: object) -> Version:
    try:
        return Version(_str(path, key, value))
    except InvalidVersion:
        raise _fail(path, key, f"not a version: {value!r}") from None


def header(path: Path, data: dict[str, Any]) -> DataFile:
    return DataFile(path, _str(path, "source", data.get("source")),
                    _date(path, "read", data.get("read")))  # fmt: skip


def parse_torch_releases(path: Path, data: dict[str, Any]) -> tuple[TorchRelease, ...]:
    rows = data.get("releases")
    if not isinstance(rows, dict):
        raise _fail(path, "releases", "must be an object: torch version -> facts")
    out = []
    for ver, row in rows.items():
        key = f"releases.{ver}"
        if not isinstance(row, dict):
            raise _fail(path, key, "must be an object")
        cuda, pin = row.get("cuda"), row.get("cuda_pin")
        if cuda is not None and (not isinstance(cuda, str) or not cuda.startswith("cu")):
            raise _fail(path, f"{key}.cuda", f"must be a CUDA build tag like cu130, not {cuda!r}")
        if pin is not None:
            _str(path, f"{key}.cuda_pin", pin)
        py = row.get("python")
        if not isinstance(py, list) or not all(isinstance(p, str) for p in py):
            raise _fail(path, f"{key}.python", 'must be a list of Python versions like "3.12"')
        note = row.get("note", "")
        read = _date(path, f"{key}.read", row.get("read"))
        out.append(TorchRelease(_version(path, key, ver), cuda, pin, tuple(py), read, str(note)))
    return tuple(sorted(out, key=lambda r: r.version))


def parse_cuda_releases(path: Path, data: dict[str, Any]) -> tuple[CudaReleaseRow, ...]:
    rows = data.get("releases")
    if not isinstance(rows, list):
        raise _fail(path, "releases", "must be a list of {version, min_driver, confirmed}")
    out = []
    for i, row in enumerate(rows):
        key = f"releases[{i}]"
        if not isinstance(row, dict):
            raise _fail(path, key, "must be an object")
        confirmed = row.get("confirmed", True)
        if not isinstance(confirmed, bool):
            raise _fail(path, f"{key}.confirmed", f"must be true or false, not {confirmed!r}")
        out.append(CudaReleaseRow(_version(path, f"{key}.version", row.get("version")),
                                  _str(path, f"{key}.min_driver", row.get("min_driver")),
                                  confirmed))  # fmt: skip
    return tuple(out)


TORCH_PYPI_DATA = _load(TORCH_PYPI_FILE)
TORCH_PYPI = header(TORCH_PYPI_FILE, TORCH_PYPI_DATA)
TORCH_RELEASES = parse_torch_releases(TORCH_PYPI_FILE, TORCH_PYPI_DATA)
CUDA_RELEASES_DATA = _load(CUDA_RELEASES_FILE)
CUDA_RELEASES_HEADER = header(CUDA_RELEASES_FILE, CUDA_RELEASES_DATA)
CUDA_RELEASE_ROWS = parse_cuda_releases(CUDA_RELEASES_FILE, CUDA_RELEASES_DATA)
DATA_FILES = (TORCH_PYPI, CUDA_RELEASES_HEADER)

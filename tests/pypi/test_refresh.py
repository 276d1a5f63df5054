"""`trainimg facts refresh` against a loopback index serving recorded PyPI answers
(tests/pypi/data/README.md): the diff it prints is pinned, --write rewrites the file, and a
request past its deadline fails with one clear error."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from builder.cli import main
from builder.facts import data_files
from builder.pypi.index import Index, IndexReadError
from builder.pypi.refresh import cuda_build, facts_text

DATA = Path(__file__).resolve().parent / "data"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/simple/torch/":
            body = (DATA / "torch.json").read_bytes()
            kind = "application/vnd.pypi.simple.v1+json"
        elif self.path.startswith("/files/") and (DATA / self.path[7:]).is_file():
            body, kind = (DATA / self.path[7:]).read_bytes(), "text/plain"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def index_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()
    server.server_close()


COMMITTED = {
    "about": "test",
    "source": "https://pypi.org/simple/torch/",
    "read": "2026-12-01",
    "releases": {
        "2.9.1": {"cuda": "cu128", "cuda_pin": None, "python": ["3.10"], "read": "2026-12-01"},
        "2.13.0": {"cuda": "cu130", "cuda_pin": None, "python": ["3.12"], "read": "2026-12-01"},
        "2.14.1": {"cuda": "cu130", "cuda_pin": "cuda-toolkit==13.0.3",
                   "python": ["3.10", "3.11", "3.12", "3.13", "3.14"], "read": "2026-12-02"},
    },
}  # fmt: skip

EXPECTED_DIFF = (DATA / "refresh.diff").read_text()  # the diff, pinned


def _facts_file(tmp_path: Path) -> Path:
    path = tmp_path / "torch_pypi.json"
    path.write_text(facts_text(COMMITTED))
    return path


def test_refresh_prints_the_diff_pypi_metadata_gives(
    index_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _facts_file(tmp_path)
    before = path.read_text()
    code = main(["facts", "refresh", "--index", index_url, "--file", str(path),
                 "--today", "2026-12-03"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1 and path.read_text() == before  # printed, nothing written
    assert (
        out
        == EXPECTED_DIFF
        + "torch_pypi.json: behind the index; review the diff, then rerun with --write\n"
    )


def test_write_rewrites_the_file_and_a_second_run_is_clean(
    index_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _facts_file(tmp_path)
    args = ["facts", "refresh", "--index", index_url, "--file", str(path), "--today", "2026-12-03"]
    assert main([*args, "--write"]) == 0
    rows = data_files.parse_torch_releases(path, data_files.load_data_file(path))
    assert {str(r.version): r.cuda for r in rows}["2.13.0"] == "cu130"
    assert [p.name for p in tmp_path.iterdir()] == ["torch_pypi.json"]  # no temp file left
    capsys.readouterr()
    assert main(args) == 0
    assert "up to date" in capsys.readouterr().out


def test_the_cuda_build_is_read_from_the_pins() -> None:
    assert cuda_build("Requires-Dist: cuda-toolkit[cudart]==13.2.2; x") == (
        "cu132", "cuda-toolkit==13.2.2")  # fmt: skip
    assert cuda_build("Requires-Dist: nvidia-cuda-runtime-cu12==12.6.77; x") == (
        "cu126", "nvidia-cuda-runtime-cu12==12.6.77")  # fmt: skip
    assert cuda_build("Requires-Dist: numpy\n") is None


def test_a_request_past_its_deadline_fails_naming_the_url() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts, never answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        with pytest.raises(IndexReadError, match=r"/simple/torch/: no answer within the 0.2 s"):
            Index(url, timeout=0.2).files("torch")
    finally:
        silent.close()


def test_a_non_http_index_is_refused() -> None:
    with pytest.raises(IndexReadError, match="not an http"):
        Index("file:///etc", timeout=1).files("torch")

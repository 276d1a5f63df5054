"""What a push or pull shows per blob (builder/engines/sdk_shapes.transfer_line), on the streams
podman 4.3.1 and Docker Engine 20.10 answered here (tests/data/transfer_streams/, origin in its
README): libpod's lines as they are, Docker's layer states without its byte ticks, and a
stream's error still the push's error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.engines.base import EngineError
from builder.engines.sdk_shapes import stream_errors, transfer_line

STREAMS = Path(__file__).resolve().parents[1] / "data" / "transfer_streams"


def _items(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (STREAMS / name).read_text().splitlines() if line]


def _shown(name: str) -> list[str]:
    lines: list[str] = []
    stream_errors(iter(_items(name)), "push", lines.append)
    return lines


def test_podman_shows_each_blob_it_copies() -> None:
    push = _shown("podman-push.jsonl")
    assert push[0] == "Getting image source signatures"
    assert push[1].startswith("Copying blob sha256:") and push[2].startswith("Copying config ")
    assert push[-1] == "Storing signatures" and len(push) == 5
    pull = _shown("podman-pull.jsonl")
    assert pull[0].startswith("Trying to pull 127.0.0.1:5977/rec/tiny:one")
    assert "Copying blob sha256:" in pull[2] and len(pull) == 6  # the final {"images"}: no line


def test_docker_shows_layer_states_not_byte_ticks() -> None:
    push = _shown("docker-push.jsonl")
    assert push == [
        "The push refers to repository [127.0.0.1:5977/rec/tinyd]",
        "62fd67d4067a: Pushed",
        "one: digest: sha256:4c3b0d54421e058be15ce075a03902d61c8df00cd2d310b0c419fb69031b0db3 "
        "size: 523",
    ]
    pull = _shown("docker-pull.jsonl")
    assert "dd12503f1ccc: Download complete" in pull and "dd12503f1ccc: Pull complete" in pull
    assert not any("Extracting" in line or "[====" in line for line in pull)


def test_an_error_in_the_stream_is_the_push_s_error_after_the_lines_before_it() -> None:
    items = [*_items("docker-push.jsonl")[:2], {"error": "denied", "errorDetail": {"message": "x"}}]
    lines: list[str] = []
    with pytest.raises(EngineError, match="push: x"):
        stream_errors(iter(items), "push", lines.append)
    assert lines == ["The push refers to repository [127.0.0.1:5977/rec/tinyd]"]
    assert transfer_line({"status": "Pushing", "progress": "[=>  ] 1B", "id": "a"}) is None

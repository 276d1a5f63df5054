"""Engine error texts cut to their human part (builder/engines/messages.py). The long text is
shaped as buildah writes it when a commit fails - `committing container for step %+v: %w`
(containers/buildah, imagebuildah/stage_executor.go), the step printed as a Go struct - and
ends in the cause the issue's full store showed at character ~480: "no space left on device"."""

from __future__ import annotations

from builder.engines.messages import LIMIT, cause, human, without_go_values

STEP = (
    "{Env:[PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
    "PIP_NO_CACHE_DIR=1 HOME=/home/trainer] Command:run Args:[/opt/venv/bin/pip install "
    "--no-index --require-hashes -r /wheels/torch/requirements.txt] Flags:[] Attrs:map[] "
    "Message:RUN /opt/venv/bin/pip install --no-index --require-hashes -r "
    "/wheels/torch/requirements.txt Heredocs:[] Original:RUN /opt/venv/bin/pip install "
    "--no-index --require-hashes -r /wheels/torch/requirements.txt}"
)
FULL_STORE = (
    'building at STEP "RUN /opt/venv/bin/pip install --no-index": committing container for step '
    f'{STEP}: copying layers and metadata for container "4f1c0e": initializing source '
    'containers-storage:trainimg-working-container: storing layer "9a2b" to file: on copy: '
    "write /var/tmp/storage123/layer.tar: no space left on device"
)


def test_a_full_store_reads_as_its_cause() -> None:
    assert FULL_STORE.find("no space left on device") > 450
    text = human(FULL_STORE)
    assert len(text) <= LIMIT + 120
    assert text.startswith('building at STEP "RUN /opt/venv/bin/pip install --no-index": ...')
    assert "write /var/tmp/storage123/layer.tar: no space left on device" in text
    assert "podman system prune" in text and "Env:[" not in text


def test_go_values_go_and_short_texts_stay() -> None:
    assert without_go_values(f"a {STEP}: b") == "a {...}: b"
    assert without_go_values("map{x} {not: a struct}") == "map{x} {not: a struct}"
    assert human("image not known") == "image not known"
    assert cause("open /x: Permission denied") == "permission denied"
    assert cause("exit status 1") is None
    assert human("dial unix /run/podman.sock: connect: connection refused").endswith(
        "is the engine or registry running there?"
    )

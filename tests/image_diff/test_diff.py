"""libpod's build timestamp, and `trainimg diff`, on tiny `FROM scratch` images: two
`--no-cache` builds of one context differ by the clock (creation time, the mtime of the
directory COPY made), and are the same image once the build is dated; `trainimg diff` says so,
and names the changed label and file of another build."""

from __future__ import annotations

from pathlib import Path

from builder.engines.base import BuildRequest
from builder.engines.podman import PodmanEngine
from tests.helpers import RunCli


def _context(directory: Path, text: str) -> Path:
    (directory / "app").mkdir(parents=True, exist_ok=True)
    (directory / "app" / "model.txt").write_text(text)
    (directory / "Containerfile").write_text(f"FROM scratch\nCOPY app/ /app/\nLABEL stage={text}\n")
    return directory


def test_dated_builds_are_identical_and_diff_says_where_others_differ(
    podman_service: str, run_cli: RunCli, repo: str, tmp_path: Path
) -> None:
    ctx = _context(tmp_path / "ctx", "one")
    engine = PodmanEngine(podman_service)
    built: list[str] = []
    try:

        def build(timestamp: int | None, tags: tuple[str, ...] = ()) -> str:
            request = BuildRequest(ctx, tags=tags, nocache=True, timestamp=timestamp)
            built.append(engine.build(request).image_id)
            return built[-1]

        clock = [build(None), build(None)]
        assert clock[0] != clock[1]  # the same inputs, another creation time: another id
        dated = [build(1796005301, (f"{repo}:one",)), build(1796005301)]
        assert dated[0] == dated[1]

        r = run_cli("diff", f"{repo}:one", dated[1], "--url", podman_service)
        assert r.code == 0 and "the same image" in r.out

        r = run_cli("diff", clock[0], clock[1], "--url", podman_service)
        assert r.code == 1
        # only the clock differs: the creation time (and, when the builds fell in different
        # seconds, the mtime of the directory COPY made: "~ /app: mtime ...")
        assert "created:" in r.out
        assert "content" not in r.out and "stage:" not in r.out

        _context(ctx, "two")
        build(1796005301, (f"{repo}:two",))
        r = run_cli("diff", f"{repo}:one", f"{repo}:two", "--url", podman_service)
        assert r.code == 1, r.err
        assert "stage: 'one' -> 'two'" in r.out
        assert "files of layer 1: 1 differ" in r.out
        assert "~ /app/model.txt: content" in r.out
    finally:
        for image in reversed(built):
            engine.remove_image(image)
        engine.close()

"""The build log reader every engine (and the tests' fake) feeds its build stream to: whole
lines out of partial chunks, steps and cache hits counted in both builders' dialects, and the
tail kept for the error message of a failed build; and no proxy secret in any of it."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

from builder.engines.base import (
    BuildFailed,
    BuildRequest,
    BuildResult,
    EngineError,
    LogSink,
    normalize_id,
)
from builder.engines.messages import human

TAIL_LINES = 40

# buildah says "STEP 3/9: RUN ..." ("[2/3] STEP ..." in multi-stage builds) and "--> Using cache
# <id>"; Docker's classic builder says "Step 3/9 : RUN ..." and " ---> Using cache".
STEP_LINE = re.compile(r"^(?:\[\d+/\d+\] )?(?:STEP|Step) \d+/\d+ ?: ")
_CACHE = re.compile(r"^(?:-->| --->) Using cache")
_POSITION = re.compile(
    r"^(?:\[(\d+)/(\d+)\] )?(?:STEP|Step) (\d+)/(\d+) ?: (FROM\b)?", re.IGNORECASE
)


class StagePosition:
    """Where a build is, read from its step lines: buildah numbers its stages ("[2/3] STEP
    3/9: ..."); Docker's classic builder numbers only steps, so a FROM step starts the next
    stage and the number of stages is unknown ("stage 2, step 11/20")."""

    def __init__(self) -> None:
        self.stage = 0
        self.stages: int | None = None
        self.step = 0
        self.steps = 0

    def see(self, line: str) -> bool:
        """Take one log line; True when it was a step line."""
        m = _POSITION.match(line)
        if m is None:
            return False
        stage, stages, step, steps, from_ = m.groups()
        if stage is not None:
            self.stage, self.stages = int(stage), int(stages)
        elif from_ is not None or self.stage == 0:
            self.stage += 1
        self.step, self.steps = int(step), int(steps)
        return True

    def __str__(self) -> str:
        if not self.stage:
            return ""
        stage = f"stage {self.stage}" + (f"/{self.stages}" if self.stages else "")
        return f"{stage}, step {self.step}/{self.steps}"


class BuildLog:
    """Turns the engine's build stream into whole lines: counts steps and cache hits, keeps a
    tail for error messages and passes each line to the caller's sink."""

    def __init__(self, on_log: LogSink | None) -> None:
        self._sink = on_log
        self._partial = ""
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.steps = 0
        self.cached = 0

    def feed(self, text: str) -> None:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._line(line.rstrip("\r"))

    def close(self) -> None:
        if self._partial:
            self._line(self._partial)
            self._partial = ""

    def _line(self, line: str) -> None:
        if STEP_LINE.match(line):
            self.steps += 1
        elif _CACHE.match(line):
            self.cached += 1
        self.tail.append(line)
        if self._sink is not None:
            self._sink(line)

    def result(self, image_id: str) -> BuildResult:
        return BuildResult(normalize_id(image_id), tuple(self.tail), self.steps, self.cached)

    def failed(self, message: str) -> BuildFailed:
        self.close()
        return BuildFailed(human(message.strip()), tuple(self.tail))


def without_secrets(
    build: Callable[[BuildRequest, LogSink | None], BuildResult],
    request: BuildRequest,
    on_log: LogSink | None,
) -> BuildResult:
    """`build(request, on_log)` with the request's proxy secrets (engines/proxy.py) replaced by
    *** in every log line and in a failure's message and tail."""
    if not request.proxy:
        return build(request, on_log)
    scrub = request.proxy.scrub
    try:
        return build(request, (lambda line: on_log(scrub(line))) if on_log is not None else None)
    except BuildFailed as exc:
        raise BuildFailed(scrub(str(exc)), [scrub(line) for line in exc.log_tail]) from None
    except EngineError as exc:
        raise EngineError(scrub(str(exc))) from None

"""The watchdog of a `trainimg run` container: when `trainimg run` dies without removing its
container (SIGKILL, the OOM killer, a crash), stop it - its stop signal, so the trainer
checkpoints and exits 143 - and remove it. Without one the container trains on, unsupervised,
and is never removed (issue 22).

`trainimg run` starts `python -m builder.launch.supervise ENGINE URL CONTAINER STOP_TIMEOUT`
in a session of its own (terminal signals do not reach it) with a pipe as its stdin, and writes
`done` there once it has removed the container itself. End of file without `done` means the
parent is gone: no polling, no pid that could be reused.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from builder.engines.roles import EngineConnection, TrainingRunner

DONE = b"done\n"


@dataclass
class Watchdog:
    proc: subprocess.Popen[bytes]

    @classmethod
    def start(cls, engine: EngineConnection, cid: str, stop_timeout: int) -> Watchdog:
        argv = [engine.name, engine.base_url, cid, str(stop_timeout)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "builder.launch.supervise", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        return cls(proc)

    def release(self) -> None:
        """The container is gone: the watchdog may leave."""
        stdin = self.proc.stdin
        try:
            if stdin is not None:
                stdin.write(DONE)
                stdin.close()
        except OSError:  # it died already; nothing to tell it
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def guard(engine: TrainingRunner, cid: str, stop_timeout: int) -> bool:
    """Stop (stop signal, then SIGKILL after `stop_timeout`) and remove the container; True
    when there was one to stop."""
    if not engine.container_exists(cid):
        return False
    engine.stop_container(cid, stop_timeout)
    engine.remove_container(cid)
    return True


def main(argv: Sequence[str]) -> int:
    kind, url, cid, stop_timeout = argv
    if sys.stdin.buffer.read() == DONE:  # blocks until `trainimg run` is done, or gone
        return 0
    from builder.engines.discover import Endpoint

    engine = Endpoint(kind, url, "trainimg run's watchdog").connect()
    try:
        if guard(engine, cid, int(stop_timeout)):
            print(
                f"trainimg run's watchdog: trainimg run is gone; stopped and removed its "
                f"container {cid[:12]}",
                file=sys.stderr,
            )
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

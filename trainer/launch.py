"""`python -m trainer.launch`: torchrun, with the exit code a container runtime expects.

It takes torchrun's arguments unchanged (`python -m trainer.launch --nproc_per_node 8 -m
trainer train ...`). On SIGTERM (`podman stop`) torchrun forwards the signal to its workers,
which finish their step, checkpoint and exit 143, and then torchrun itself raises and exits 1
with a traceback, so a scheduler cannot tell "stopped cleanly, resume me" from a crash. Here
that ending is exit 128 + the signal (143 for SIGTERM, 130 for SIGINT), one line on stderr,
no traceback; so is a run whose workers all exited 130/143 on their own. Every other failure
keeps torchrun's exit code and report.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from trainer.errors import exit_code_for_signal

_SIGNAL_CODES = {130, 143}


def main(argv: Sequence[str] | None = None) -> int:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        run.main(list(argv) if argv is not None else sys.argv[1:])
    except SignalException as exc:
        code = exit_code_for_signal(int(exc.sigval))
        print(
            f"stopped: signal {int(exc.sigval)}; the workers checkpointed (with --ckpt-dir) and "
            "were stopped; start again with --resume",
            file=sys.stderr,
        )
        return code
    except ChildFailedError as exc:
        codes = {f.exitcode for f in exc.failures.values()}
        if codes and codes <= _SIGNAL_CODES:
            code = max(codes)
            print(f"stopped: the workers exited {code} after a signal", file=sys.stderr)
            return code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Two FSDP2 nodes, N times over: does every run end cleanly? (issue 19 item 6; not in CI)

Each run starts two nodes of the tiny model under `python -m trainer.launch` (the one
launcher; what `trainimg run --nnodes 2` starts in each container), one worker each, torchrun's
c10d rendezvous on loopback (node 1 at 127.0.0.2), gloo, 4 steps of FSDP2 with a checkpoint.
A clean run: both launchers exit 0 and neither says "terminate called" (the gloo threads FSDP2
leaves behind, aborting at interpreter finalization: SIGABRT, exit -6 or 134).

    .venv/bin/python benchmarks/fsdp_exit_loop.py [--runs 20] [--containers IMAGE]

With --containers, each node is a `trainimg run` container of IMAGE instead (the multi-node
engine test, tests/launch/test_multinode.py, as a loop; needs CONTAINER_HOST on a store that has
IMAGE). Prints one line per run and the tally; exit 1 when any run was not clean.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRAIN = [
    "--model", "tiny", "--preset", "bf16", "--device", "cpu", "--steps", "4",
    "--batch-size", "4", "--log-interval", "1", "--eval-interval", "0", "--parallel", "fsdp",
]  # fmt: skip
ABORT = ("terminate called", "SIGABRT", "Aborted")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node(rank: int, port: int, ckpt: Path, image: str | None) -> list[str]:
    if image is not None:
        return [
            sys.executable, "-m", "builder.cli", "run", image, "--nnodes", "2", "--node-rank",
            str(rank), "--rdzv", f"127.0.0.1:{port}", "--local-addr", f"127.0.0.{rank + 1}",
            "--ckpt", str(ckpt), "--", *TRAIN,
        ]  # fmt: skip
    return [
        sys.executable, "-m", "trainer.launch", "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id",
        f"bench-{port}", "--local-addr", f"127.0.0.{rank + 1}",
        f"--rdzv-conf=is_host={'true' if rank == 0 else 'false'}", "--max-restarts", "0",
        "-m", "trainer", "train", *TRAIN, "--ckpt-dir", str(ckpt),
    ]  # fmt: skip


def one_run(image: str | None) -> tuple[list[int], bool, float]:
    """(exit codes of node 0 and 1, an abort seen, seconds)."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    port = _port()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fsdp-exit-") as tmp:
        ckpt = Path(tmp)
        ckpt.chmod(0o777)  # the image's user (uid 1000) writes it under --containers
        procs = [
            subprocess.Popen(
                _node(rank, port, ckpt, image),
                cwd=REPO,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for rank in (0, 1)
        ]
        errs = [p.communicate(timeout=600)[1] for p in procs]
    codes = [p.returncode for p in procs]
    aborted = any(word in err for err in errs for word in ABORT)
    return codes, aborted, time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--containers", metavar="IMAGE", help="nodes as `trainimg run` containers")
    args = ap.parse_args()
    where = f"containers of {args.containers}" if args.containers else "processes"
    print(f"two FSDP2 nodes ({where}), {args.runs} runs")
    print(f"{'run':>4}  {'node 0':>6}  {'node 1':>6}  {'abort':>5}  {'seconds':>7}")
    clean = 0
    for i in range(1, args.runs + 1):
        codes, aborted, seconds = one_run(args.containers)
        ok = codes == [0, 0] and not aborted
        clean += ok
        print(f"{i:>4}  {codes[0]:>6}  {codes[1]:>6}  {'yes' if aborted else 'no':>5}  "
              f"{seconds:>7.1f}", flush=True)  # fmt: skip
    print(f"clean: {clean}/{args.runs}")
    return 0 if clean == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())

"""`python -m trainer`: the image's ENTRYPOINT (and what torchrun starts per rank). As a
container's PID 1 it runs under a minimal init of its own (trainer/pid1.py)."""

from trainer.pid1 import main_as_init_when_pid1


def _main() -> None:
    from trainer.cli import process_main

    process_main()


main_as_init_when_pid1(_main)

"""`python -m trainer`: the image's ENTRYPOINT (and what torchrun starts per rank)."""

from trainer.cli import process_main

process_main()

"""`python -m trainer`: the image's ENTRYPOINT."""

import sys

from trainer.cli import main

sys.exit(main(restore_signals=False))

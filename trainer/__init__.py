"""The FP8/BF16 trainer every trainimg image runs as its ENTRYPOINT.

A payload, not part of the host toolkit: it imports torch, numpy, yaml and (optionally) torchao
or Transformer Engine, and never `builder`.
"""

__version__ = "0.1.0"

"""Which GPUs a CUDA binary runs on: the fatbin reader (stdlib only, it also runs inside
images), the coverage judgement, and the scan of an image's libraries."""

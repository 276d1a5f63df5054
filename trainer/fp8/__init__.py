"""FP8 matmuls: CUDA's rules, layer selection, the torchao and Transformer Engine backends and
amax/scale monitoring."""

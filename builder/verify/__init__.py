"""`trainimg verify`: prove from inside a running container that an image does what its labels
and the matrix say (testinfra checks in suite/), and scan images for CUDA device code."""

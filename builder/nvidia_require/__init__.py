"""NVIDIA_REQUIRE_CUDA and friends: write it from the facts (write.py), split it into terms and
conditions (syntax.py), admit a host the way libnvidia-container does (admission.py), and find
the requirements an image carries the way nvidia-container-toolkit does (image_env.py).

Podman's CDI path does not enforce any of this, hence this package:
https://github.com/NVIDIA/nvidia-container-toolkit/issues/1470
"""

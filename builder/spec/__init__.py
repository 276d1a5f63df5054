"""What a cell's image is, pure: labels and environment, the cell hash, the OS install lines,
the wheel groups, the rendered Containerfile and the bundled trainer's version."""

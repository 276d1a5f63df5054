"""`trainimg diff`: where two images differ - configuration and labels, the layer list, and
the files of each layer that differs (archive.py reads a saved image; compare.py is pure)."""

"""What a host says, read-only and shared below the wings: parsers/ (one module per source:
a command's or a file's text -> values, pure), this_host.py (this machine's NVIDIA driver, GPUs
and CDI devices, read from /proc and the CDI spec directories), shown.py (host data in a
message)."""

"""A minimal PNG encoder (8-bit RGB, no interlace) on zlib and struct alone.

The images ship neither matplotlib nor Pillow, and --compare still owes the user a picture.
"""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_rgb(width: int, height: int, pixels: bytes) -> bytes:
    """`pixels` is rows of RGB triplets, top row first (width * height * 3 bytes)."""
    if len(pixels) != width * height * 3:
        raise ValueError(f"expected {width * height * 3} bytes of RGB, got {len(pixels)}")
    stride = width * 3
    # Filter type 0 (None) before every row.
    raw = b"".join(b"\x00" + pixels[y * stride : (y + 1) * stride] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )

"""The stdlib PNG encoder and the plot: a real PNG a decoder accepts, with the curves drawn."""

from __future__ import annotations

import struct
import zlib

import pytest

from trainer.plot import PALETTE, Canvas, Panel, Series, chart
from trainer.png import SIGNATURE, encode_rgb


def decode(png: bytes) -> tuple[int, int, bytes]:
    """A strict little decoder for what encode_rgb writes (checks every CRC)."""
    assert png.startswith(SIGNATURE)
    pos, chunks = len(SIGNATURE), {}
    idat = b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + data), kind
        chunks[kind] = data
        idat += data if kind == b"IDAT" else b""
        pos += 12 + length
    assert next(iter(chunks)) == b"IHDR" and list(chunks)[-1] == b"IEND"
    width, height, depth, color, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(idat)
    stride = width * 3 + 1
    assert len(raw) == stride * height and all(raw[y * stride] == 0 for y in range(height))
    return width, height, b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))


def test_encoder_round_trips_pixels() -> None:
    pixels = bytes(range(256)) * 3  # 16 x 16 RGB
    width, height, back = decode(encode_rgb(16, 16, pixels))
    assert (width, height, back) == (16, 16, pixels)
    with pytest.raises(ValueError, match="expected 768 bytes"):
        encode_rgb(16, 16, pixels[:-1])


def test_chart_draws_each_series_in_its_colour() -> None:
    series = [
        Series("bf16", [(1, 5.0), (2, 4.0), (3, 3.5)]),
        Series("fp8-fwd", [(1, 5.1), (2, 3.9), (3, 3.4)]),
    ]
    width, height, pixels = decode(chart([Panel("loss", series), Panel("diff", [series[0]])]))
    assert (width, height) == (720, 640)
    triplets = {pixels[i : i + 3] for i in range(0, len(pixels), 3)}
    assert bytes(PALETTE[0]) in triplets and bytes(PALETTE[1]) in triplets


def test_text_renders_known_glyphs() -> None:
    canvas = Canvas(20, 12)
    end = canvas.text(0, 0, "1", scale=2)
    assert end == 8
    # "1" is .X. / XX. / .X. / .X. / XXX: the centre column is set in every row.
    assert all(canvas.get(2, 2 * row) == (0, 0, 0) for row in range(5))
    assert canvas.get(0, 0) == (255, 255, 255)

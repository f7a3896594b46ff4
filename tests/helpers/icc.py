"""A small ICC profile of an RGB space wider than sRGB (Display P3's primaries, gamma 2.2), built here: no profile file
ships with the machines the tests run on."""

from __future__ import annotations

import struct

D50 = (0.9642, 1.0, 0.8249)
# Display P3's primaries adapted to D50 (the profile connection space), as a phone's profile carries them
PRIMARIES = {b"rXYZ": (0.5151, 0.2412, -0.0011), b"gXYZ": (0.2920, 0.6922, 0.0419), b"bXYZ": (0.1571, 0.0666, 0.7841)}


def _s15(value: float) -> bytes:
    return struct.pack(">i", round(value * 65536))


def _xyz(x: float, y: float, z: float) -> bytes:
    return b"XYZ " + bytes(4) + _s15(x) + _s15(y) + _s15(z)


def _gamma(g: float) -> bytes:
    return b"curv" + bytes(4) + struct.pack(">IH", 1, round(g * 256)) + bytes(2)


def _desc(text: str) -> bytes:
    ascii_ = text.encode() + b"\0"
    return b"desc" + bytes(4) + struct.pack(">I", len(ascii_)) + ascii_ + bytes(8 + 2 + 1 + 67)


def wide_rgb_profile(description: str = "Display P3 (test)") -> bytes:
    """The profile's bytes: a matrix and tone curves, the tags an RGB display profile needs."""
    tags = [(b"desc", _desc(description)), (b"cprt", b"text" + bytes(4) + b"none\0"), (b"wtpt", _xyz(*D50))]
    tags += [(sig, _xyz(*xyz)) for sig, xyz in PRIMARIES.items()]
    tags += [(sig, _gamma(2.2)) for sig in (b"rTRC", b"gTRC", b"bTRC")]
    offset = 128 + 4 + 12 * len(tags)
    table, body = b"", b""
    for sig, data in tags:
        data += bytes(-len(data) % 4)
        table += sig + struct.pack(">II", offset + len(body), len(data))
        body += data
    header = (struct.pack(">I", offset + len(body)) + b"lcms" + bytes([2, 0x10, 0, 0]) + b"mntrRGB XYZ "
              + struct.pack(">6H", 2026, 1, 1, 0, 0, 0) + b"acsp" + b"APPL" + bytes(4 + 8 + 8 + 4)
              + _s15(D50[0]) + _s15(D50[1]) + _s15(D50[2]) + b"lcms" + bytes(16 + 28))  # fmt: skip
    assert len(header) == 128
    return header + struct.pack(">I", len(tags)) + table + body

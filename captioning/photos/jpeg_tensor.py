"""The JPEG step (captioning.photos.preprocess.jpeg_round_trip) as integer tensor arithmetic, for a batch, on any
device: the same pixels as Pillow's save-and-decode, level for level.

A JPEG round trip loses information only in its arithmetic: colour conversion to YCbCr, chroma subsampling, the 8 x 8
DCT, quantisation and their inverses. The entropy coding between them is lossless, so it is left out: nothing is
written or parsed, and a batch of squashed photos goes through in a few hundred elementwise kernels. Each step is
libjpeg's, with its integer rounding (what Pillow runs with its defaults): jccolor's conversion, jcsample's
h2v1/h2v2 downsampling, jcparam's quality scaling of the IJG tables, the ISLOW forward DCT (jfdctint) and rounding
quantisation, the ISLOW inverse (jidctint), jdsample's "fancy" upsampling and jdcolor's conversion
(tests/captioning/test_photo_tensors.py compares them with Pillow's). Why not torchvision's ``encode_jpeg`` on CUDA:
it always encodes 4:4:4 (the bundled model's step is 4:2:0), waits for the GPU after each image, and its decode
would be nvjpeg's, not libjpeg's.

Sizes that are not a multiple of the MCU (16 for 4:2:0) are padded by repeating the last row and column, as libjpeg
does, and cut back after.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# The IJG example tables (JPEG standard, Annex K), natural order, that libjpeg scales by the quality.
LUMA = (
    (16, 11, 10, 16, 24, 40, 51, 61), (12, 12, 14, 19, 26, 58, 60, 55), (14, 13, 16, 24, 40, 57, 69, 56),
    (14, 17, 22, 29, 51, 87, 80, 62), (18, 22, 37, 56, 68, 109, 103, 77), (24, 35, 55, 64, 81, 104, 113, 92),
    (49, 64, 78, 87, 103, 121, 120, 101), (72, 92, 95, 98, 112, 100, 103, 99),
)  # fmt: skip
CHROMA = (
    (17, 18, 24, 47, 99, 99, 99, 99), (18, 21, 26, 66, 99, 99, 99, 99), (24, 26, 56, 99, 99, 99, 99, 99),
    (47, 66, 99, 99, 99, 99, 99, 99), *(((99,) * 8,) * 4),
)  # fmt: skip
# chroma subsampling -> (horizontal, vertical) factor
FACTORS = {"4:4:4": (1, 1), "4:2:2": (2, 1), "4:2:0": (2, 2)}


def quant_table(base: tuple[tuple[int, ...], ...], quality: int) -> Tensor:
    """libjpeg's jpeg_set_quality(quality, force_baseline=TRUE) of one base table -> (8, 8) int64."""
    quality = min(max(int(quality), 1), 100)
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return torch.tensor([[min(max((v * scale + 50) // 100, 1), 255) for v in row] for row in base], dtype=torch.long)


def _shift(x: Tensor, bits: int) -> Tensor:
    """Arithmetic right shift of an integer tensor (floor division by 2**bits, as C's >> on libjpeg's INT32)."""
    return torch.div(x, 1 << bits, rounding_mode="floor")


def _to_ycc(rgb: Tensor) -> Tensor:
    """(B, 3, H, W) uint8 RGB -> (B, 3, H, W) int64 Y, Cb, Cr: libjpeg's jccolor, 16-bit fixed point."""
    r, g, b = rgb.long().unbind(1)
    half, offset = 1 << 15, 128 << 16
    y = _shift(19595 * r + 38470 * g + 7471 * b + half, 16)
    cb = _shift(-11059 * r - 21709 * g + 32768 * b + offset + half - 1, 16)
    cr = _shift(32768 * r - 27439 * g - 5329 * b + offset + half - 1, 16)
    return torch.stack([y, cb, cr], dim=1)


def _to_rgb(ycc: Tensor) -> Tensor:
    """(B, 3, H, W) int64 Y, Cb, Cr -> uint8 RGB: libjpeg's jdcolor tables, clamped to 0..255."""
    y, cb, cr = ycc.unbind(1)
    cb, cr = cb - 128, cr - 128
    half = 1 << 15
    r = y + _shift(91881 * cr + half, 16)
    g = y + _shift(-22554 * cb - 46802 * cr + half, 16)
    b = y + _shift(116130 * cb + half, 16)
    return torch.stack([r, g, b], dim=1).clamp(0, 255).to(torch.uint8)


def _downsample(c: Tensor, h: int, v: int) -> Tensor:
    """(B, H, W) int64 chroma plane -> (B, H/v, W/h): jcsample's box average, its bias alternating along a row
    (h2v1: 0, 1; h2v2: 1, 2) so that rounding does not drift one way."""
    if (h, v) == (1, 1):
        return c
    B, H, W = c.shape
    blocks = c.view(B, H // v, v, W // h, h).sum(dim=(2, 4))  # (B, H/v, W/h)
    bias = torch.arange(W // h, device=c.device) % 2 + (1 if v == 2 else 0)  # (W/h,)
    return _shift(blocks + bias, 2 if v == 2 else 1)


def _upsample(c: Tensor, h: int, v: int) -> Tensor:
    """(B, H', W') int64 chroma plane -> (B, H'v, W'h): jdsample's "fancy" (triangle) upsampling, libjpeg's
    default, each output sample 3/4 of its nearer input and 1/4 of the next, the edges repeated."""
    if (h, v) == (1, 1):
        return c
    if v == 2:  # vertical first: each column sum 3 * this row + the row above / below (the edge rows repeated)
        up = torch.cat([c[:, :1], c[:, :-1]], dim=1)
        down = torch.cat([c[:, 1:], c[:, -1:]], dim=1)
        rows = torch.stack([3 * c + up, 3 * c + down], dim=2).flatten(1, 2)  # (B, 2H', W') in 4x units
        scale, lo, hi = 4, 8, 7  # the sums carry 4x; the horizontal step 4x more: >> 4
    else:
        rows, scale, lo, hi = c, 1, 1, 2  # h2v1: (3 * this + the neighbour + 1 or 2) >> 2
    left = torch.cat([rows[:, :, :1], rows[:, :, :-1]], dim=2)
    right = torch.cat([rows[:, :, 1:], rows[:, :, -1:]], dim=2)
    even, odd = 3 * rows + left + lo, 3 * rows + right + hi
    bits = 4 if scale == 4 else 2
    if scale == 4:  # the first and last columns take no neighbour: 4 * this + 8 / + 7
        even[:, :, 0] = 4 * rows[:, :, 0] + lo
        odd[:, :, -1] = 4 * rows[:, :, -1] + hi
    else:  # h2v1: the first and last output samples are the input's
        even[:, :, 0] = rows[:, :, 0] * 4
        odd[:, :, -1] = rows[:, :, -1] * 4
    return _shift(torch.stack([even, odd], dim=3).flatten(2, 3), bits)


# libjpeg's ISLOW transforms (jfdctint.c, jidctint.c): 13-bit fixed-point constants, 2 extra bits between passes
CONST_BITS, PASS1_BITS = 13, 2
C0_298, C0_390, C0_541, C0_765, C0_899, C1_175 = 2446, 3196, 4433, 6270, 7373, 9633
C1_501, C1_847, C1_961, C2_053, C2_562, C3_072 = 12299, 15137, 16069, 16819, 20995, 25172


def _descale(x: Tensor, n: int) -> Tensor:
    return _shift(x + (1 << (n - 1)), n)


def _odd(t4: Tensor, t5: Tensor, t6: Tensor, t7: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The odd part both transforms share (jfdctint's tmp4..7 / jidctint's tmp0..3 with z1..z5)."""
    z1, z2, z3, z4 = t4 + t7, t5 + t6, t4 + t6, t5 + t7
    z5 = (z3 + z4) * C1_175
    z1, z2 = z1 * -C0_899, z2 * -C2_562
    z3, z4 = z3 * -C1_961 + z5, z4 * -C0_390 + z5
    return t4 * C0_298 + z1 + z3, t5 * C2_053 + z2 + z4, t6 * C3_072 + z2 + z3, t7 * C1_501 + z1 + z4


def _fdct_pass(d: list[Tensor], first: bool) -> list[Tensor]:
    """One 1-D pass of jpeg_fdct_islow over 8 samples (each a tensor of the other axes); ``first``: the row pass,
    whose outputs keep PASS1_BITS extra bits."""
    t0, t7, t1, t6 = d[0] + d[7], d[0] - d[7], d[1] + d[6], d[1] - d[6]
    t2, t5, t3, t4 = d[2] + d[5], d[2] - d[5], d[3] + d[4], d[3] - d[4]
    t10, t13, t11, t12 = t0 + t3, t0 - t3, t1 + t2, t1 - t2
    n = CONST_BITS - PASS1_BITS if first else CONST_BITS + PASS1_BITS
    out: list[Tensor] = [t10] * 8
    if first:
        out[0], out[4] = (t10 + t11) * (1 << PASS1_BITS), (t10 - t11) * (1 << PASS1_BITS)
    else:
        out[0], out[4] = _descale(t10 + t11, PASS1_BITS), _descale(t10 - t11, PASS1_BITS)
    z1 = (t12 + t13) * C0_541
    out[2], out[6] = _descale(z1 + t13 * C0_765, n), _descale(z1 - t12 * C1_847, n)
    o7, o5, o3, o1 = _odd(t4, t5, t6, t7)
    out[7], out[5], out[3], out[1] = (_descale(v, n) for v in (o7, o5, o3, o1))
    return out


def _idct_pass(c: list[Tensor], first: bool) -> list[Tensor]:
    """One 1-D pass of jpeg_idct_islow over 8 coefficients; ``first``: the column pass (PASS1_BITS kept), else the
    row pass, whose outputs are samples less 128 (3 more bits: the 1/8 of the transform)."""
    z1 = (c[2] + c[6]) * C0_541
    t2, t3 = z1 - c[6] * C1_847, z1 + c[2] * C0_765
    t0, t1 = (c[0] + c[4]) * (1 << CONST_BITS), (c[0] - c[4]) * (1 << CONST_BITS)
    t10, t13, t11, t12 = t0 + t3, t0 - t3, t1 + t2, t1 - t2
    o0, o1, o2, o3 = _odd(c[7], c[5], c[3], c[1])
    n = CONST_BITS - PASS1_BITS if first else CONST_BITS + PASS1_BITS + 3
    sums = (t10 + o3, t11 + o2, t12 + o1, t13 + o0, t13 - o0, t12 - o1, t11 - o2, t10 - o3)
    return [_descale(v, n) for v in sums]


def _transform(blocks: Tensor, one_pass) -> Tensor:
    """(..., 8, 8) int64 -> a 2-D transform: ``one_pass(columns_or_rows, first)`` along the rows, then the columns
    (forward) / the columns, then the rows (inverse: the caller swaps the axes)."""
    rows = torch.stack(one_pass(list(blocks.unbind(-1)), True), dim=-1)  # along the last axis
    return torch.stack(one_pass(list(rows.unbind(-2)), False), dim=-2)  # then along the other


def _quantised(plane: Tensor, table: Tensor) -> Tensor:
    """(B, H, W) int64 samples (H, W multiples of 8) -> the same after libjpeg's ISLOW DCT, quantisation by ``table``
    (8, 8) int64 (rounding half away from zero), dequantisation and ISLOW inverse DCT, clamped to 0..255."""
    B, H, W = plane.shape
    x = (plane - 128).view(B, H // 8, 8, W // 8, 8).transpose(2, 3)  # (B, H/8, W/8, 8, 8) blocks [row, col]
    coef = _transform(x, _fdct_pass)  # 8 x the standard's F(u, v), [v, u]
    div = table * 8
    q = torch.where(coef < 0, -torch.div(-coef + div // 2, div, rounding_mode="floor"),
                    torch.div(coef + div // 2, div, rounding_mode="floor"))  # fmt: skip
    # the inverse: columns first (over the block's first axis), then rows
    back = _transform((q * table).transpose(-1, -2), _idct_pass).transpose(-1, -2)
    back = (back + 128).clamp(0, 255)
    return back.transpose(2, 3).reshape(B, H, W)


def jpeg_round_trip(rgb: Tensor, quality: int, subsampling: str) -> Tensor:
    """(B, 3, H, W) uint8 RGB -> the same photos as a JPEG of this quality and chroma subsampling would decode to
    (within a level or two: module doc), on rgb's device."""
    if subsampling not in FACTORS:
        raise ValueError(f"subsampling must be one of {', '.join(FACTORS)}, got {subsampling!r}")
    h, v = FACTORS[subsampling]
    B, _, H, W = rgb.shape
    mcu_w, mcu_h = 8 * h, 8 * v
    pad_w, pad_h = -W % mcu_w, -H % mcu_h
    ycc = _to_ycc(rgb)
    if pad_w or pad_h:  # libjpeg repeats the last column and row to whole MCUs
        ycc = F.pad(ycc.float(), (0, pad_w, 0, pad_h), mode="replicate").long()
    luma, chroma = quant_table(LUMA, quality).to(rgb.device), quant_table(CHROMA, quality).to(rgb.device)
    y = _quantised(ycc[:, 0], luma)
    # the chroma planes' real samples (ceil(H / v), ceil(W / h)): the decoder repeats their last row and column,
    # not the padding's
    ch, cw = -(-H // v), -(-W // h)
    cb, cr = (_upsample(_quantised(_downsample(ycc[:, k], h, v), chroma)[:, :ch, :cw], h, v) for k in (1, 2))
    out = _to_rgb(torch.stack([y[:, :H, :W], cb[:, :H, :W], cr[:, :H, :W]], dim=1))
    return out

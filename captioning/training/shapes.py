"""Synthetic shape scenes with object boxes: ground truth for "did the decoder look at what it names".

A scene holds 1..max_objects shapes (shape x colour x size, no two alike) on a plain white canvas,
separated by a margin, and several reference captions. Everything is drawn from a `random.Random`
passed in (or seeded per scene by `make_scenes`), never the global RNG, so scenes repeat exactly.

Caption grammar (lowercase tokens, fully regular):
    caption  := NP ( REL NP )*                 -- a chain; each REL links the two NPs beside it
    NP       := "a" SIZE COLOUR SHAPE          -- e.g. "a small red circle"
    REL      := "left of" | "right of" | "above" | "below"
              | "to the left of" | "to the right of"      (variants, references only)
REL(A, B) says where A lies relative to B along the dominant axis of their centre offset
(|dx| >= |dy| -> left/right, else above/below).

The CANONICAL caption (captions[0]) lists the objects left to right by box centre, with the
short relation words, so it is a function of the image alone:
    1 object:  "a small red circle"
    2 objects: "a small red circle left of a large blue square"
    3 objects: "a small red circle above a large blue square left of a small green triangle"
Other references: the same chain right to left with the inverse relations, the "to the left of"
forms, and "there is ..." (one object: also "a single ..."); 3 to 5 references per scene for two or
more objects, 3 for one. Layouts are rejected until every pair of objects has a clear left-to-right
order and a clear dominant axis, so the canonical caption is learnable exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from PIL import Image, ImageDraw

SHAPES = ("circle", "square", "triangle", "diamond")
COLOURS = ("red", "green", "blue", "yellow")
SIZES = ("small", "large")
RELATION_WORDS = ("left", "right", "of", "to", "the", "above", "below")
FUNCTION_WORDS = ("a", "there", "is", "single")
VOCAB: tuple[str, ...] = FUNCTION_WORDS + RELATION_WORDS + SIZES + COLOURS + SHAPES

RGB = {
    "red": (220, 30, 30),
    "green": (20, 150, 40),
    "blue": (30, 60, 220),
    "yellow": (235, 190, 0),
}
BACKGROUND = (255, 255, 255)
# Side of an object's square box as a fraction of the canvas side: small and large never meet.
SIZE_RANGE = {"small": (0.15, 0.20), "large": (0.30, 0.38)}
# Every pair of centres is at least this far apart in x (fraction of the canvas side), so the
# left-to-right order is visible at a coarse CNN grid ...
MIN_DX = 0.06
# ... and the dominant axis of each offset beats the other by this factor (no near-diagonal pairs).
DOMINANCE = 1.4

_ATTRIBUTES = frozenset(SHAPES + COLOURS + SIZES)
_MODIFIERS = frozenset(SIZES + COLOURS)


@dataclass
class SceneObject:
    shape: str
    colour: str
    size: str
    box: tuple[int, int, int, int]  # (x0, y0, x1, y1) in pixels, x1/y1 exclusive

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.box
        return (x0 + x1) / 2, (y0 + y1) / 2


@dataclass
class Scene:
    image: Image.Image  # RGB, size x size
    objects: list[SceneObject]
    captions: list[list[str]]  # reference captions as token lists; captions[0] is canonical
    # Per caption, per token: index into `objects` of the object a size/colour/shape word names, else None.
    word_objects: list[list[int | None]]


# ----------------------------------------------------------------------------- captions


def relation(a: SceneObject, b: SceneObject, to_the: bool = False) -> list[str]:
    """Tokens saying where `a` lies relative to `b`, along the dominant axis of the centre offset."""
    (ax, ay), (bx, by) = a.centre, b.centre
    dx, dy = ax - bx, ay - by
    if abs(dx) >= abs(dy):
        side = "left" if dx < 0 else "right"
        return ["to", "the", side, "of"] if to_the else [side, "of"]
    return ["above"] if dy < 0 else ["below"]


def _chain(
    objects: list[SceneObject], order: list[int], to_the: bool = False, prefix: tuple[str, ...] = ()
) -> tuple[list[str], list[int | None]]:
    """Caption NP (REL NP)* over `order`, with the object index of every attribute word."""
    tokens: list[str] = list(prefix)
    owners: list[int | None] = [None] * len(prefix)
    for k, i in enumerate(order):
        if k > 0:
            rel = relation(objects[order[k - 1]], objects[i], to_the)
            tokens += rel
            owners += [None] * len(rel)
        obj = objects[i]
        tokens += ["a", obj.size, obj.colour, obj.shape]
        owners += [None, i, i, i]
    return tokens, owners


def canonical_order(objects: list[SceneObject]) -> list[int]:
    """Object indices left to right by box centre (ties: top first, then index)."""
    return sorted(range(len(objects)), key=lambda i: (*objects[i].centre, i))


def make_captions(objects: list[SceneObject]) -> tuple[list[list[str]], list[list[int | None]]]:
    """Reference captions (canonical first, at most 5, no duplicates) and their word->object maps."""
    order = canonical_order(objects)
    back = order[::-1]
    if len(objects) == 1:
        obj = objects[0]
        single = (["a", "single", obj.size, obj.colour, obj.shape], [None, None, 0, 0, 0])
        variants = [_chain(objects, order), _chain(objects, order, prefix=("there", "is")), single]
    else:
        variants = [
            _chain(objects, order),
            _chain(objects, back),
            _chain(objects, order, to_the=True),
            _chain(objects, back, to_the=True),
            _chain(objects, order, prefix=("there", "is")),
            _chain(objects, back, prefix=("there", "is")),
        ]
    captions: list[list[str]] = []
    owners: list[list[int | None]] = []
    for tokens, own in variants:
        if tokens not in captions and len(captions) < 5:
            captions.append(tokens)
            owners.append(own)
    return captions, owners


def resolve_object(tokens: list[str], index: int, objects: list[SceneObject]) -> int | None:
    """The object that the noun phrase around `tokens[index]` names, or None.

    The phrase is the run of size/colour words around `index` plus the shape word that ends it
    (a shape word always ends a phrase, so "red circle blue square" is two phrases). Returns the
    index of the unique object matching every attribute stated in the phrase; None when the word
    is not an attribute, or no object or more than one object matches ("a circle" with two circles).
    """
    if not 0 <= index < len(tokens) or tokens[index] not in _ATTRIBUTES:
        return None
    start = index
    while start > 0 and tokens[start - 1] in _MODIFIERS:
        start -= 1
    end = index  # inclusive
    if tokens[index] in _MODIFIERS:
        while end + 1 < len(tokens) and tokens[end + 1] in _MODIFIERS:
            end += 1
        if end + 1 < len(tokens) and tokens[end + 1] in SHAPES:
            end += 1
    phrase = tokens[start : end + 1]
    matches = [
        i
        for i, obj in enumerate(objects)
        if all(w == obj.shape for w in phrase if w in SHAPES)
        and all(w == obj.colour for w in phrase if w in COLOURS)
        and all(w == obj.size for w in phrase if w in SIZES)
    ]
    return matches[0] if len(matches) == 1 else None


# ----------------------------------------------------------------------------- layout and drawing


def _layout_ok(boxes: list[tuple[int, int, int, int]], margin: int, canvas: int) -> bool:
    """Does the last box keep the margin from all others, with a clear order and axis to each?"""
    x0, y0, x1, y1 = boxes[-1]
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    for bx0, by0, bx1, by1 in boxes[:-1]:
        apart = x1 + margin <= bx0 or bx1 + margin <= x0 or y1 + margin <= by0 or by1 + margin <= y0
        if not apart:
            return False
        dx, dy = abs(cx - (bx0 + bx1) / 2), abs(cy - (by0 + by1) / 2)
        if dx < MIN_DX * canvas or max(dx, dy) < DOMINANCE * min(dx, dy):
            return False
    return True


def _place(rng: random.Random, sides: list[int], canvas: int, margin: int):
    """Boxes for squares of the given sides, or None if a random layout does not fit."""
    boxes: list[tuple[int, int, int, int]] = []
    for side in sides:
        for _ in range(60):
            x0 = rng.randint(margin, canvas - margin - side)
            y0 = rng.randint(margin, canvas - margin - side)
            boxes.append((x0, y0, x0 + side, y0 + side))
            if _layout_ok(boxes, margin, canvas):
                break
            boxes.pop()
        else:
            return None
    return boxes


def draw_shape(draw: ImageDraw.ImageDraw, obj: SceneObject) -> None:
    """Fill `obj` into its box (PIL corners are inclusive, our x1/y1 exclusive)."""
    x0, y0, x1, y1 = obj.box
    x1, y1 = x1 - 1, y1 - 1
    fill = RGB[obj.colour]
    if obj.shape == "circle":
        draw.ellipse((x0, y0, x1, y1), fill=fill)
    elif obj.shape == "square":
        draw.rectangle((x0, y0, x1, y1), fill=fill)
    elif obj.shape == "triangle":
        draw.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=fill)
    elif obj.shape == "diamond":
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        draw.polygon([(mx, y0), (x1, my), (mx, y1), (x0, my)], fill=fill)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")


def make_scene(rng: random.Random, size: int = 128, max_objects: int = 3) -> Scene:
    """One random scene of 1..max_objects distinct objects on a `size` x `size` white canvas."""
    if not 64 <= size <= 512:
        raise ValueError(f"size must be in [64, 512] pixels, got {size}")
    if not 1 <= max_objects <= 4:
        raise ValueError(f"max_objects must be in [1, 4], got {max_objects}")
    n = rng.randint(1, max_objects)
    combos = [(s, c, z) for s in SHAPES for c in COLOURS for z in SIZES]
    kinds = rng.sample(combos, n)  # distinct (shape, colour, size): objects are distinguishable
    margin = max(2, size // 32)
    boxes = None
    while boxes is None:
        sides = [round(rng.uniform(*SIZE_RANGE[z]) * size) for _, _, z in kinds]
        for _ in range(50):
            boxes = _place(rng, sides, size, margin)
            if boxes is not None:
                break
        else:
            kinds = kinds[:-1]  # crowded (e.g. four large objects): drop one and try again
    objects = [SceneObject(s, c, z, box) for (s, c, z), box in zip(kinds, boxes, strict=True)]
    image = Image.new("RGB", (size, size), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for obj in objects:
        draw_shape(draw, obj)
    captions, word_objects = make_captions(objects)
    return Scene(image=image, objects=objects, captions=captions, word_objects=word_objects)


def make_scenes(n: int, seed: int, size: int = 128, max_objects: int = 3) -> list[Scene]:
    """`n` scenes; scene i depends only on (seed, i), so a longer list extends a shorter one."""
    return [make_scene(random.Random(f"shapes:{seed}:{i}"), size=size, max_objects=max_objects) for i in range(n)]

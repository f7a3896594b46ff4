"""captioning: Show-Attend-Tell image captioning on the shared text_attn library.

In rooms by role, every arrow downwards (tests/cli/test_layering.py keeps it so): ``commands`` (caption,
caption-train, caption-export) -> ``training`` -> ``model`` -> ``views`` -> ``photos``; docs/code.md names every
module. The public face: ``from captioning import Captioner`` and the names in ``__all__``, each loaded on first use,
so ``import captioning`` imports no torch (``caption --help`` stays fast).
"""

from text_attn.core.lazy import lazy_exports

_PUBLIC = {  # name -> the module that defines it
    "Caption": "captioning.model.captioner",
    "Captioner": "captioning.model.captioner",
    "Captions": "captioning.model.captioner",
    "DEMO_PHOTOS": "captioning.model.bundled",
    "ImageReadError": "captioning.photos.preprocess",
    "SHAPES": "captioning.training.shapes",
    "caption_train_cli": "captioning.commands.train",
    "cells_in_box": "captioning.training.grounding",
    "draw_overlay": "captioning.views.overlay",
    "grounding": "captioning.training.grounding",
    "load_image": "captioning.photos.preprocess",
    "make_scenes": "captioning.training.shapes",
    "resolve_object": "captioning.training.shapes",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(globals(), _PUBLIC)

"""A tiny random-weight caption model file (resnet18 cut at stride 16, a 4 x 4 grid at 64 px, the shapes vocabulary):
what the CLI tests caption with when only the plumbing is under test."""

from __future__ import annotations

from pathlib import Path

import torch

from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.training.shapes import VOCAB
from text_attn.core.vocab import Vocabulary


def tiny_model_file(path: Path, crop: bool = True, **decoder) -> Path:
    """``decoder``: further DecoderConfig settings (e.g. attention="hard")."""
    torch.manual_seed(0)
    enc = EncoderConfig(backbone="resnet18", stride=16, weights=None, grid=4, image_size=64, crop=crop)
    dec = DecoderConfig(embed_dim=16, hidden_dim=32, attn_dim=16, **decoder)
    Captioner.build(Vocabulary.build([list(VOCAB)]), enc, dec).save(path)
    return path


def flag_every_photo(path: Path, domain: str = "a tiny world") -> Path:
    """Give the caption model file at ``path`` a domain check that finds every photo far from its world (a threshold
    below any distance), so the out-of-domain note's whole path runs; rewritten in place."""
    captioner = Captioner.load(path)
    dim = captioner.encode(torch.zeros(1, 3, *[captioner.preprocess.image_size] * 2)).shape[-1]  # (1, L, D)
    captioner.domain, captioner.domain_check = domain, {"prototypes": torch.eye(dim)[:2], "threshold": -1.0}
    captioner.save(path)
    return path


def separate_run(
    vocab: Vocabulary, seed: int, path: Path | None = None, encoder: dict | None = None, **decoder
) -> Captioner:
    """A tiny captioner as one of several separately trained runs would be (ensemble tests): the one random encoder
    every run shares (seed 0), its decoder's weights drawn from ``seed``; saved at ``path`` when given. ``encoder``,
    ``decoder``: further EncoderConfig (e.g. the training photos' JPEG step) and DecoderConfig settings (e.g.
    hidden_dim=24: another model)."""
    torch.manual_seed(0)
    enc = EncoderConfig(backbone="resnet18", stride=16, weights=None, grid=4, image_size=64, **(encoder or {}))
    captioner = Captioner.build(vocab, enc, DecoderConfig(**{"embed_dim": 16, "hidden_dim": 32, "attn_dim": 16,
                                                             **decoder}))  # fmt: skip
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in captioner.model.decoder.parameters():
            p.normal_(0, 0.3)
    if path is not None:
        captioner.save(path)
    return captioner

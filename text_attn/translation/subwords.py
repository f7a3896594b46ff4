"""Subword units for real text: a SentencePiece model (Kudo and Richardson 2018) learned from the training side.

Words split into pieces the model has seen ("Büsche" -> "▁Bü" "sche"), so there is no unknown word: a rare word is
spelled from smaller pieces, and a character never seen in training from its UTF-8 bytes (``byte_fallback``). Text
keeps its case and punctuation, and ``decode(encode(text)) == text`` for text in NFC with single spaces between words
(runs of spaces become one; a no-break space is a character of its own). The model is a few hundred KB of bytes,
stored in the model file as a uint8 tensor, so ``translate`` splits and joins exactly as training did. Training one on
Multi30k's 58,000 German and English sentences takes about half a second.

Models trained since 2026-12-02 read text as it is (SentencePiece's ``identity`` rule, the text composed to NFC
first); older ones keep the rule their file stores, ``nmt_nfkc``, which turned Chinese "，？！" into ASCII, "…" into
"...", "½" into "1⁄2" and "´" into a space and an accent. One model is learned from both sides, but each side's
vocabulary holds only the pieces training spelled that side's text with: ``restricted`` spells a side's input from
those alone (a word the joint model would split into a piece only the other side used, "Telefongespräch" ->
"präch", is spelled from smaller pieces, down to UTF-8 bytes), never as <unk>.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Iterable, Sequence

import torch

MODEL_TYPES = ("bpe", "unigram")
NO_BREAK = "\xa0\u2007\u202f"  # no-break spaces: French writes one before : ! ? (a character to an identity model)
NORMAL, UNUSED = 1, 5  # a SentencePiece piece's types (sentencepiece_model.proto) that ``restricted`` changes
# The most training sentences (both sides' lines) a model is learned from; of a larger corpus (WMT's 4.5 million pairs
# are 9 million) a sample drawn here with the data's seed. SentencePiece's own sampling (input_sentence_size) draws
# another sample at every run, seeded by nothing we can set: each process of a DDP run learned other pieces, and the
# ids one process trained on meant other pieces in the next (the gradients averaged over them).
MOST_SENTENCES = 2_000_000


def prepared(text: str, keep: str = NO_BREAK) -> str:
    """``text`` as a subword model reads it: composed (NFC), each run of spaces (but the no-break spaces in ``keep``)
    one space, none at either end: how training's lines and every input are read alike."""
    return re.sub(rf"[^\S{keep}]+", " ", unicodedata.normalize("NFC", text)).strip()


def learned_from(texts: Iterable[str], seed: int = 0) -> Sequence[str]:
    """The texts a subword model is learned from: all of them, or of more than MOST_SENTENCES that many, drawn with
    ``seed`` and kept in their order (the same ones in every process and run)."""
    texts = texts if isinstance(texts, Sequence) else list(texts)
    if len(texts) <= MOST_SENTENCES:
        return texts
    import random

    return [texts[i] for i in sorted(random.Random(seed).sample(range(len(texts)), MOST_SENTENCES))]


class SubwordError(ValueError):
    """A subword model that cannot be trained or read: one line."""


class Subwords:
    """A trained SentencePiece model: text <-> pieces (strings; a piece that starts a word begins with "▁")."""

    def __init__(self, proto: bytes, allowed: frozenset[str] | None = None):
        """proto: the model as trained (what a model file stores). allowed: the pieces ``encode`` may write
        (:meth:`restricted`); None: all."""
        import sentencepiece as spm

        self.proto, self.allowed = bytes(proto), allowed
        self._sp = spm.SentencePieceProcessor()  # the model as trained
        self._narrow = None  # restricted: the model with the pieces outside ``allowed`` unused
        try:
            self._sp.LoadFromSerializedProto(self.proto)
            if allowed is not None:
                self._narrow = spm.SentencePieceProcessor()
                self._narrow.LoadFromSerializedProto(_unused_outside(self.proto, allowed))
        except (RuntimeError, OSError, IndexError) as exc:
            raise SubwordError(f"not a SentencePiece model ({' '.join(str(exc).split())[:120]})") from None
        # a no-break space one side never wrote is a space to it (nmt_nfkc made every one a space)
        self._keep = "".join(c for c in NO_BREAK if allowed is None or any(c in p for p in allowed))

    def restricted(self, pieces: Iterable[str]) -> Subwords:
        """This model spelling text from ``pieces`` alone (a side's vocabulary): SentencePiece splits a piece outside
        them back into the pieces it was merged from (what its own SetVocabulary does), and a character outside them
        becomes its UTF-8 bytes. A line the trained model spells from those pieces alone is encoded as before (as
        training spelled its text), whatever the restricted model would make of it."""
        return Subwords(self.proto, frozenset(pieces))

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, model_type: str = "bpe", seed: int = 0) -> Subwords:
        """Learn ``vocab_size`` pieces (bytes and the unknown piece included) from ``texts``: all characters of the
        training text are kept (coverage 1.0); anything else falls back to bytes. Of more than MOST_SENTENCES texts,
        that many drawn with ``seed`` (:func:`learned_from`): the same model from the same texts, in any process."""
        import sentencepiece as spm

        if model_type not in MODEL_TYPES:
            raise SubwordError(f"subword type {model_type!r}: choose {' or '.join(MODEL_TYPES)}")
        texts = learned_from(texts, seed)
        out = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=(prepared(t) for t in texts),  # as encode reads text
                model_writer=out,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=1.0,
                normalization_rule_name="identity",  # text as written (nmt_nfkc made "，？！" ASCII, "´" a space)
                byte_fallback=True,  # an unseen character becomes its UTF-8 bytes, never <unk>
                pad_id=-1,  # our Vocabulary owns pad / bos / eos; SentencePiece keeps only its unknown piece
                bos_id=-1,
                eos_id=-1,
                unk_id=0,
                minloglevel=2,  # no progress log on stderr
                num_threads=2,
                input_sentence_size=MOST_SENTENCES,  # never more are given (learned_from): SentencePiece draws none
                shuffle_input_sentence=True,
            )
        except RuntimeError as exc:  # e.g. a vocabulary larger than the text allows
            most = re.search(r"value <= (\d+)", str(exc))
            if most:  # SentencePiece's own words name its source file and line: the number is what matters
                raise SubwordError(f"{vocab_size} subword units are more than this training text gives: at most "
                                   f"{most.group(1)}") from None  # fmt: skip
            least = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(exc))
            if least:  # each character of the text is a piece of its own, with the bytes and the special pieces
                raise SubwordError(f"{vocab_size} subword units are fewer than this training text needs: at least "
                                   f"{least.group(1)} (one a character it writes)") from None  # fmt: skip
            raise SubwordError(f"cannot learn {vocab_size} subword units: {' '.join(str(exc).split())[:200]}") from None
        return cls(out.getvalue())

    def __len__(self) -> int:
        return self._sp.GetPieceSize()

    def encode(self, text: str) -> list[str]:
        text = prepared(text, self._keep)
        pieces = self._sp.EncodeAsPieces(text)
        if self.allowed is None or all(p in self.allowed for p in pieces):
            return pieces  # as training spelled its text: a restricted model changes only a line it could not read
        pieces = self._narrow.EncodeAsPieces(text)
        return [b for p in pieces for b in ([p] if p in self.allowed else self._spelled(p))]

    def _spelled(self, piece: str) -> list[str]:
        """A piece outside ``allowed`` (left only for a character the other side alone wrote, "’"): its characters,
        those outside ``allowed`` as their UTF-8 bytes (``byte_fallback``'s pieces); as it is where a byte is outside
        too (<unk>, and said)."""
        out = []
        for ch in piece:
            spelled = [ch] if ch in self.allowed else [f"<0x{b:02X}>" for b in ch.encode()]
            if not all(p in self.allowed for p in spelled):
                return [piece]
            out += spelled
        return out

    def decode(self, pieces: Sequence[str]) -> str:
        return self._sp.DecodePieces(list(pieces))

    # --- in a model file: plain tensors only (torch.load(weights_only=True)) ---------------------------------------
    def to_tensor(self) -> torch.Tensor:
        return torch.frombuffer(bytearray(self.proto), dtype=torch.uint8).clone()  # (N,)

    @classmethod
    def from_tensor(cls, data: torch.Tensor) -> Subwords:
        if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8 or data.dim() != 1:
            raise SubwordError("the subword model must be a 1-D uint8 tensor")
        return cls(data.numpy().tobytes())


def _unused_outside(proto: bytes, allowed: frozenset[str]) -> bytes:
    """A serialised SentencePiece model with its normal pieces of more than one character outside ``allowed`` typed
    unused, as SentencePieceProcessor::SetVocabulary types them (the Python wrapper lacks it): the protobuf wire
    format read and written here, so no protobuf package is needed. ModelProto's field 1 is a piece (its field 1 the
    text, 3 the type); every other field, and every piece kept, is copied as it is (8,000 pieces: about 10 ms)."""
    out, i = bytearray(), 0
    while i < len(proto):
        start, (key, i) = i, _varint(proto, i)
        i = _skip(proto, i, key & 7)
        marked = _unused(proto[_varint(proto, start + 1)[1] : i], allowed) if key == (1 << 3 | 2) else None
        out += proto[start:i] if marked is None else bytes([key]) + _varint_bytes(len(marked)) + marked
    return bytes(out)


def _unused(message: bytes, allowed: frozenset[str]) -> bytes | None:
    """A piece's message typed unused where it is a normal piece of more than one character outside ``allowed``;
    None where it stays as it is."""
    if message[:1] == b"\n":  # its text first, as SentencePiece writes it: most pieces are decided here
        n, k = _varint(message, 1)
        if len(text := message[k : k + n].decode("utf-8")) <= 1 or text in allowed:
            return None
    piece, kind, j, rest = "", NORMAL, 0, bytearray()
    while j < len(message):
        field_start, (field, j) = j, _varint(message, j)
        j = _skip(message, j, field & 7)
        if field == (1 << 3 | 2):
            n, k = _varint(message, field_start + 1)
            piece = message[k : k + n].decode("utf-8")
        if field == (3 << 3 | 0):
            kind = _varint(message, field_start + 1)[0]
        else:
            rest += message[field_start:j]
    if kind != NORMAL or len(piece) <= 1 or piece in allowed:
        return None
    return bytes(rest) + bytes([3 << 3 | 0]) + _varint_bytes(UNUSED)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at ``i`` and where it ends."""
    value = shift = 0
    while True:
        byte = data[i]
        value, shift, i = value | (byte & 0x7F) << shift, shift + 7, i + 1
        if byte < 0x80:
            return value, i


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _skip(data: bytes, i: int, wire: int) -> int:
    """Where a field's value that starts at ``i`` ends (protobuf wire types 0, 1, 2, 5)."""
    if wire == 0:
        return _varint(data, i)[1]
    if wire == 2:
        n, i = _varint(data, i)
        return i + n
    if wire in (1, 5):
        return i + (8 if wire == 1 else 4)
    raise IndexError(f"wire type {wire}")

"""A tiny random-weight German -> English model file on subword units learned from the test corpus
(helpers.multi30k): what the translate CLI tests run when only the plumbing is under test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from helpers.multi30k import write_corpus

from text_attn.translation.data import TranslationDataModule
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.translator import Translator


def tiny_subword_model_file(folder: Path, info: dict[str, Any] | None = None) -> Path:
    dm = TranslationDataModule(task="pair", root=str(write_corpus(folder / "c")), src_lang="de", tgt_lang="en",
                               tokenizer="subword", subword_vocab=300)  # fmt: skip
    dm.setup("fit")
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(src_vocab_size=len(dm.src_vocab), tgt_vocab_size=len(dm.tgt_vocab), embed_dim=8,
                        enc_hidden=8, dec_hidden=16, attn_dim=8)  # fmt: skip
    translator = Translator(Seq2Seq(cfg), dm.src_vocab, dm.tgt_vocab, dm.codec, info=info, source_check=dm.source_check)
    return translator.save(folder / "m.pt")


def two_subword_model_files(folder: Path) -> tuple[Path, Path]:
    """Two tiny subword models of one vocabulary, the second's weights drawn again (std 0.5, seed 1): a pair an
    ensemble can join whose translations differ from the first's alone."""
    first = tiny_subword_model_file(folder / "a")
    other = Translator.load(first)
    torch.manual_seed(1)
    for p in other.net.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return first, other.save(folder / "b.pt")


def tiny_word_model_file(path: Path) -> Path:
    """A tiny random-weight word-level model (German and English words in one vocabulary): the server tests' model."""
    from text_attn.core.vocab import Vocabulary

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ein", "mann", "hund", "a", "man", "dog"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8)  # fmt: skip
    return Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(path)


def learned_positions_model_file(path: Path) -> Path:
    """A tiny random-weight word-level Transformer with a learned position table of 8 rows (``positions: learned``):
    a source of 8 words (with its end 9 rows) or a max_len of 8 is past it."""
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ma", "mo", "pe", "gake", "soru"]])
    cfg = TransformerConfig(len(vocab), len(vocab), d_model=8, num_heads=2, enc_layers=1, dec_layers=1, ff_dim=16,
                            positions="learned", max_len=8)  # fmt: skip
    return Translator(Transformer(cfg), vocab, vocab, "word", True).save(path)


def translate_run(model_file, capsys, monkeypatch, *args: str, stdin: str | None = None, batch_size: int = 3):
    """``translate --model MODEL --max-len 5 --batch-size N ARGS`` in this process (``stdin``: its text):
    (exit code, stderr)."""
    import io

    from text_attn.translation.translate_cli import translate_main

    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
    try:
        code = translate_main(["--model", str(model_file), "--max-len", "5", "--batch-size", str(batch_size), *args])
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err

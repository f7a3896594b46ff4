"""Word models trained before 2026-12-02, whose tokenizer split combining marks off as tokens of their own (a Hindi
model's vocabulary holds "ी", "ा", "ै"), read text as they were trained to: translate, text-export, resuming their
checkpoint and model.init_from tokenize with that rule (text_attn.core.vocab.marks_split_off tells such a model by
its vocabularies), and a captioner's --given too. Today read every Hindi word as <unk> (an audit)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from captioning.commands.caption import model_info as caption_info
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from text_attn.core.vocab import Vocabulary, marks_split_off, tokenize
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

NET = {"attention": "bahdanau", "embed_dim": 8, "enc_hidden": 8, "dec_hidden": 16, "attn_dim": 8, "dropout": 0.0}
NOUNS = {"आदमी": "the man", "औरत": "the woman", "लड़की": "the girl", "बिल्ली": "the cat", "पेड़": "the tree"}
VERBS = {"देखता है": "sees", "चलता है": "walks"}
PAIRS = [(f"{a} {b} {v}", f"{NOUNS[a]} {VERBS[v]} {NOUNS[b]}") for a in NOUNS for b in NOUNS if a != b for v in VERBS]
SENTENCE = "आदमी बिल्ली देखता है"
OLD = ["आदम", "ी", "ब", "ि", "ल", "्", "ल", "ी", "द", "े", "खत", "ा", "ह", "ै"]  # the split of before 2026-12-02

pytestmark = pytest.mark.usefixtures("one_thread")


def _module(corpus: Path, old: bool, **model) -> TranslationModule:
    """A module built on the corpus as text-train's fit builds it (no Trainer); ``old``: read as before 2026-12-02."""
    dm = TranslationDataModule(task="tsv", path=str(corpus), val_size=2, test_size=2, batch_size=8)
    if old:
        dm.split_at_marks()
    dm.setup("fit")
    torch.manual_seed(0)
    module = TranslationModule(network=dict(NET), **model)
    module.trainer = SimpleNamespace(datamodule=dm)
    module.setup("fit")
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hi") / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def old(corpus) -> tuple[Path, TranslationModule]:
    """A model file as the code of before 2026-12-02 wrote it: marks split off in its vocabularies, and no word of
    it in its metadata."""
    module = _module(corpus, old=True)
    path = module.translator().save(corpus.parent / "old.pt")
    data = torch.load(path, weights_only=True)
    del data["split_marks"]
    torch.save(data, path)
    return path, module


def test_the_old_tokens_are_the_old_regexs_and_a_vocabulary_tells_its_tokenizer(old):
    assert tokenize(SENTENCE, split_marks=True) == OLD
    assert tokenize(SENTENCE) == ["आदमी", "बिल्ली", "देखता", "है"]
    assert tokenize("Don't stop, it's 3,000.5 km!", split_marks=True) == tokenize("Don't stop, it's 3,000.5 km!")
    path, module = old
    assert module.codec.split_marks and {"ी", "ा", "ै"} <= set(module.src_vocab.itos)
    today = Vocabulary.build([tokenize(s) for s, _ in PAIRS])
    stray = Vocabulary.build([tokenize(s) for s, _ in PAIRS] + [tokenize("ी")])  # a stray mark alone: today's
    said = {**torch.load(path, weights_only=True), "split_marks": False}  # a file's own word wins over its vocabulary
    assert not Translator.from_data(said, path).codec.split_marks
    assert marks_split_off(module.src_vocab) and not marks_split_off(today) and not marks_split_off(stray)


def test_an_old_model_file_translates_hindi_as_it_was_trained(old, capsys):
    path, module = old
    translator = Translator.load(path)
    assert translator.codec.split_marks and translator.tokenize(SENTENCE) == OLD
    (tr,) = translator.translate([SENTENCE], max_len=4)
    assert tr.source == OLD and tr.unknown == []
    assert translate_main(["--model", str(path), "--max-len", "4", SENTENCE]) == 0
    err = capsys.readouterr().err
    assert "unknown word" not in err
    assert ("translate: note: this model's word tokens split at combining marks (trained before 2026-12-02): its "
            "inputs were read so, as it was trained; retrain it for today's tokens") in err.splitlines()  # fmt: skip
    assert translate_main(["--model", str(path), "--model-info"]) == 0
    assert ("tokens:         words (lowercased), split at combining marks: trained before 2026-12-02; retrain for "
            "today's tokens") in capsys.readouterr().out.splitlines()  # fmt: skip
    # text-export's file says it in so many words; today's models say nothing of it
    again = Translator.load(Translator.load(path).save(path.parent / "again.pt"))
    assert again.codec.split_marks and torch.load(path.parent / "again.pt", weights_only=True)["split_marks"] is True
    assert "split_marks" not in _module(path.parent / "pairs.tsv", old=False).translator().metadata()


def test_an_old_checkpoint_resumes_and_starts_a_run_reading_the_data_its_way(old, corpus, capsys):
    path, module = old
    checkpoint = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(checkpoint)
    del checkpoint["model_metadata"]["split_marks"]  # as the code of before 2026-12-02 wrote it
    resumed = _module(corpus, old=False)  # the data read today's way first, as Lightning sets it up
    assert not resumed.codec.split_marks and len(resumed.src_vocab) != len(module.src_vocab)
    resumed.on_load_checkpoint(checkpoint)  # was: "the checkpoint's source vocabulary (..) differs from the one ..."
    assert resumed.codec.split_marks and resumed.src_vocab == module.src_vocab
    resumed.load_state_dict(checkpoint["state_dict"])
    note = "text-train: note: the checkpoint: its word tokens split at combining marks (trained before 2026-12-02)"
    assert note in capsys.readouterr().err
    started = _module(corpus, old=False, init_from=str(path))
    assert started.codec.split_marks and started.src_vocab == module.src_vocab  # no token of today's added
    assert f"model.init_from {path}: its word tokens split at combining marks" in capsys.readouterr().err


def test_a_captioner_of_old_captions_reads_a_given_caption_as_it_was_trained():
    """Trained from a Karpathy JSON's raw sentences (its vocabulary holds the marks), a given caption's marks were
    split off and dropped as punctuation; read today's way, every Hindi word was <unk>."""
    vocab = Vocabulary.build([tokenize("एक आदमी घोड़े पर", split_marks=True)])
    torch.manual_seed(0)
    enc = EncoderConfig(backbone="resnet18", stride=16, weights=None, grid=4, image_size=64)
    cap = Captioner.build(vocab, enc, DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8))
    assert cap.split_marks and cap.unknown_words("एक आदमी घोड़े पर") == []
    (read,) = cap.read_features(cap.encode(torch.zeros(1, 3, 64, 64)), "एक आदमी")
    assert read.words == ["एक", "आदम"]
    assert "word tokens:    split at combining marks: trained before 2026-12-02; retrain for today's tokens" in (
        caption_info(cap, "m.pt")
    )
    cap.vocab = Vocabulary.build([tokenize("एक आदमी घोड़े पर")])  # today's: the words whole
    assert not cap.split_marks and cap.unknown_words("एक आदमी") == []

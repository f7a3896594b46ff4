"""benchmarks/multi30k.py --bundle: the model that leads on val becomes the default file; the better on val of the
Bahdanau GRU and its guided fine-tune, when scored and not the leader, is kept as its own file (``translate --model
bahdanau``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import multi30k  # noqa: E402 - the benchmark script, importable from its folder

from text_attn.translation import bundled  # noqa: E402


def test_the_val_leader_is_the_default_and_the_gru_keeps_its_own_file():
    choice = multi30k.bundle_choice({"bahdanau": 0.37, "transformer": 0.40, "luong": 0.32})
    assert choice == {"transformer": multi30k.BUNDLED, "bahdanau": multi30k.BUNDLED_BY_NAME["bahdanau"]}
    # the files the benchmark writes are the ones the commands read by name
    assert multi30k.BUNDLED == bundled.model_path("transformer") == bundled.model_path(None)
    assert multi30k.BUNDLED_BY_NAME["bahdanau"] == bundled.model_path("bahdanau")


def test_a_gru_that_leads_on_val_is_the_default_alone():
    assert multi30k.bundle_choice({"bahdanau": 0.41, "transformer": 0.40}) == {"bahdanau": multi30k.BUNDLED}
    assert multi30k.bundle_choice({"none": 0.2}) == {"none": multi30k.BUNDLED}


def test_the_gru_file_goes_to_the_better_on_val_of_the_gru_and_its_guided_fine_tune():
    gru_file = multi30k.BUNDLED_BY_NAME["bahdanau"]
    val = {"transformer_aligned": 0.4028, "bahdanau": 0.3620, "bahdanau_aligned": 0.3671}
    assert multi30k.bundle_choice(val) == {"transformer_aligned": multi30k.BUNDLED, "bahdanau_aligned": gru_file}
    val["bahdanau"] = 0.3700  # the plain GRU ahead on val keeps the file
    assert multi30k.bundle_choice(val) == {"transformer_aligned": multi30k.BUNDLED, "bahdanau": gru_file}
    # the guided GRU alone competes for the file too; the guided Transformer never does
    assert multi30k.bundle_choice({"transformer": 0.40, "bahdanau_aligned": 0.37})["bahdanau_aligned"] == gru_file
    assert multi30k.bundle_choice({"transformer": 0.40, "transformer_aligned": 0.39}) == {
        "transformer": multi30k.BUNDLED
    }
    # a GRU that leads overall is the default, and the GRU file is left as it is
    assert multi30k.bundle_choice({"bahdanau_aligned": 0.41, "bahdanau": 0.36, "transformer": 0.40}) == {
        "bahdanau_aligned": multi30k.BUNDLED
    }


def _args(out: Path, root: Path, quick: bool = False):
    """The options multi30k.py's stages read, as its command line would give them (its logs folder made)."""
    import argparse

    args = argparse.Namespace(out=out, data_root=root, quick=quick, logs=out / "logs", retrain=False, max_time=None)
    args.logs.mkdir(parents=True, exist_ok=True)
    return args


def _options(out: Path, root: Path, quick: bool = False, name: str = "transformer_aligned") -> list[str]:
    return multi30k.fine_tune_options(name, _args(out, root, quick))


def test_the_aligned_transformer_starts_from_the_benchmarks_transformer_with_the_train_links(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    pairs = [("ein hund läuft", "a dog runs"), ("ein mann", "a man"), ("der hund", "the dog")] * 700  # 2,100 pairs
    (root / "train.de").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (root / "train.en").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    out = tmp_path / "bench"
    # no start yet: the Transformer must be trained first, said in one line
    with pytest.raises(multi30k.StageError, match=r"train it first \(--models transformer,transformer_aligned\)"):
        _options(out, root)
    (out / "transformer").mkdir(parents=True)
    (out / "transformer" / "model.pt").write_bytes(b"a start")
    options = _options(out, root)
    links = out / "train-links.txt"
    assert options == ["--model.init_from", str(out / "transformer" / "model.pt"), "--data.alignments", str(links)]
    lines = links.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(pairs) and lines[0] == "0-0 1-1 2-2"  # ein-a hund-dog läuft-runs
    # --quick fits read the first 2,000 pairs: the first 2,000 lines of the same links, not aligned again
    quick = _options(out, root, quick=True)
    assert quick[-1] == str(out / "train-links-quick.txt")
    assert (out / "train-links-quick.txt").read_text(encoding="utf-8").splitlines() == lines[: multi30k.QUICK_TRAIN]
    # the guided GRU starts from the benchmark's GRU, with the same links (not aligned again)
    with pytest.raises(multi30k.StageError, match=r"train it first \(--models bahdanau,bahdanau_aligned\)"):
        _options(out, root, name="bahdanau_aligned")
    (out / "bahdanau").mkdir()
    (out / "bahdanau" / "model.pt").write_bytes(b"a start")
    gru = _options(out, root, name="bahdanau_aligned")
    assert gru == ["--model.init_from", str(out / "bahdanau" / "model.pt"), "--data.alignments", str(links)]
    # the other models need nothing beside their config
    assert multi30k.fine_tune_options("transformer", None) == []
    assert multi30k.fine_tune_options("bahdanau", None) == []


def test_the_aligned_transformer_names_a_missing_corpus(tmp_path):
    (tmp_path / "bench" / "transformer").mkdir(parents=True)
    (tmp_path / "bench" / "transformer" / "model.pt").write_bytes(b"a start")
    with pytest.raises(multi30k.StageError, match="no such folder"):
        _options(tmp_path / "bench", tmp_path / "nowhere")


def test_a_fine_tuned_bundle_names_its_start_and_keeps_its_note_of_the_text(tmp_path):
    from helpers.tiny_translator import tiny_subword_model_file

    from text_attn.translation.translator import Translator

    start = Translator.load(tiny_subword_model_file(tmp_path / "start"))
    start.info = {"training": "configs/text/multi30k_de_en_transformer.yaml on a 2-core CPU, 257 minutes"}
    start.source_check["about"] = "descriptions of everyday pictures"
    start_file = start.save(tmp_path / "start.pt")
    tuned_file = tiny_subword_model_file(tmp_path / "tuned")  # a fit's export: a source check without the note
    assert "about" not in Translator.load(tuned_file).source_check
    scores = {"sacrebleu": 41.8, "chrf": 61.0, "bleu_tok": 42.0}
    result = {"5": scores, "tuned": {"beam": 4, "length_penalty": 1.0, **scores}}
    to = tmp_path / "bundled.pt"
    multi30k.bundle("transformer_aligned", tuned_file, result, 16.0, "2-core CPU", to, start_file)
    bundled_model = Translator.load(to)
    assert bundled_model.info["training"] == (
        "configs/text/multi30k_de_en_transformer_aligned.yaml on a 2-core CPU, 16 minutes, from the Transformer of "
        "configs/text/multi30k_de_en_transformer.yaml on a 2-core CPU, 257 minutes"
    )
    assert bundled_model.source_check["about"] == "descriptions of everyday pictures"
    # one table of test scores, the val-chosen decoding's (the one translate uses), named by it
    assert bundled_model.info["test_scores"] == {
        "test_2016_flickr beam 4, length penalty 1: sacreBLEU": 41.8,
        "chrF": 61.0,
        "BLEU (lowercased, tokenized)": 42.0,
    }
    assert "test_scores_default_decoding" not in bundled_model.info
    # the guided GRU names the GRU it started from
    start.info = {"training": "configs/text/multi30k_de_en_bahdanau.yaml on a 2-core CPU, 55 minutes"}
    gru_start = start.save(tmp_path / "gru_start.pt")
    multi30k.bundle("bahdanau_aligned", tuned_file, result, 14.0, "2-core CPU", to, gru_start)
    assert Translator.load(to).info["training"] == (
        "configs/text/multi30k_de_en_bahdanau_aligned.yaml on a 2-core CPU, 14 minutes, from the Bahdanau GRU of "
        "configs/text/multi30k_de_en_bahdanau.yaml on a 2-core CPU, 55 minutes"
    )
    # no start: the model's own training alone
    multi30k.bundle("transformer", tuned_file, result, 257.0, "2-core CPU", to)
    assert Translator.load(to).info["training"].endswith("on a 2-core CPU, 257 minutes")
    assert "distillation" not in Translator.load(to).info["training_data"]
    # not tuned: the plain beam 5's scores, named as translate_test ran it (no length penalty)
    multi30k.bundle("transformer", tuned_file, {"5": scores}, 257.0, "2-core CPU", to)
    assert Translator.load(to).info["test_scores"]["test_2016_flickr beam 5, length penalty 0: sacreBLEU"] == 41.8
    # the distilled Transformer: its start is the guided one, and its data names the teachers' translations
    start.info = {"training": "configs/text/multi30k_de_en_transformer_aligned.yaml on a 2-core CPU, 16 minutes"}
    start.source_check["casing"] = {"first": True, "words": "Mann"}  # the start's own check of the train text
    start.source_check.pop("lengths", None)
    multi30k.bundle("transformer_distilled", tuned_file, result, 40.0, "2-core CPU", to, start.save(tmp_path / "s.pt"))
    distilled = Translator.load(to)
    info = distilled.info
    lengths = Translator.load(tuned_file).source_check["lengths"]  # the fit's: the start had none
    assert distilled.source_check == {**start.source_check, "lengths": lengths}
    assert info["training"] == (
        "configs/text/multi30k_de_en_transformer_distilled.yaml on a 2-core CPU, 40 minutes, from the Transformer "
        "taught to align of configs/text/multi30k_de_en_transformer_aligned.yaml on a 2-core CPU, 16 minutes"
    )
    assert info["training_data"] == (
        "Multi30k task 1 (Elliott et al. 2016), German -> English: 29,000 training pairs, and the same sources again "
        "translated by the Transformer and the Bahdanau GRU taught to align, as one (sequence-level distillation); "
        "chosen on the 1,014 val pairs"
    )


@pytest.mark.long  # the distillation corpus written through its script and translate (~5 s)
def test_the_distilled_transformer_learns_from_both_guided_models_as_one(tmp_path):
    from helpers.multi30k import DE, write_corpus
    from helpers.tiny_translator import two_subword_model_files

    from text_attn.translation.ensemble import EnsembleTranslator
    from text_attn.translation.translator import Translator

    root = write_corpus(tmp_path / "corpus")
    out = tmp_path / "bench"
    name = "transformer_distilled"
    with pytest.raises(multi30k.StageError, match=r"train it first \(--models transformer_aligned,transformer_d"):
        _options(out, root, name=name)
    first, second = two_subword_model_files(tmp_path / "models")
    (out / "transformer_aligned").mkdir(parents=True)
    (out / "transformer_aligned" / "model.pt").write_bytes(first.read_bytes())
    with pytest.raises(multi30k.StageError, match="train bahdanau_aligned first"):
        _options(out, root, name=name)
    (out / "bahdanau_aligned").mkdir()
    (out / "bahdanau_aligned" / "model.pt").write_bytes(second.read_bytes())
    corpus = out / "distilled"
    assert _options(out, root, name=name) == [
        "--data.root", str(corpus), "--data.alignments", str(corpus / "train-links.txt"),
        "--model.init_from", str(out / "transformer_aligned" / "model.pt"),
    ]  # fmt: skip
    # the second half of its train split: what the two translate as one
    both = EnsembleTranslator([Translator.load(first), Translator.load(second)])
    taught = [t.text for t in both.translate(DE)]
    assert multi30k_lines(corpus / "train.en.gz")[len(DE) :] == taught
    assert len((corpus / "train-links.txt").read_text().splitlines()) == 2 * len(DE)
    # --quick: the first 1,000 pairs (all six here) in a folder of its own
    assert _options(out, root, quick=True, name=name)[1] == str(out / "distilled-quick")


def multi30k_lines(path: Path) -> list[str]:
    import gzip

    return gzip.decompress(path.read_bytes()).decode().splitlines()


def test_the_second_round_learns_from_the_first_distilled_model_and_the_gru_in_a_corpus_of_its_own(
    tmp_path, monkeypatch
):
    out, root = tmp_path / "bench", tmp_path / "corpus"
    name = "transformer_distilled2"
    with pytest.raises(multi30k.StageError, match=r"train it first \(--models transformer_distilled,transformer_d"):
        _options(out, root, name=name)
    (out / "transformer_distilled").mkdir(parents=True)
    (out / "transformer_distilled" / "model.pt").write_bytes(b"weights")
    with pytest.raises(multi30k.StageError, match="train bahdanau_aligned first"):
        _options(out, root, name=name)
    (out / "bahdanau_aligned").mkdir()
    (out / "bahdanau_aligned" / "model.pt").write_bytes(b"weights")
    ran = []
    monkeypatch.setattr(multi30k, "run_stage", lambda stage, cmd, logs: ran.append(cmd) or 0.0)
    corpus = out / "distilled2"
    assert _options(out, root, name=name) == [
        "--data.root", str(corpus), "--data.alignments", str(corpus / "train-links.txt"),
        "--model.init_from", str(out / "transformer_distilled" / "model.pt"),
    ]  # fmt: skip
    # the first distilled model and the GRU translate as one: translate --model FIRST --ensemble SECOND
    teacher = ran[0][ran[0].index("--teacher") + 1]
    assert (
        teacher
        == f"--model {out / 'transformer_distilled' / 'model.pt'} --ensemble {out / 'bahdanau_aligned' / 'model.pt'}"
    )
    assert ran[0][ran[0].index("--out") + 1] == str(corpus)
    assert _options(out, root, quick=True, name=name)[1] == str(out / "distilled2-quick")
    assert multi30k.MODELS[name] == multi30k.MODELS["transformer_distilled"]  # the same recipe, one round on
    # the fit reads that corpus: one --data.root in its command (Multi30k's came first, and the later one won)
    monkeypatch.setattr(multi30k, "average", lambda *a: None)
    (out / name).mkdir()  # the fit's folder (the fit itself makes it)
    multi30k.train(name, _args(out, root))
    fit = ran[-1]
    assert fit.count("--data.root") == 1 and fit[fit.index("--data.root") + 1] == str(corpus)

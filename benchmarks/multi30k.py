"""Multi30k benchmark: train the shipped configs on the real corpus, score the model files on test_2016_flickr.

    python benchmarks/multi30k.py --data-root ../shared/data/multi30k                          # every model
    python benchmarks/multi30k.py --data-root ../shared/data/multi30k --models bahdanau --bundle
    python benchmarks/multi30k.py --data-root ../shared/data/multi30k --quick --out /tmp/m30k   # a smoke run

Models (configs/text/multi30k_<pair>_<name>.yaml), each trained by the console script a user would type, output in
OUT/logs/<stage>.log; a model whose OUT/<name>/model.pt exists is not trained again (--retrain):
  none, bahdanau, luong, transformer   German -> English
  transformer_aligned, bahdanau_aligned
                                       the transformer / bahdanau above fine-tuned with guided alignment: list each
                                       after its start (OUT/transformer/model.pt, OUT/bahdanau/model.pt); the train
                                       pairs' word links are written once by benchmarks/word_align.py
                                       (OUT/train-links.txt)
  transformer_distilled                transformer_aligned fine-tuned again on the train pairs and, for the same
                                       sources, the translations of transformer_aligned and bahdanau_aligned as one
                                       (sequence-level distillation: benchmarks/distil_data.py writes that corpus once,
                                       OUT/distilled/); list it after both
  transformer_distilled2               the same again, one round on: transformer_distilled fine-tuned on the train
                                       pairs and the translations of transformer_distilled and bahdanau_aligned as
                                       one (OUT/distilled2/); list it after transformer_distilled
  en_fr_bahdanau                       English -> French (the alignment grids of docs/results.md)
A model trained elsewhere (a GPU, say) can be put there with a line in OUT/<name>/trained_on.txt naming where it
was trained (the table prints it beside the minutes; the benchmark's own fits write "2-core CPU").
Then per model, ``translate --model M --beam-size 1 / 5`` on the test sources as a user runs it (timed: sentences/s),
scored three ways against the test references:
  BLEU (tok.)  lowercased, tokenized BLEU-4 (words and punctuation): the measure of the PyTorch seq2seq tutorials
  sacreBLEU    cased, detokenized, 13a tokenization: the field's standard (signature printed); chrF beside it
and BLEU (tok.) by source length (words: 1-10, 11-15, 16-20, 21-30, 31+), and the count of outputs holding <unk>.
Test has only 26 sentences over 20 words (and none over 30), so German -> English models also translate val at beam 5
and BLEU by length is printed for val + test together too (47 sentences over 20 words); the plot draws that one.
Model selection happens on val inside fit (and, for a fit that kept each epoch's weights, checkpoint averaging:
the best epoch or the mean of the last 3 or 5 epochs, whichever scores best on val, becomes the model file; the
choice in OUT/<name>/averaging.json); test is only scored here. Each model's scores are kept in
OUT/<name>/scores.json with the model file's size and time, and reused while the file is unchanged (--rescore).
``--tune``: each model's beam width and length penalty are chosen on val (benchmarks/tune_translation_decoding.py,
recorded in its model file; not again when the file already records it and OUT/<name>/tune_val.json exists), and
test is also scored with them ("tuned": ``translate`` without --beam-size).

``--json`` writes every number; ``--bundle`` writes the best German -> English model (by the best val BLEU its fit
logged: never chosen on test) as text_attn/translation/assets/multi30k_de_en.pt, the default, and the better on val
of bahdanau and bahdanau_aligned (those scored; none when one is the best) as multi30k_de_en_bahdanau.pt, kept by
name: float16, with data, terms, decoding and scores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from pathlib import Path

from _multi30k import by_length, read_pair, score
from _runs import StageError, best_logged, console_script, logged_curve, record_json, run_stage
from _tuning import CHOSEN, run_tuner

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs" / "text"
ASSETS = ROOT / "text_attn" / "translation" / "assets"
BUNDLED = ASSETS / "multi30k_de_en.pt"  # the default: the best on val
BUNDLED_BY_NAME = {"bahdanau": ASSETS / "multi30k_de_en_bahdanau.pt"}  # also installed when not the best
MODELS = {  # name -> (config, source language, target language)
    "none": ("multi30k_de_en_none.yaml", "de", "en"),
    "bahdanau": ("multi30k_de_en_bahdanau.yaml", "de", "en"),
    "luong": ("multi30k_de_en_luong.yaml", "de", "en"),
    "transformer": ("multi30k_de_en_transformer.yaml", "de", "en"),
    "transformer_aligned": ("multi30k_de_en_transformer_aligned.yaml", "de", "en"),
    "bahdanau_aligned": ("multi30k_de_en_bahdanau_aligned.yaml", "de", "en"),
    "transformer_distilled": ("multi30k_de_en_transformer_distilled.yaml", "de", "en"),
    "transformer_distilled2": ("multi30k_de_en_transformer_distilled.yaml", "de", "en"),  # STARTS, TEACHERS differ
    "en_fr_bahdanau": ("multi30k_en_fr_bahdanau.yaml", "en", "fr"),
}
TEST = "test_2016_flickr"
BEAMS = (1, 5)
# The PyTorch seq2seq tutorials (bentrevett/pytorch-seq2seq) on this test set, lowercased tokenized BLEU x 100.
TUTORIALS = {"none": 20.6, "bahdanau": 28.3, "transformer": 36.5}
QUICK_TRAIN = 2000  # train pairs of a --quick fit
QUICK = ["--data.train_size", str(QUICK_TRAIN), "--data.val_size", "100", "--trainer.max_time", "00:00:02:00",
         "--data.subword_vocab", "2000"]  # fmt: skip
QUICK_TEST = 200


def train(name: str, args: argparse.Namespace) -> tuple[Path, float | None]:
    """The model's file, trained now unless it exists; (file, training minutes or None when reused)."""
    config = MODELS[name][0]
    model = args.out / name / "model.pt"
    minutes_file = args.out / name / "train_minutes.txt"
    if model.is_file() and not args.retrain:
        minutes = float(minutes_file.read_text()) if minutes_file.is_file() else None
        print(f"[{name}] {model} exists: not trained again (--retrain to train it)", flush=True)
        return model, minutes
    start = fine_tune_options(name, args)  # a distilled model's options name its corpus: one --data.root in all
    root = [] if "--data.root" in start else ["--data.root", str(args.data_root)]
    cmd = [console_script("text-train"), "fit", "--config", str(CONFIGS / config), *root]
    cmd += ["--trainer.default_root_dir", str(args.out / name), "--model.export_path", str(model)]
    if args.quick:
        cmd += QUICK
    cmd += start
    if args.max_time:
        cmd += ["--trainer.max_time", args.max_time]
    seconds = run_stage(f"fit-{name}", cmd, args.logs)
    minutes_file.write_text(f"{seconds / 60:.2f}\n")
    (args.out / name / "trained_on.txt").write_text(f"{device()}\n")
    average(name, model, args)
    return model, seconds / 60


# a fine-tuned model -> the model of this benchmark it starts from, and what the bundled file's training line calls it
STARTS = {
    "transformer_aligned": "transformer",
    "bahdanau_aligned": "bahdanau",
    "transformer_distilled": "transformer_aligned",
    "transformer_distilled2": "transformer_distilled",
}
START_NAMES = {"transformer": "the Transformer", "bahdanau": "the Bahdanau GRU",
               "transformer_aligned": "the Transformer taught to align",
               "transformer_distilled": "the Transformer distilled from the two taught to align"}  # fmt: skip
# a distilled model -> its teachers, translating as one (translate --model FIRST --ensemble SECOND)
TEACHERS = {"transformer_distilled": ("transformer_aligned", "bahdanau_aligned"),
            "transformer_distilled2": ("transformer_distilled", "bahdanau_aligned")}  # fmt: skip
TEACHER_NAMES = {
    "transformer_distilled": "the Transformer and the Bahdanau GRU taught to align, as one",
    "transformer_distilled2": "the distilled Transformer and the Bahdanau GRU taught to align, as one",
}
CORPORA = {"transformer_distilled": "distilled", "transformer_distilled2": "distilled2"}  # OUT/<folder>: its corpus


def start_file(name: str, out: Path) -> Path | None:
    """The model file ``name`` is fine-tuned from (OUT/<start>/model.pt), None for a model trained from scratch."""
    return out / STARTS[name] / "model.pt" if name in STARTS else None


def fine_tune_options(name: str, args: argparse.Namespace) -> list[str]:
    """What a guided-alignment fit (transformer_aligned, bahdanau_aligned) needs beside its config: its start, the
    model this benchmark trained (the configs' ``init_from`` names the bundled file, which since 2026-11-30 / 12-01 is
    the guided model itself), and the train pairs' word links (benchmarks/word_align.py, written once; --quick: the
    first 2,000 pairs' lines)."""
    if name not in STARTS:
        return []
    start = start_file(name, args.out)
    if not start.is_file():
        raise StageError(f"{name} fine-tunes {start}: train it first (--models {STARTS[name]},{name})")
    if name in TEACHERS:
        return [*distilled_options(name, args), "--model.init_from", str(start)]
    links = args.out / ("train-links-quick.txt" if args.quick else "train-links.txt")
    if not links.is_file():
        every = args.out / "train-links.txt"
        if not every.is_file():
            from text_attn.translation.corpora import corpus_file
            from text_attn.translation.pairs import TaskError

            try:
                pair = [str(corpus_file(args.data_root, "train", lang)) for lang in ("de", "en")]
            except TaskError as err:
                raise StageError(str(err)) from err
            cmd = [sys.executable, str(Path(__file__).with_name("word_align.py")), *pair, "--out", str(every)]
            run_stage("word-align", cmd, args.logs)
        if args.quick:  # the quick fit reads the first 2,000 train pairs: a line of links each
            head = every.read_text(encoding="utf-8").splitlines()[:QUICK_TRAIN]
            links.write_text("".join(line + "\n" for line in head), encoding="utf-8")
    return ["--model.init_from", str(start), "--data.alignments", str(links)]


def distilled_options(name: str, args: argparse.Namespace) -> list[str]:
    """The corpus a distilled model trains on (benchmarks/distil_data.py, written once into OUT/<CORPORA's folder>/,
    --quick: <folder>-quick/ of the first 1,000 pairs): the train pairs and the teachers' translations of their sources,
    with their word links; val and test are Multi30k's."""
    teachers = [args.out / t / "model.pt" for t in TEACHERS[name]]
    missing = [t for t in teachers if not t.is_file()]
    if missing:
        raise StageError(f"{name} learns from the translations of {' and '.join(TEACHERS[name])}: train "
                         f"{missing[0].parent.name} first ({missing[0]} is missing)")  # fmt: skip
    corpus = args.out / (CORPORA[name] + ("-quick" if args.quick else ""))
    teacher = shlex.join(["--model", str(teachers[0]), *(x for t in teachers[1:] for x in ("--ensemble", str(t)))])
    cmd = [sys.executable, str(Path(__file__).with_name("distil_data.py")), "--data-root", str(args.data_root),
           "--out", str(corpus), "--teacher", teacher, *(["--limit", "1000"] if args.quick else [])]  # fmt: skip
    run_stage(f"distil-{name}", cmd, args.logs)
    return ["--data.root", str(corpus), "--data.alignments", str(corpus / "train-links.txt")]


def average(name: str, model: Path, args: argparse.Namespace) -> None:
    """Checkpoint averaging, chosen on val: when the fit kept each epoch's weights (the Transformer's config does),
    benchmarks/checkpoint_averaging.py compares the fit's best epoch (kept as OUT/<name>/model_best_epoch.pt) with the
    mean of its last 3 and 5 epochs and writes the best of them as the model file."""
    from checkpoint_averaging import averaging_stage

    _, src, tgt = MODELS[name]
    options = ["--src", src, "--tgt", tgt] + (["--limit", str(QUICK_TEST)] if args.quick else [])
    averaging_stage(name, args.out / name, model, args.data_root, [3, 5], args.logs, options)


def device() -> str:
    """What ``text-train fit`` trains on here (Lightning takes a GPU when there is one)."""
    import torch

    return "GPU" if torch.cuda.is_available() else f"{os.cpu_count()}-core CPU"


def trained_on(name: str, args: argparse.Namespace) -> str:
    """Where the model was trained: OUT/<name>/trained_on.txt's line ("" when unknown)."""
    where = args.out / name / "trained_on.txt"
    return where.read_text().strip() if where.is_file() else ""


def translate_test(
    name: str, model: Path, beam: int | None, sources: list[str], args: argparse.Namespace, split: str = "test"
) -> tuple:
    """``translate`` on the split's sources at this beam (None: the model file's val-chosen decoding), as a user runs
    it: (outputs, sentences/s)."""
    tag = "tuned" if beam is None else f"beam{beam}"
    out = args.out / name / f"{split}-{tag}.txt"
    cmd = [console_script("translate"), "--model", str(model), "--output", str(out)]
    # a plain beam: no length penalty or n-gram block (else translate takes the file's val-chosen ones for the flags
    # not given)
    cmd += [] if beam is None else ["--beam-size", str(beam), "--length-penalty", "0", "--no-repeat-ngram", "0"]
    seconds = run_stage(f"translate-{name}-{split}-{tag}", cmd, args.logs, stdin="\n".join(sources) + "\n")
    hyps = out.read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(sources):
        raise StageError(f"translate {model}: {len(hyps)} outputs for {len(sources)} sources")
    return hyps, len(sources) / seconds


def training(minutes: float | None, where: str) -> str:
    text = "reused" if minutes is None else f"{minutes:.1f}"
    return f"{text} ({where})" if where else text


def table(results: dict, minutes: dict, where: dict) -> str:
    lines = [
        "| model | tutorials BLEU (tok.) | BLEU (tok.) beam 1 | BLEU (tok.) beam 5 | sacreBLEU beam 5 | chrF beam 5 "
        "| outputs with <unk> | training minutes | sentences/s beam 1 / 5 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tuned = []
    for name, r in results.items():
        tutorial = TUTORIALS.get(name)
        b1, b5 = r["1"], r["5"]
        mins = minutes.get(name)
        lines.append(
            f"| {name} | {'–' if tutorial is None else tutorial} | {b1['bleu_tok']:.2f} | {b5['bleu_tok']:.2f} "
            f"| {b5['sacrebleu']:.2f} | {b5['chrf']:.2f} | {b5['unk']} | {training(mins, where.get(name, ''))} "
            f"| {b1['sentences_per_s']:.1f} / {b5['sentences_per_s']:.1f} |"
        )
        if "tuned" in r:
            t = r["tuned"]
            tuned.append(
                f"| {name} | {t['beam']} | {t['length_penalty']:g} | {t['bleu_tok']:.2f} | {t['sacrebleu']:.2f} "
                f"| {t['chrf']:.2f} | {t['unk']} | {t['sentences_per_s']:.1f} |"
            )
    if tuned:
        head = "| model | beam | length penalty | BLEU (tok.) | sacreBLEU | chrF | outputs with <unk> | sentences/s |"
        lines += ["", "Decoding chosen on val (the model file's default; --tune):", "", head,
                  "|---|---|---|---|---|---|---|---|", *tuned]  # fmt: skip
    return "\n".join(lines)


def length_table(results: dict, key: str = "test") -> str:
    """BLEU (tok.) by source length at beam 5 of the German -> English models: on test (key "test") or on val + test
    (key "val_test")."""
    names = [n for n in results if MODELS[n][1:] == ("de", "en")]
    if not names:
        return ""
    buckets = {n: results[n]["5"]["by_length"] if key == "test" else results[n]["val_test_by_length"] for n in names}
    first = buckets[names[0]]
    lines = ["| source words | sentences | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for label in first:
        cells = [f"{buckets[n][label]['bleu']:.1f}" for n in names]
        lines.append(f"| {label} | {first[label]['count']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curve_table(curves: dict[str, list[tuple[int, int, float]]]) -> str:
    """One row per epoch, one column per model: val BLEU (tok.) x 100 (blank where a fit stopped earlier)."""
    names = list(curves)
    epochs = sorted({e for c in curves.values() for e, _, _ in c})
    by = {n: {e: v for e, _, v in c} for n, c in curves.items()}
    lines = ["| epoch | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for e in epochs:
        lines.append(f"| {e + 1} | " + " | ".join(f"{100 * by[n][e]:.1f}" if e in by[n] else "" for n in names) + " |")
    return "\n".join(lines)


def val_test_by_length(name: str, args: argparse.Namespace) -> dict:
    """BLEU (tok.) by source length at beam 5 over val + test together, from the two output files."""
    _, src, tgt = MODELS[name]
    sources, refs, hyps = [], [], []
    for split, tag in (("val", "val"), (TEST, "test")):
        n = QUICK_TEST if args.quick else None  # the quick run translates the first QUICK_TEST of each split
        split_sources, split_refs = read_pair(args.data_root, split, src, tgt, n)
        sources, refs = sources + split_sources, refs + split_refs
        hyps += (args.out / name / f"{tag}-beam5.txt").read_text("utf-8").splitlines()
    return by_length(refs, hyps, sources)


def weights_digest(model: Path) -> str:
    """What says the model's weights are unchanged: a digest of its parameters (not of the file, whose metadata
    --tune rewrites)."""
    import hashlib

    from text_attn.translation.translator import Translator

    digest = hashlib.sha256()
    for name, value in sorted(Translator.load(model).net.state_dict().items()):
        digest.update(name.encode() + value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def evaluate(name: str, model: Path, args: argparse.Namespace) -> dict:
    """The model's scores on test at beams 1 and 5 (and, with --tune, its val-chosen decoding), plus BLEU by length
    over val + test for German -> English; kept in OUT/<name>/scores.json and reused while the weights are the same
    (--rescore scores again; --retime times the reused ones again)."""
    cache = args.out / name / "scores.json"
    key = {"weights": weights_digest(model), "quick": args.quick}  # --quick scores 200 sentences
    saved = json.loads(cache.read_text()) if cache.is_file() else {}
    results: dict = saved.get("results", {}) if saved.get("key") == key and not args.rescore else {}
    _, src, tgt = MODELS[name]
    n = QUICK_TEST if args.quick else None
    sources, refs = read_pair(args.data_root, TEST, src, tgt, n)
    if "5" in results:
        print(f"[{name}] scores of these weights reused from {cache} (--rescore to score them again)", flush=True)
        if args.retime:
            retime(name, model, results, [str(b) for b in BEAMS], sources, args)
    else:
        for beam in BEAMS:
            hyps, speed = translate_test(name, model, beam, sources, args)
            results[str(beam)] = r = {**score(refs, hyps, sources), "sentences_per_s": speed}
            print(f"[{name}] beam {beam}: BLEU (tok.) {r['bleu_tok']:.2f}, sacreBLEU {r['sacrebleu']:.2f}, "
                  f"chrF {r['chrf']:.2f}, <unk> in {r['unk']} outputs", flush=True)  # fmt: skip
        if (src, tgt) == ("de", "en"):
            translate_test(name, model, 5, read_pair(args.data_root, "val", src, tgt, n)[0], args, split="val")
            results["val_test_by_length"] = val_test_by_length(name, args)
    if args.tune:
        chosen = tune(name, model, args)
        if "tuned" not in results or any(results["tuned"].get(k) != v for k, v in chosen.items()):
            hyps, speed = translate_test(name, model, None, sources, args)
            results["tuned"] = {**chosen, **score(refs, hyps, sources), "sentences_per_s": speed}
        elif args.retime:
            retime(name, model, results, ["tuned"], sources, args)
    cache.write_text(json.dumps({"key": key, "results": results}, indent=1) + "\n")
    return results


def retime(
    name: str, model: Path, results: dict, keys: list[str], sources: list[str], args: argparse.Namespace
) -> None:
    """Time ``translate`` on test again at each decoding already scored (keys: "1", "5", "tuned"), e.g. on a quiet
    machine after scoring ran beside a training run; the scores stay."""
    for key in keys:
        beam = None if key == "tuned" else int(key)
        _, results[key]["sentences_per_s"] = translate_test(name, model, beam, sources, args)


def tune(name: str, model: Path, args: argparse.Namespace) -> dict:
    """Choose the model's beam and length penalty on val and record them in its file; returns the choice."""
    _, src, tgt = MODELS[name]
    options = ["--data-root", str(args.data_root), "--model", str(model), "--src", src, "--tgt", tgt]
    quick = ["--beams", "1", "3", "--length-penalties", "0", "1", "--limit", str(QUICK_TEST)] if args.quick else []
    report = args.out / name / "tune_val.json"
    if report.is_file() and not args.retune:
        from text_attn.translation.translator import Translator

        if Translator.load(model).info.get("decoding"):
            print(f"[{name}] decoding already chosen on val ({report}): not tuned again (--retune)", flush=True)
            chosen = json.loads(report.read_text())["chosen"]
            return {k: chosen.get(k, 0) for k in CHOSEN}  # reports older than n-gram blocking: none chosen
    return run_tuner("tune_translation_decoding.py", options, report, args.logs, f"tune-{name}", quick)


def val_bleu(name: str, args: argparse.Namespace) -> float:
    """The model's best val BLEU (tok.) as its fit logged it (greedy), else its tuner's greedy row on val (the same
    measure) when the fit's logs are gone; -inf when neither is there."""
    logged = best_logged(args.out / name, "val_bleu")
    report = args.out / name / "tune_val.json"
    if logged == float("-inf") and report.is_file():
        greedy = [r for r in json.loads(report.read_text())["rows"] if r["beam"] == 1]
        return greedy[0]["bleu_tok"] / 100 if greedy else logged
    return logged


def bundle_choice(val: dict[str, float]) -> dict[str, Path]:
    """Which German -> English models to bundle, and as which file: the one with the best val BLEU as the default
    (never chosen on test), and for each file kept by name (BUNDLED_BY_NAME) the best on val of that model and the
    models fine-tuned from it (STARTS), unless one of them is the default."""
    best = max(val, key=val.__getitem__)
    choice = {best: BUNDLED}
    for name, to in BUNDLED_BY_NAME.items():
        family = [n for n in val if name in (n, STARTS.get(n))]
        if family and best not in family:
            choice[max(family, key=val.__getitem__)] = to
    return choice


def bundle(
    name: str,
    model: Path,
    result: dict,
    minutes: float | None,
    where: str,
    to: Path = BUNDLED,
    start: Path | None = None,
) -> Path:
    """Write the model as a bundled file: float16, with its data, terms, training, decoding and test scores; for a
    model fine-tuned from ``start``, also the start's training and its source check's note of what the text is."""
    from text_attn.translation.data import MULTI30K_TERMS  # here: the data module imports torch
    from text_attn.translation.translator import Translator

    translator = Translator.load(model)
    began = None
    if start is not None:  # fine-tuned on the start's corpus: the start's note of what that text is holds for it
        first = Translator.load(start)
        began = first.info.get("training")
        about = (first.source_check or {}).get("about")
        if about and translator.source_check and "about" not in translator.source_check:
            translator.source_check["about"] = about
        if name in TEACHERS and first.source_check:
            # its corpus's sources are the train split's twice over: the start's check of that text holds (the
            # fit's own word profile and casing would count each word twice); the fit's lengths where it has them
            lengths = (translator.source_check or {}).get("lengths")
            translator.source_check = {**first.source_check, **({"lengths": lengths} if lengths else {})}
    decoding = translator.info.get("decoding")
    # the test scores of the decoding `translate` uses (the file's val-chosen one), after it, as a caption model file
    # has them; without one, the plain beam 5's, named as it was run (translate_test: no length penalty)
    if "tuned" in result:
        t = result["tuned"]
        measured = f"test_2016_flickr beam {t['beam']}, length penalty {t['length_penalty']:g}"
    else:
        t, measured = result["5"], "test_2016_flickr beam 5, length penalty 0"
    translator.info = {
        "training_data": "Multi30k task 1 (Elliott et al. 2016), German -> English: 29,000 training pairs"
        + (f", and the same sources again translated by {TEACHER_NAMES[name]} (sequence-level distillation)"
           if name in TEACHERS else "")
        + "; chosen on the 1,014 val pairs",
        "terms": MULTI30K_TERMS,
        "training": f"configs/text/{MODELS[name][0]} on a {where or 'CPU'}"
        + ("" if minutes is None else f", {minutes:.0f} minutes")
        + ("" if began is None else f", from {START_NAMES[STARTS[name]]} of {began}"),
        **({"decoding": decoding} if decoding else {}),
        "test_scores": {f"{measured}: sacreBLEU": round(t["sacrebleu"], 2), "chrF": round(t["chrf"], 2),
                        "BLEU (lowercased, tokenized)": round(t["bleu_tok"], 2)},
    }  # fmt: skip
    to.parent.mkdir(parents=True, exist_ok=True)
    return translator.save(to, half=True)


def draw_plot(results: dict[str, dict], path: Path) -> None:
    """BLEU (tok.) by source length, beam 5, val + test (test alone has 26 sentences over 20 words), German -> English
    models only."""
    from text_attn.translation.plots import plot_bleu_by_length

    by_length = {
        # an empty bucket's BLEU is null in the record (strict JSON): not a number on the plot
        n: {
            label: {"bleu": math.nan if v["bleu"] is None else v["bleu"] / 100, "count": v["count"]}
            for label, v in r["val_test_by_length"].items()
        }
        for n, r in results.items()
        if MODELS[n][1:] == ("de", "en")
    }
    title = f"Multi30k val + {TEST}, German -> English, beam 5"
    print(f"wrote {plot_bleu_by_length(by_length, path, title=title)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, help="Multi30k: <split>.<lang>[.gz] files (required to train or score)")
    p.add_argument("--out", type=Path, default=Path("runs/multi30k_benchmark"), help="runs, logs and model files")
    p.add_argument("--models", default="none,bahdanau,luong,transformer", help=f"comma-separated: {', '.join(MODELS)}")
    p.add_argument("--retrain", action="store_true", help="train models whose model file exists again")
    p.add_argument("--quick", action="store_true", help="a smoke run: 2,000 pairs, 2 minutes a model, 200 test")
    p.add_argument("--max-time", metavar="DD:HH:MM:SS", help="each fit's time budget instead of its config's")
    p.add_argument("--json", type=new_file, help="also write the numbers to this file")
    p.add_argument("--plot", type=new_file, help="also draw BLEU (tok.) by source length to this PNG")
    p.add_argument("--bundle", action="store_true", help=f"write the best German -> English model to {BUNDLED}")
    p.add_argument("--tune", action="store_true", help="choose each model's beam and length penalty on val, score too")
    p.add_argument("--retune", action="store_true", help="with --tune: choose again where the model file records it")
    p.add_argument("--rescore", action="store_true", help="score models again whose scores.json matches their file")
    p.add_argument("--retime", action="store_true", help="where scores are reused, time translate on test again")
    p.add_argument(
        "--plot-from",
        nargs="+",
        metavar="JSON[:MODEL,...]",
        help="with --plot: draw it from earlier --json files alone (nothing trained or scored); a later file's "
        "models replace an earlier's; ':MODEL,...' takes only those (docs: multi30k.json "
        "multi30k_bundled.json:transformer)",
    )
    args = p.parse_args(argv)
    if args.plot_from:
        if not args.plot:
            p.error("--plot-from needs --plot PNG")
        try:
            results = {}
            for spec in args.plot_from:
                path, _, wanted = spec.partition(":")
                found = json.loads(Path(path).read_text(encoding="utf-8"))["results"]
                keep = [m for m in wanted.split(",") if m] or list(found)
                results.update({m: found[m] for m in keep})
        except (OSError, ValueError, KeyError) as err:
            p.error(f"--plot-from: {type(err).__name__}: {err}")
        draw_plot(results, args.plot)
        return 0
    if args.data_root is None:
        p.error("--data-root is required (Multi30k's folder)")
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown or not names:
        p.error(f"--models: unknown {unknown}; choose from {', '.join(MODELS)}")
    args.logs = args.out / "logs"
    args.logs.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    minutes: dict[str, float | None] = {}
    where: dict[str, str] = {}
    try:
        for name in names:
            model, minutes[name] = train(name, args)
            where[name] = trained_on(name, args)
            results[name] = evaluate(name, model, args)
    except StageError as err:
        print(f"multi30k benchmark: error: {err}", file=sys.stderr)
        return 1
    try:
        n_test = len(read_pair(args.data_root, TEST, *MODELS[names[0]][1:], QUICK_TEST if args.quick else None)[0])
    except StageError as err:
        print(f"multi30k benchmark: error: {err}", file=sys.stderr)
        return 1
    print()
    print(f"Multi30k {TEST} ({n_test} sentences){' -- QUICK smoke run' if args.quick else ''}")
    print(table(results, minutes, where))
    lengths = length_table(results)
    if lengths:
        print(f"\nBLEU (tok.) by source length, beam 5, {TEST}:")
        print(lengths)
        print(f"\nBLEU (tok.) by source length, beam 5, val + {TEST} (more sentences over 20 words):")
        print(length_table(results, "val_test"))
    curves = {n: logged_curve(args.out / n, "val_bleu") for n in results}
    if any(curves.values()):
        print("\nLearning curves: val BLEU (tok.), greedy, after each epoch (as each fit logged it):")
        print(curve_table({n: c for n, c in curves.items() if c}))
    signature = next(iter(results.values()))["5"]["signature"]
    print(f"\nsacreBLEU signature: {signature}")
    if args.plot:
        draw_plot(results, args.plot)
    if args.json:
        numbers = {"test_sentences": n_test, "quick": args.quick, "tutorials": TUTORIALS, "minutes": minutes,
                   "trained_on": where, "val_bleu_curves": curves, "results": results}  # fmt: skip
        write_text(args.json, record_json(numbers))
        print(f"wrote {args.json}")
    if args.bundle:
        de_en = [n for n in results if MODELS[n][1:] == ("de", "en")]
        if not de_en:
            print("multi30k benchmark: error: --bundle needs a German -> English model", file=sys.stderr)
            return 1
        # chosen on val, never on test: the model whose fit logged the highest val BLEU
        val = {n: val_bleu(n, args) for n in de_en}
        print("val BLEU (best of each fit): " + ", ".join(f"{n} {v:.4f}" for n, v in val.items()))
        for name, to in bundle_choice(val).items():
            start = start_file(name, args.out)
            path = bundle(name, args.out / name / "model.pt", results[name], minutes.get(name), where[name], to, start)
            print(f"bundled {name} as {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))

"""Checkpoint averaging, chosen on VALIDATION data: does the mean of a run's last checkpoints' weights do better than
its best single one? For translation models (Multi30k) and caption models (Flickr8k) alike; the family is the
model file's.

    python benchmarks/checkpoint_averaging.py --run runs/m30k/transformer --data-root ../shared/data/multi30k \\
        --counts 2 3 5 8 --write runs/m30k/transformer/model.pt
    python benchmarks/checkpoint_averaging.py --run runs/f8k/scst --data-root ../shared/data/flickr8k \\
        --counts 2 3 4 6 --write runs/f8k/scst/model.pt

The run must have saved its weights as it went: each epoch's (``epoch-epoch=N.ckpt``: the ModelCheckpoint with
``save_top_k: -1`` in configs/text/multi30k_de_en_transformer.yaml) or every few steps (``step-step=N.ckpt``:
configs/caption/flickr8k_lite2_soft_scst.yaml). Rows: the fit's own model file (its best checkpoint on val), then
the mean of the last k checkpoints for each k of --counts (as ``text-export`` / ``caption-export LAST.ckpt OUT
--average ...`` write it; ``--until N``: the last k saved at or before epoch or step N, e.g. the best one's, for a run
that went on past it), each scored on the split:
  translation: greedy (what fit's validation measures); BLEU (tok.), sacreBLEU, chrF on the --src -> --tgt pairs;
    the highest BLEU (tok.) is chosen;
  captions: at --beam-size 5 --length-penalty 1 --no-repeat-ngram 3 (how the Flickr8k models are used) on the
    split's photos, their features read from the fit's own feature cache when it holds them; coco-caption's
    BLEU-1..4, METEOR, CIDEr (PTB tokenizer); the highest sum of BLEU-1..4, METEOR and CIDEr is chosen (the decoding
    tuner's rule: benchmarks/tune_caption_decoding.py).
``--write`` writes the chosen row as a model file (float32: export it with --half afterwards if wanted).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_bytes, write_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SAVED_FILE = re.compile(r"(epoch|step)-\1=(\d+)\.ckpt$")


def saved_checkpoints(run: Path) -> list[Path]:
    """The run's per-epoch or per-step checkpoints, oldest first: those of its latest fit (the folder holding the
    newest one; a fit run again under the same root, e.g. lightning_logs/version_1, never mixes in an older one's)."""
    found = [(int(m.group(2)), p) for p in run.rglob("*.ckpt") if (m := SAVED_FILE.search(p.name))]
    if not found:
        return []
    latest = max(found, key=lambda f: f[1].stat().st_mtime)[1].parent
    return [p for _, p in sorted(found) if p.parent == latest]


def _number(path: Path) -> str:
    return SAVED_FILE.search(path.name).group(2)


def averaging_stage(
    stage: str, run: Path, model: Path, data_root: Path, counts: list[int], logs: Path, options: list[str] = ()
) -> float:
    """This script as a benchmark stage after a fit (benchmarks/multi30k.py, flickr8k.py): when the fit saved at least
    min(counts) checkpoints, its model file is kept as RUN/model_best_<epoch|step>.pt and the row chosen on val (that
    file, or the mean of the last k checkpoints for k in counts) is written over ``model``; ``options``: more of this
    script's options (the family's data, --limit). Returns the stage's wall seconds (0: nothing to average)."""
    from _runs import run_stage

    saved = saved_checkpoints(run)
    if len(saved) < min(counts):
        return 0.0
    best = run / f"model_best_{SAVED_FILE.search(saved[-1].name).group(1)}.pt"
    write_bytes(best, Path(model).read_bytes())  # a fresh file renamed: never through a link
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run", str(run), "--model", str(best)]
    cmd += ["--data-root", str(data_root), "--counts", *map(str, counts), *options]
    cmd += ["--write", str(model), "--json", str(run / "averaging.json")]
    return run_stage(f"average-{stage}", cmd, logs)


class TextFamily:
    """Translation models: greedy translations of the split, BLEU (tok.) / sacreBLEU / chrF."""

    choice = "bleu"

    def __init__(self, args: argparse.Namespace):
        from _multi30k import read_pair
        from _runs import StageError

        try:
            self.sources, self.refs = read_pair(args.data_root, args.split, args.src, args.tgt, args.limit)
        except StageError as err:
            raise SystemExit(f"checkpoint_averaging: error: {err}") from None
        self.what = f"{len(self.sources)} sentences"

    def load(self, model: Path):
        from text_attn.translation.translator import Translator

        return Translator.load(model)

    def average(self, last: list[Path]):
        from text_attn.translation.checkpoint import read_source
        from text_attn.translation.export import average_sources
        from text_attn.translation.translator import Translator

        content, _ = read_source(last[-1])
        content = average_sources(content, last[-1], [str(c) for c in last[:-1]])
        return Translator.from_data(content, last[-1], "averaged checkpoints"), (content, last[-1])

    def write(self, made, out: Path) -> None:
        from text_attn.translation.export import write_model_file

        content, src = made
        write_model_file(content, out, src=src)

    def evaluate(self, translator) -> dict:
        from _multi30k import score

        hyps = []
        for i in range(0, len(self.sources), 64):
            hyps += [t.text for t in translator.translate(self.sources[i : i + 64], 1)]
        s = score(self.refs, hyps, self.sources)
        return {"bleu": s["bleu_tok"], "sacrebleu": s["sacrebleu"], "chrf": s["chrf"]}

    def header(self, split: str) -> tuple[str, str]:
        return f"{split} BLEU (tok.), greedy | sacreBLEU | chrF", "---|---|---"

    def cells(self, row: dict) -> str:
        return f"{row['bleu']:.2f} | {row['sacrebleu']:.2f} | {row['chrf']:.2f}"


class CaptionFamily:
    """Caption models: the split's photos captioned at --beam-size / --length-penalty / --no-repeat-ngram (their
    features read from the fit's feature cache, else encoded once: the encoders are frozen and equal, else again),
    coco-caption metrics with METEOR."""

    choice, metrics = "chosen_by", ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr")

    def __init__(self, args: argparse.Namespace, caches: list[Path] | None = None, prog: str = "checkpoint_averaging"):
        """``caches``: feature cache folders to read the split's features from (default: those of the fits under
        ``args.run``); ``prog``: the script a data error names."""
        from captioning.training.readers import CaptionDataError, read_flickr8k

        try:
            items = read_flickr8k(args.data_root)[args.split][: args.limit]
        except CaptionDataError as err:
            raise SystemExit(f"{prog}: error: {err}") from None
        self.paths = [str(it.path) for it in items]
        self.refs = {p: [" ".join(c) for c in it.captions] for p, it in zip(self.paths, items, strict=True)}
        self.what, self.encoded = f"{len(self.paths)} photos", None  # (encoder weights, features)
        self.split, self.caches = args.split, fit_feature_caches(args.run) if caches is None else caches
        self.decoding = (args.beam_size, args.length_penalty, args.no_repeat_ngram)

    def load(self, model: Path):
        from captioning.model.captioner import Captioner

        return Captioner.load(model)

    def average(self, last: list[Path]):
        from captioning.commands.export import average_into, load_any

        captioner, _ = load_any(str(last[-1]))
        average_into(captioner, str(last[-1]), [str(c) for c in last[:-1]], option="")  # its own checkpoints
        return captioner, captioner

    def write(self, captioner, out: Path) -> None:
        from captioning.commands.export import export_model

        export_model(captioner, out)

    def cached(self, captioner):
        """The split's features from the fit's own feature cache, when one holds them for this encoder (the key: its
        weights, settings and the split's photos, as fit computed it); else None."""
        from captioning.training.feature_cache import cache_file, encoder_fingerprint, load_features, split_key

        enc = captioner.model.encoder
        key = split_key(encoder_fingerprint(enc, {**enc.config(), "preprocess": repr(enc.preprocess)}), self.paths)
        for folder in self.caches:
            features = load_features(cache_file(folder, self.split, key), len(self.paths))
            if features is not None:
                print(f"{self.split} features from the fit's feature cache {folder}", flush=True)
                return features
        return None

    def evaluate(self, captioner) -> dict:
        import torch
        from tune_caption_decoding import CHOICE, encode_split

        from text_attn.core.metrics import coco_metrics

        weights = list(captioner.model.encoder.state_dict().values())
        if self.encoded is None or not all(map(torch.equal, self.encoded[0], weights)):
            features = self.cached(captioner)
            self.encoded = (weights, encode_split(captioner, self.paths) if features is None else features)
        features = self.encoded[1]
        beam, lp, ngram = self.decoding
        caps = []
        for i in range(0, len(self.paths), 64):
            caps += captioner.caption_features(features[i : i + 64].float(), beam, 30, lp, no_repeat_ngram=ngram)
        hyps = {p: " ".join(c.words) for p, c in zip(self.paths, caps, strict=True)}
        scores = {k: 100 * v for k, v in coco_metrics(self.refs, hyps, meteor=True, ptb=True).items()}
        row = {m: scores[m] for m in self.metrics}
        return {**row, "chosen_by": sum(row[m] for m in CHOICE)}

    def header(self, split: str) -> tuple[str, str]:
        names = " | ".join(m.replace("_", "-") for m in self.metrics)
        beam, lp, ngram = self.decoding
        how = "greedy" if beam == 1 else f"beam {beam}, length penalty {lp:g}"
        how += f", no repeated {ngram}-gram" if ngram else ""
        return f"{names} (coco-caption, {split}, {how}) | sum (BLEU-1..4, METEOR, CIDEr)", "---|" * 6 + "---"

    def cells(self, row: dict) -> str:
        return " | ".join(f"{row[m]:.2f}" for m in self.metrics) + f" | {row['chosen_by']:.2f}"


def check_caption_decoding(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--beam-size, --length-penalty and --no-repeat-ngram (the one decoding captions are scored at): a usage error
    (exit code 2) out of range."""
    if args.beam_size < 1 or args.length_penalty < 0 or args.no_repeat_ngram < 0:
        p.error("--beam-size must be >= 1, --length-penalty and --no-repeat-ngram >= 0")


def fit_feature_caches(run: Path) -> list[Path]:
    """The feature cache folders the run's fits used (data.feature_cache_dir of each config.yaml LightningCLI saved
    under the run)."""
    import yaml

    found = []
    for config in sorted(run.rglob("config.yaml")):
        try:
            folder = (yaml.safe_load(config.read_text()) or {}).get("data", {}).get("feature_cache_dir")
        except (OSError, yaml.YAMLError, AttributeError):
            continue
        if isinstance(folder, str) and folder and folder != "auto" and Path(folder).is_dir():
            found.append(Path(folder))
    return found


def family_of(model: Path):
    """TextFamily or CaptionFamily, by the model file's kind (None: not a model file of either)."""
    import torch

    try:
        fmt = torch.load(model, map_location="cpu", weights_only=True).get("format", "")
    except Exception:  # noqa: BLE001 - unreadable: the caller names the file
        return None
    return {"attention-toolkit/text-model": TextFamily, "attention-toolkit/caption-model": CaptionFamily}.get(fmt)


def main(argv: list[str] | None = None) -> int:
    import torch

    from text_attn.core.modelfile import ModelFileError

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True, help="the fit's root dir (its per-epoch or per-step checkpoints)")
    p.add_argument("--data-root", type=Path, required=True, help="Multi30k or Flickr8k, as the model's family needs")
    p.add_argument("--model", type=Path, help="the fit's model file (default: RUN/model.pt)")
    p.add_argument("--src", default="de", help="translation: source language")
    p.add_argument("--tgt", default="en", help="translation: target language")
    p.add_argument("--split", default="val", help="the split chosen on (never a test split)")
    p.add_argument("--counts", type=int, nargs="+", default=[2, 3, 5, 8], help="average the last k checkpoints, each k")
    p.add_argument("--limit", type=int, help="only the first N sentences or photos of the split")
    # a run held at a constant rate goes on past its best: the means that end at the best checkpoint are the ones
    # worth scoring, not those of its last, worse steps
    p.add_argument("--until", type=int, help="only the checkpoints saved at or before this epoch or step (the best)")
    # captions are chosen at the decoding a Flickr8k model is used with (beam 5, length penalty 1, no repeated
    # trigram: what the tuner chose for the SCST models): measured on Flickr8k val, greedy undersold the averages
    p.add_argument("--beam-size", type=int, default=5, help="captions: beam width (translations: greedy)")
    p.add_argument("--length-penalty", type=float, default=1.0, help="captions: length penalty")
    p.add_argument("--no-repeat-ngram", type=int, default=3, help="captions: n-gram blocking (0: off)")
    p.add_argument("--write", type=new_file, help="write the best row here as a model file (may be the fit's own)")
    p.add_argument("--json", type=new_file, help="write the rows here")
    args = p.parse_args(argv)
    if args.split.startswith("test"):
        p.error("--split: averaging is chosen on validation data, never on a test split")
    check_caption_decoding(p, args)
    model = args.model or args.run / "model.pt"
    ckpts = saved_checkpoints(args.run)
    if args.until is not None:
        ckpts = [c for c in ckpts if int(_number(c)) <= args.until]
    counts = sorted({k for k in args.counts if 2 <= k <= len(ckpts)})
    family = family_of(model) if model.is_file() else None
    if family is None or not counts:
        what = "" if family or not model.is_file() else " (a text or caption model file)"
        until = "" if args.until is None else f" up to {args.until}"
        print(f"checkpoint_averaging: error: need {model}{what} and >= 2 epoch or step checkpoints{until} under "
              f"{args.run} (found {len(ckpts)})", file=sys.stderr)  # fmt: skip
        return 1
    fam = family(args)
    rows, made = [], {}
    print(f"{args.split}: {fam.what}; {len(ckpts)} saved checkpoints under {args.run}", flush=True)
    unit = "epochs" if ckpts[-1].name.startswith("epoch") else "steps"
    what = "epochs" if unit == "epochs" else "step checkpoints"
    candidates = [(f"fit's model file (best {unit[:-1]})", None)]
    candidates += [(f"mean of the last {k} {what}", k) for k in counts]
    for label, k in candidates:
        try:
            if k is None:
                loaded = fam.load(model)
            else:
                loaded, made[label] = fam.average(ckpts[-k:])
        except ModelFileError as err:
            print(f"checkpoint_averaging: error: {err}", file=sys.stderr)
            return 1
        start = time.perf_counter()
        numbers = "" if k is None else ", ".join(_number(c) for c in ckpts[-k:])
        with torch.no_grad():  # not set_grad_enabled(False): a caller's process (a test) keeps its autograd
            scores = fam.evaluate(loaded)
        rows.append({"variant": label, unit: numbers, **scores, "seconds": time.perf_counter() - start})
        print(f"  {label}: {fam.cells(rows[-1])}", flush=True)
    best = max(rows, key=lambda r: r[fam.choice])
    head, rule = fam.header(args.split)
    print(f"\n| variant | {unit}{' (0-based)' if unit == 'epochs' else ''} | {head} |")
    print(f"|---|---|{rule}|")
    for r in rows:
        mark = "**" if r is best else ""
        print(f"| {mark}{r['variant']}{mark} | {r[unit] or '-'} | {fam.cells(r)} |")
    if args.json:
        write_text(args.json, json.dumps({"split": args.split, "rows": rows, "chosen": best["variant"]}, indent=1))
    if args.write:
        if best["variant"] in made:
            fam.write(made[best["variant"]], args.write)
            print(f"wrote {args.write}: {best['variant']}")
        elif args.write.resolve() != model.resolve():
            write_bytes(args.write, Path(model).read_bytes())
            print(f"wrote {args.write}: a copy of {model}, the best on {args.split}")
        else:
            print(f"{model} is the best on {args.split}: left as it is")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))

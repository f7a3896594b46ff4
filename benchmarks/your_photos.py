"""Teaching the bundled captioner a folder of your photos (configs/caption/your_photos.yaml): what starting from it buys
against training from scratch, and what adding your captions' words to its vocabulary buys against reading them as
<unk>. Prints a markdown table per scenario and writes its JSON; about 1.5 hours on 2 CPU cores, most of it the two
self-critical rows. A row's fit is kept (``fit_seconds.txt`` beside its model): run again with the same ``--out``, the
command fits only what is missing, and scores only models it has not scored (``scores.json`` beside each).

    python benchmarks/your_photos.py --flickr8k-root ../shared/data/flickr8k --out runs/your_photos_bench \\
        --json docs/your_photos.json

Each scenario is a folder of photos and a captions file, as a user has them, trained with the shipped config as it
is (only the folder, the captions file and the held-out sizes given), and scored on held-out photos of the same kind:

- ``dogs``: real photos, a kind the bundled model knows. Flickr8k photos whose five captions mention a dog: the val
  split's for training and validation (the bundled model never trained on them; its decoding was chosen on them), the
  test split's to score. The shared 224 x 224 copies, with their own captions.
- ``shapes``: a kind it has never seen, with words it does not have: synthetic scenes of coloured shapes
  (captioning.training.shapes; 128 px PNG files) and every caption the generator writes for each.

Rows: the bundled model's first decoder as it is (the start: no training); the shipped config (its vocabulary extended
with the new words); the same with ``model.init_vocab keep`` (new words read as <unk>); the shipped config at the
scratch run's rate (the config's rate is chosen by the best val CIDEr-D of these two); self-critical training on the
folder's captions (your_photos_scst.yaml) from the bundled decoder, and from the shipped config's model; and the same
network trained
from scratch on the same folder for the same epochs (``model.init_from null``, at the first Flickr8k training's rate,
1e-3: the config's 2e-4 adjusts a trained model). Every model captions the held-out photos with beam 3 (no length
penalty, no n-gram block: the decoding a model file without a recorded one gets), scored with coco-caption's BLEU-4
and CIDEr-D on lowercased words without punctuation (no PTB tokenizer: no Java needed).

``--blend W ...`` adds a row a weight: the shipped config's model blended back towards the start (``caption-export
extend/model.pt blend.pt --average start.pt --weights W 1-W``, Wortsman et al. 2022's WiSE-FT), validated on the val
photos as the start is. With ``--flickr8k-root``, every model also captions the rest of Flickr8k's test split (the
photos not all of whose captions mention a dog: what the bundled model was made for), to show what teaching a folder
costs there; models that share an encoder share its features.

``--mix N ...`` adds a row an N: the shipped config's fit with N of Flickr8k's train photos mixed in (``--data.mix_root
FLICKR8K --data.mix_size N``: trained on beside the folder's photos, never validated or tested on), the first N's with
its blends (``--blend``) and a self-critical stage from it (your_photos_scst.yaml, the same photos mixed in): what
keeping some of the everyday photos in training saves of them, and what it costs on the folder's kind. ``--rows`` naming
``mix`` (``--rows extend,mix``) runs the mix fits without their self-critical stage.

``--seed S`` fits every row with ``seed_everything`` S (the configs' is 0) in an ``--out`` folder of its own (the
folder records it, ``seed.txt``, and refuses another): the same rows again on another seed, to see which differences
are the training's noise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from text_attn.core.errors import new_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _runs import best_logged, console_script, markdown_table, run_stage  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs" / "caption"
XE, SCST = CONFIGS / "your_photos.yaml", CONFIGS / "your_photos_scst.yaml"
# (run folder, row, config, the fit's options beyond the folder's; None: the start itself, not trained); a row whose
# options name "@KEY" starts from that row's model file; "{mix}" and "{flickr8k}" are an N of --mix and --flickr8k-root
# (the mix row runs once an N, mix_scst once, from the first N's: _rows)
ROWS = [
    ("start", "the bundled model's first decoder, as it is", XE, None),
    ("extend", "from it, new words added (your_photos.yaml)", XE, []),
    ("mix", "from it, new words added, {mix:,} of Flickr8k's train photos mixed in (data.mix_size)", XE,
     ["--data.mix_root", "{flickr8k}", "--data.mix_size", "{mix}"]),
    ("keep", "from it, new words read as <unk> (init_vocab keep)", XE, ["--model.init_vocab", "keep"]),
    ("rate", "from it, new words added, at 1e-3 (the scratch run's rate)", XE, ["--model.lr", "0.001"]),
    ("scst", "from it, self-critical (your_photos_scst.yaml)", SCST, []),
    ("xe_scst", "your_photos.yaml, then your_photos_scst.yaml from its model", SCST,
     ["--model.init_from", "@extend", "--model.init_member", "null"]),
    ("mix_scst", "mixed ({mix:,}), then your_photos_scst.yaml from its model, mixed too", SCST,
     ["--model.init_from", "@mix{mix}", "--model.init_member", "null", "--data.mix_root", "{flickr8k}",
      "--data.mix_size", "{mix}"]),
    ("scratch", "from scratch, the same network and epochs", XE, ["--model.init_from", "null", "--model.init_member",
                                                                 "null", "--model.lr", "0.001"]),
]  # fmt: skip


def _captioned(items: list) -> list[tuple[str, list[str]]]:
    return [(str(it.path), [" ".join(c) for c in it.captions]) for it in items]


def _is_dog_photo(item) -> bool:
    """All five of its captions mention a dog."""
    return all(any(w in ("dog", "dogs", "puppy") for w in c) for c in item.captions)


def _dog_photos(splits: dict) -> dict[str, list[tuple[str, list[str]]]]:
    """split -> [(photo file, its captions)] of Flickr8k photos all of whose five captions mention a dog (``splits``:
    read_flickr8k's)."""
    return {split: _captioned([it for it in splits[split] if _is_dog_photo(it)]) for split in ("val", "test")}


def _rest_of_test(splits: dict) -> list[tuple[str, list[str]]]:
    """Flickr8k's test photos not all of whose five captions mention a dog (the dogs scenario's held-out photos
    left out), with their captions."""
    return _captioned([it for it in splits["test"] if not _is_dog_photo(it)])


def _shapes(folder: Path, n: int, seed: int) -> list[tuple[str, list[str]]]:
    from captioning.training.shapes import make_scenes

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, scene in enumerate(make_scenes(n, seed=seed)):
        path = folder / f"scene_{seed}_{i:04d}.png"
        if not path.is_file():
            scene.image.save(path)
        out.append((str(path), [" ".join(c) for c in scene.captions]))
    return out


def _write_folder(out: Path, photos: list[tuple[str, list[str]]]) -> tuple[Path, Path]:
    """A folder of (links to) the photos and its captions file, as a user would have them."""
    folder = out / "photos"
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for path, captions in photos:
        link = folder / Path(path).name
        if not link.exists():
            link.symlink_to(Path(path).resolve())
        lines += [f"{link.name}\t{c}" for c in captions]
    tsv = out / "captions.tsv"
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder, tsv


def _rest_scores(captioner, photos: list[tuple[str, list[str]]], features: dict) -> dict:
    """BLEU-4 and CIDEr-D of ``captioner`` on ``photos`` (beam 3, as _score), its region features computed once per
    encoder (``features``: encoder digest -> (N, L, D), shared by the models of one run)."""
    from dataclasses import asdict

    import torch

    from captioning.training.feature_cache import encoder_fingerprint
    from text_attn.core.metrics import coco_metrics

    key = encoder_fingerprint(captioner.model.encoder, asdict(captioner.preprocess))  # as the feature cache keys them
    if key not in features:
        paths = [p for p, _ in photos]
        parts = [captioner.encode_photos(paths[i : i + 32])[1] for i in range(0, len(paths), 32)]
        features[key] = torch.cat(parts)  # (N, L, D)
    feats = features[key]
    said = []
    for i in range(0, len(feats), 32):
        said += captioner.caption_features(feats[i : i + 32], beam_size=3, max_len=30, length_penalty=0.0)
    scores = coco_metrics({i: caps for i, (_, caps) in enumerate(photos)},
                          {i: " ".join(c.words) for i, c in enumerate(said)}, meteor=False)  # fmt: skip
    return {"rest_Bleu_4": 100 * scores["Bleu_4"], "rest_CIDEr": 100 * scores["CIDEr"], "rest_photos": len(photos)}


def _score(model: Path, test: list[tuple[str, list[str]]], start_words: set[str], rest: tuple | None = None) -> dict:
    """The model's test scores (beam 3) and what it says of new words; ``rest``: (photos, features) of the rest of
    Flickr8k's test split, scored too (:func:`_rest_scores`)."""
    from captioning.model.captioner import Captioner
    from text_attn.core.metrics import coco_metrics

    captioner = Captioner.load(model)
    t0 = time.perf_counter()
    said = captioner.caption_images([p for p, _ in test], beam_size=3, length_penalty=0.0, no_repeat_ngram=0)
    hyps = {i: " ".join(c.words) for i, c in enumerate(said)}
    refs = {i: caps for i, (_, caps) in enumerate(test)}
    scores = coco_metrics(refs, hyps, meteor=False)
    new = [w for w in captioner.vocab.itos if w not in start_words]
    with_new = sum(any(w in new for w in c.words) for c in said)
    out = {"Bleu_4": 100 * scores["Bleu_4"], "CIDEr": 100 * scores["CIDEr"], "vocabulary": len(captioner.vocab),
           "new_words": len(new), "captions_with_new_words": with_new, "captions": len(said),
           "caption_seconds": time.perf_counter() - t0, "examples": [hyps[i] for i in range(3)]}  # fmt: skip
    return {**out, **_rest_scores(captioner, *rest)} if rest else out


def kept_scores(run: Path, model: Path, test: list, rest: tuple | None, score) -> dict:
    """``score()`` (the model's scores: :func:`_score`), kept in ``run/scores.json`` for the same model file (its size
    and time) and the same photos: a second run of the command scores only the models it made, in seconds where it
    took minutes a row. The key does not hold how a row is scored: after changing :func:`_score`, remove them."""
    import hashlib

    stat = model.stat()
    said = json.dumps([str(model.resolve()), stat.st_size, stat.st_mtime_ns, test, rest[0] if rest else None])
    key = hashlib.sha256(said.encode()).hexdigest()
    path = run / "scores.json"
    if path.is_file() and (kept := json.loads(path.read_text())).get("key") == key:
        return kept["scores"]
    scores = score()
    run.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "scores": scores}, indent=1) + "\n")
    return scores


def written_back(run: Path) -> float | None:
    """The start's val CIDEr-D where the fit under ``run`` wrote the start's weights back (a self-critical stage that
    did not beat it: "wrote model file: ... (model.init_from's weights: ..."), from its line "val_CIDEr: A from
    model.init_from ... before training"; None where it wrote its own (the sanity check's score is not in
    metrics.csv)."""
    import re

    for log in run.glob("*.log"):
        text = log.read_text(errors="replace")
        found = re.search(r"val_CIDEr: ([\d.]+) from model\.init_from .* before training", text)
        if found and "(model.init_from's weights:" in text:
            return float(found.group(1))
    return None


def _rows(mix: tuple[Path, tuple[int, ...]] | None) -> list[tuple]:
    """ROWS as run: (ROWS key, run folder, row, config, options, whether --blend blends its fit): the mix row once per
    --mix N, mix_scst once from the first N's fit (neither without --mix), their options filled in; the extend row's
    fit and the first mix row's are blended."""
    out = []
    for key, row, config, extra in ROWS:
        if not key.startswith("mix"):
            out.append((key, key, row, config, extra, key == "extend"))
            continue
        root, sizes = mix or (None, ())
        for n in sizes if key == "mix" else sizes[:1]:
            given = {"mix": n, "flickr8k": root}
            run = key.replace("mix", f"mix{n}", 1)  # mix500, mix500_scst: another --mix, another fit
            blended = key == "mix" and n == sizes[0]
            out.append((key, run, row.format(**given), config, [a.format(**given) for a in extra], blended))
    return out


def run_scenario(
    name: str,
    train: list,
    val_n: int,
    test: list,
    out: Path,
    epochs: int | None,
    chosen: set[str],
    blends: tuple[float, ...] = (),
    rest: tuple | None = None,
    mix: tuple[Path, tuple[int, ...]] | None = None,
    seed: int | None = None,
) -> dict:
    """The scenario's rows (``chosen``: the trained rows to run; ``blends``: the extend and first mix rows' fits blended
    towards the start at these weights) fitted where not kept under ``out`` and scored on ``test`` (``rest``: (photos,
    features) of the rest of Flickr8k's test split, scored too; ``mix``: (Flickr8k's folder, how many of its train
    photos each mix row mixes in); ``seed``: every fit's seed_everything, None the config's)."""
    from captioning.commands.export import export_main
    from captioning.model.bundled import BUNDLED_MODEL
    from captioning.model.captioner import Captioner

    out.mkdir(parents=True, exist_ok=True)
    folder, tsv = _write_folder(out / "data", train)
    start = out / "start.pt"
    if not start.is_file():  # the bundled ensemble's first decoder alone: the start every trained row begins from
        export_main([str(BUNDLED_MODEL), str(start), "--member", "1"])
    start_words = set(Captioner.load(start).vocab.itos)
    data = ["--data.image_dir", str(folder), "--data.captions_tsv", str(tsv), "--data.val_size", str(val_n),
            "--data.test_size", "0", "--data.feature_cache_dir", str(out / "feature_cache")]  # fmt: skip
    if epochs is not None:
        data += ["--trainer.max_epochs", str(epochs)]
    if seed is not None:
        data += ["--seed_everything", str(seed)]

    def validated(run: Path, row: str, config: Path, model: Path | None = None) -> None:
        """A model not trained here (the start, a blend) validated on the val photos as fit validates its start."""
        if list(run.glob("lightning_logs/*/metrics.csv")):
            return
        start_from = ["--model.init_from", str(model), "--model.init_member", "null"] if model else []
        cmd = [console_script("caption-train"), "validate", "--config", str(config), *data, *start_from,
               "--trainer.default_root_dir", str(run)]  # fmt: skip
        run.mkdir(parents=True, exist_ok=True)
        run_stage(f"{name}: {row}, validated", cmd, run)

    rows = {}

    def scored(row: str, run: Path, model: Path, seconds: float) -> None:
        val = 100 * best_logged(run, "val_CIDEr")  # the greedy val CIDEr-D the fit kept its checkpoint by
        start_val = written_back(run)
        val = val if start_val is None else start_val  # the model file holds the start's weights: its score
        scores = kept_scores(run, model, test, rest, lambda: _score(model, test, start_words, rest))
        rows[row] = {**scores, "train_minutes": seconds / 60, "best_val_CIDEr": val,
                     "start_written_back": start_val is not None}  # fmt: skip
        print(f"[{name}] {row}: BLEU-4 {rows[row]['Bleu_4']:.2f}, CIDEr-D {rows[row]['CIDEr']:.2f}", flush=True)

    for kind, key, row, config, extra, blended in _rows(mix):
        run, model, seconds = out / key, start, 0.0
        if extra is None:
            validated(run, row, config)
        if extra is not None and kind not in chosen:
            continue
        took = run / "fit_seconds.txt"  # a row fitted before (an earlier run with the same --out): scored again
        if extra is not None and took.is_file() and (run / "model.pt").is_file():
            model, seconds = run / "model.pt", float(took.read_text())
        elif extra is not None:
            model = run / "model.pt"
            extra = [str(out / a[1:] / "model.pt") if a.startswith("@") else a for a in extra]
            cmd = [console_script("caption-train"), "fit", "--config", str(config), *data, *extra,
                   "--trainer.default_root_dir", str(run), "--model.export_path", str(model)]  # fmt: skip
            run.mkdir(parents=True, exist_ok=True)
            seconds = run_stage(f"{name}: {row}", cmd, run)
            took.write_text(f"{seconds:.1f}\n")
        scored(row, run, model, seconds)
        for w in blends if blended else ():  # right after the fit they blend, in table order
            stem = f"blend_{w:g}" if key == "extend" else f"blend_{key}_{w:g}"
            blend, blend_run = out / f"{stem}.pt", out / stem
            if not blend.is_file():
                export_main([str(model), str(blend), "--average", str(start), "--weights", f"{w:g}", f"{1 - w:g}"])
            which = "from it" if key == "extend" else "mixed"
            blend_row = f"{which}, blended {w:g} with the start (--weights {w:g} {1 - w:g})"
            validated(blend_run, blend_row, config, blend)
            scored(blend_row, blend_run, blend, seconds)
    return {"train_photos": len(train) - val_n, "val_photos": val_n, "test_photos": len(test), "rows": rows}


def table(name: str, result: dict) -> str:
    rest = next((r["rest_photos"] for r in result["rows"].values() if "rest_photos" in r), None)
    header = ["model", "best val CIDEr-D", "test BLEU-4", "test CIDEr-D"]
    header += [f"Flickr8k's other {rest} test photos: BLEU-4", "CIDEr-D"] if rest else []
    header += ["vocabulary (new words)", "test captions with a new word", "training"]
    lines = []
    for row, r in result["rows"].items():
        minutes = f"{r['train_minutes']:.1f} min" if r["train_minutes"] else "none"
        val = "-" if r["best_val_CIDEr"] is None else f"{r['best_val_CIDEr']:.2f}"
        val += " (the start's: written back)" if r.get("start_written_back") else ""
        cells = [row, val, f"{r['Bleu_4']:.2f}", f"{r['CIDEr']:.2f}"]
        cells += [f"{r['rest_Bleu_4']:.2f}", f"{r['rest_CIDEr']:.2f}"] if rest else []
        cells += [f"{r['vocabulary']:,} ({r['new_words']})", f"{r['captions_with_new_words']} of {r['captions']}",
                  minutes]  # fmt: skip
        lines.append(cells)
    said = (f"**{name}**: {result['train_photos']} photos to train on, {result['val_photos']} to validate, "
            f"{result['test_photos']} held out to score")  # fmt: skip
    return f"{said}\n\n{markdown_table(header, lines)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--flickr8k-root", type=Path, help="Flickr8k (the dogs scenario); without it, shapes only")
    p.add_argument("--out", type=Path, default=Path("runs/your_photos_bench"), help="runs, folders and logs")
    p.add_argument("--scenarios", default="dogs,shapes", help="comma-separated: dogs, shapes")
    p.add_argument("--epochs", type=int, help="trainer.max_epochs (default: the config's)")
    p.add_argument("--seed", type=int, help="seed_everything of every fit (default: the configs', 0); an --out folder "
                   "keeps the fits of one seed")  # fmt: skip
    p.add_argument("--json", type=new_file, help="write the results here")
    p.add_argument("--rows", default=",".join(k for k, _, _, extra in ROWS if extra is not None and "mix" not in k),
                   help="the trained rows to run (the start is always scored): %(default)s")  # fmt: skip
    p.add_argument("--mix", type=int, nargs="+", default=[], metavar="N",
                   help="a row more (mix) an N: the shipped config's fit with N of Flickr8k's train photos mixed in "
                   "(data.mix_root, data.mix_size); needs --flickr8k-root")  # fmt: skip
    p.add_argument(
        "--blend",
        nargs="+",
        type=float,
        default=[],
        metavar="W",
        help="rows of the extend row's fit blended back towards the start, W its share (0 < W < 1)",
    )
    args = p.parse_args(argv)
    rows = set(args.rows.split(","))
    if unknown := rows - {k for k, _, _, _ in ROWS}:
        p.error(f"unknown row {sorted(unknown)[0]!r}")
    if bad := [w for w in args.blend if not 0 < w < 1]:
        p.error(f"--blend {bad[0]:g}: each weight between 0 and 1 (the fit's share; the start's is 1 - W)")
    if args.blend and "extend" not in rows:
        p.error("--blend blends the extend row's fit: keep extend in --rows")
    if any(n < 1 for n in args.mix) or (args.mix and args.flickr8k_root is None):
        said = " ".join(map(str, args.mix))
        p.error(f"--mix {said}: numbers of Flickr8k's train photos, with --flickr8k-root to read them from")
    if (mixed := sorted(r for r in rows if r.startswith("mix"))) and not args.mix:
        p.error(f"--rows {mixed[0]}: the mix rows need --mix N (how many of Flickr8k's train photos to mix in)")
    rows |= {"mix", "mix_scst"} if args.mix and not mixed else set()  # --rows naming a mix row: those alone
    record, seed = args.out / "seed.txt", str(args.seed or 0)  # no --seed: the configs' 0
    kept = record.read_text().strip() if record.is_file() else None
    if kept is not None and kept != seed:
        p.error(f"--seed {seed}: {args.out} holds fits of seed {kept}; give another --out")
    if args.seed is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        record.write_text(seed + "\n")
    scenarios = [s for s in args.scenarios.split(",") if s]
    if unknown := set(scenarios) - {"dogs", "shapes"}:
        p.error(f"unknown scenario {sorted(unknown)[0]!r}: choose dogs or shapes")
    if "dogs" in scenarios and args.flickr8k_root is None:
        p.error("the dogs scenario reads Flickr8k: give --flickr8k-root")
    results, features = {}, {}  # features: the rest of Flickr8k's test photos', by encoder
    from captioning.training.readers import read_flickr8k

    splits = read_flickr8k(args.flickr8k_root) if args.flickr8k_root else None  # read once: its notes said once
    rest = (_rest_of_test(splits), features) if splits else None
    for name in scenarios:
        if name == "dogs":
            dogs = _dog_photos(splits)
            val_n = 40
            train, test = dogs["val"], dogs["test"]
        else:
            val_n = 40
            train = _shapes(args.out / "shapes_photos", 300 + val_n, seed=21)
            test = _shapes(args.out / "shapes_photos", 200, seed=22)
        mix = (args.flickr8k_root.resolve(), tuple(dict.fromkeys(args.mix))) if args.mix else None
        results[name] = run_scenario(name, train, val_n, test, args.out / name, args.epochs, rows, tuple(args.blend),
                                     rest, mix, args.seed)  # fmt: skip
        print(table(name, results[name]), flush=True)
    print()
    for name, result in results.items():
        print(table(name, result) + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))

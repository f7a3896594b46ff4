r"""Is attention an explanation? The faithfulness measure (text_attn.core.faithfulness) on the bundled models (issue
73). Prints one table per family and writes each word's areas and taus as JSON; about 8 minutes on 2 quiet cores with
the command below (docs/faithfulness.md: 7 min 46 s).

    python benchmarks/faithfulness.py --flickr8k-root ../shared/data/flickr8k --multi30k-root ../shared/data/multi30k \
        --shapes-hard runs/shapes_hard/model.pt --flickr8k-hard runs/flickr8k_lite2_hard/model.pt \
        --json docs/faithfulness.json

For each word a model generated (its own caption or translation as the prefix), its input units (a photo's regions, a
sentence's source tokens) are ranked by the word's attention, at random (seeded draws), by leave-one-out (the
reference) and by gradient methods, then removed in that order; the word's probability after each removal gives the
deletion and insertion curves (areas divided by the word's own probability: 1 = removing changes nothing). Columns:
- deletion, most first (lower = the ranking found what the word needs), least first (higher = better; with the same
  removal, insertion is this curve read backwards: the same area, in the JSON only), Kendall's tau against
  leave-one-out (1 = the same order).
- Interventions: the word's own attention replaced by uniform weights, a permutation of it, another word's (the
  next word's; the end token's: the first word's): total variation distance of the next-word distribution from the
  one with the word's own weights forced in, and how often its top word changes. ``own``: that baseline against the
  model's own step (translators; a Transformer's one row of weights is read by every head of every layer, which
  moves the distribution already: the other rows compare two such replacements).
Random orders and permutations are drawn per word (seeded by photo or sentence and word; pixel space: per photo, so
that its masks recur across a photo's words and are encoded once).
Families and how a unit is removed (captioning.model.explain, text_attn.translation.explain):
- Flickr8k captioner (real test photos), feature space: a region's vector replaced by the fill at the word's step
  (``--fill photo``, the default: the photo's own mean region, so every region removed is uniform attention's context
  and the photo's gist stays; ``--fill train``: the mean region of ``--fill-photos`` training photos, which takes the
  gist away too); each decoder of the bundled ensemble and the ensemble itself.
- the same, pixel space: blocks of 3 x 3 regions (a ninth of the photo) greyed, the photo encoded again (a model of
  another grid: the smallest blocks that tile it in at most 3 x 3, e.g. 2 x 2 regions on a 4 x 4 grid).
- shapes captioner (synthetic test scenes, boxes known): feature space, and plausibility: for the words that name an
  object, how often the attention's arg-max and leave-one-out's lie in that object's box.
- hard attention (model files trained by the shipped hard configs, not bundled: --shapes-hard, --flickr8k-hard), each
  measured twice: decoding with one region a word (the arg-max of α: removing other regions matters only where it
  moves the arg-max; "uniform" weights pick the first region) and with the expected context (α's weighted sum).
- Multi30k translators (real test sentences): a source token masked out of the cross-attention at the word's step;
  Bahdanau (GRU) and the Transformer (cross-attention averaged over heads and layers; its penultimate layer alone, the
  one translate shows; attention rollout; gradient). ``--text-models`` names others (bundled names or model files).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

import torch

from text_attn.core.errors import new_file
from text_attn.core.faithfulness import WordResult, measure_word, summarize
from text_attn.core.safe_files import write_text

METRICS = ("deletion_area", "deletion_least_area", "insertion_area", "tau")


# --- captioning --------------------------------------------------------------------------------------------------
def _caption_tokens(captioner, features: torch.Tensor) -> tuple[list[str], list[int]]:
    """The model's own caption of one photo (features (1, L, D)) as ``caption`` decodes it, and its ids + eos (a hard
    model decodes as its config says at the time: ``hard_mode`` sets it)."""
    decoding = {k: v for k, v in captioner.decoding().items() if k != "hard_inference"}
    words = captioner.caption_features(features, **decoding)[0][0]
    vocab = captioner.vocab
    return words, [vocab.stoi[w] for w in words] + [vocab.eos_id]


def photo_words(captioner, images: Iterable[torch.Tensor], draws: int, gradients: bool = True,
                pixel: bool = False, fill: torch.Tensor | None = None) -> list[WordResult]:  # fmt: skip
    """Every word of every photo's caption measured: feature space (``fill``: what a removed region becomes, (D,);
    None: each photo's own mean region), or pixel space (blocks of regions greyed)."""
    return [result for _, _, _, result in measured_words(captioner, images, draws, gradients, pixel, fill)]


def pixel_block(grid: int) -> int:
    """The regions a side of one pixel-space unit covers: the smallest that tiles the grid in at most 3 x 3 units (the
    bundled 9 x 9 grid: 3, a ninth of the photo each; a 4 x 4 grid: 2). A grid no such block tiles in more than one
    unit (a prime above 3) is a ValueError."""
    block = next(b for b in range(1, grid + 1) if grid % b == 0 and grid // b <= 3)
    if block == grid:
        raise ValueError(f"pixel space: no block tiles the {grid} x {grid} grid in more than one unit")
    return block


def measured_words(captioner, images: Iterable[torch.Tensor], draws: int, gradients: bool = True, pixel: bool = False,
                   fill: torch.Tensor | None = None):  # fmt: skip
    """Per photo n and word t of its caption: (n, t, the photo's stepped caption (explain.CaptionWords), the word's
    WordResult), in order; pixel space in units of :func:`pixel_block`; feature space's removed regions become
    ``fill`` (None: the photo's own mean region)."""
    from captioning.model import explain

    model, vocab = captioner.model.eval(), captioner.vocab
    for n, image in enumerate(images):
        with torch.no_grad():
            features = model.encode(image[None])  # (1, L, D)
        words, tokens = _caption_tokens(captioner, features)
        steps = explain.step_through(model, features, tokens, vocab.bos_id)
        if pixel:
            block = pixel_block(model.encoder.grid)
            probes = explain.block_probes(explain.PhotoBlocks(model, image, tokens, vocab.bos_id, block), steps)
        else:
            own_fill = explain.photo_fill(model, features) if fill is None else fill.to(features)
            probes = explain.region_probes(model, steps, own_fill, gradients)
        shown = [*words, "<eos>"]
        for t, probe in enumerate(probes):
            # pixel space: one seed per photo, so its random orders recur across its words and are encoded once
            seed = n if pixel else word_seed(n, t)
            other = steps.alphas[(t + 1) % len(tokens)] if len(tokens) > 1 else None
            result = measure_word(probe, shown[t], random_draws=draws, seed=seed, other_alpha=other)
            result.item = n
            yield n, t, steps, result


def word_seed(n: int, t: int) -> int:
    """The random draws' seed of word t of photo or sentence n: its own, so that words' random orders differ."""
    return 1000 * n + t


def train_fill(captioner, root: Path, n: int) -> torch.Tensor:
    """``--fill train``: the mean region (D,) of the first ``n`` Flickr8k training photos, as the model encodes them."""
    from captioning.photos.preprocess import prepared
    from captioning.training.readers import read_flickr8k

    items = read_flickr8k(root)["train"][:n]
    total, count = None, 0
    model = captioner.model.eval()
    for start in range(0, len(items), 16):
        batch = torch.stack([prepared(item.path, captioner.preprocess) for item in items[start : start + 16]])
        with torch.no_grad():
            regions = model.encode(batch)  # (B, L, D)
        total = regions.sum(dim=(0, 1)) if total is None else total + regions.sum(dim=(0, 1))
        count += regions.shape[0] * regions.shape[1]
    return total / count


def flickr8k_photos(root: Path, n: int, preprocess) -> list[torch.Tensor]:
    from captioning.photos.preprocess import prepared
    from captioning.training.readers import read_flickr8k

    items = read_flickr8k(root)["test"][:n]
    return [prepared(item.path, preprocess) for item in items]


def _member(captioner, k: int):
    """The ensemble's k-th decoder as a captioner of its own (the same encoder and vocabulary)."""
    from captioning.model.captioner import Captioner
    from captioning.model.network import CaptionModel

    model = CaptionModel(captioner.model.encoder, captioner.decoders[k])
    return Captioner(model, captioner.vocab, captioner.domain, captioner.domain_check, captioner.info)


def shapes_plausibility(captioner, scenes, draws: int) -> tuple[list[WordResult], dict]:
    """Feature-space results on shapes scenes, and for the object words: is the attention's arg-max in the named
    object's box, and leave-one-out's (the region whose removal lowers the word most)?"""
    from captioning.photos.preprocess import prepared
    from captioning.training.grounding import cells_in_box
    from captioning.training.shapes import SHAPES, resolve_object

    results = []
    counts = {"words": 0, "attention_in_box": 0, "leave_one_out_in_box": 0, "both": 0, "agree": 0}
    grid = (captioner.model.encoder.grid,) * 2
    images = (prepared(scene.image, captioner.preprocess) for scene in scenes)
    for n, t, steps, result in measured_words(captioner, images, draws, gradients=True):
        results.append(result)
        scene, words = scenes[n], [captioner.vocab.itos[i] for i in steps.tokens[:-1]]
        obj = resolve_object(words, t, scene.objects) if t < len(words) and words[t] in SHAPES else None
        if obj is None:
            continue
        width, height = scene.image.size
        inside = cells_in_box(scene.objects[obj].box, (height, width), grid)
        a, loo = int(steps.alphas[t].argmax()), leave_one_out_peak(result.leave_one_out)
        counts["words"] += 1
        counts["attention_in_box"] += int(inside[a])
        counts["leave_one_out_in_box"] += int(loo is not None and bool(inside[loo]))
        counts["both"] += int(loo is not None and bool(inside[a] and inside[loo]))
        counts["agree"] += int(a == loo)
    return results, counts


def leave_one_out_peak(drops: list[float]) -> int | None:
    """The region whose removal alone lowers the word most, or None where none lowers it (hard attention decoded one
    region a word: most drops are exactly 0, and the arg-max of ties would name the first region, a corner)."""
    peak = max(range(len(drops)), key=drops.__getitem__)
    return peak if drops[peak] > 0 else None


def hard_mode(captioner, mode: str, measure: Callable[[], list[WordResult]]) -> Callable[[], list[WordResult]]:
    """``measure`` run with the hard-attention model decoding by ``mode`` ("argmax": one region a word; "expect": the
    expected context): its captions, removals and interventions all see that mode."""

    def run() -> list[WordResult]:
        with captioner._hard_inference(mode):
            return measure()

    return run


HARD_MODES = {"argmax": "hard, one region a word", "expect": "hard, the expected context"}


# --- tables ------------------------------------------------------------------------------------------------------
def table_rows(name: str, removal: str, results: list[WordResult]) -> tuple[list[str], dict]:
    """The family's table lines (rankings x word kinds, then the interventions) and its JSON."""
    summary = summarize(results)
    lines = [f"\n### {name}: {removal}\n", "| ranking | words | n | deletion, most first (lower better) | "
             "deletion, least first (higher better) | tau vs leave-one-out |", "|---|---|---|---|---|---|"]  # fmt: skip
    for row in summary.rankings:
        lines.append(f"| {row.method} | {row.kind} | {row.n_words} | {row.deletion_area:.3f} | "
                     f"{row.deletion_least_area:.3f} | {_f(row.tau)} |")  # fmt: skip
    if summary.interventions:
        lines += ["", "| attention replaced by | words | n | total variation | chosen word changed |"]
        lines.append("|---|---|---|---|---|")
        for row in summary.interventions:
            what = "own (forced in, against the model's step)" if row.intervention == "own" else row.intervention
            lines.append(f"| {what} | {row.kind} | {row.n_words} | {row.tv:.3f} | {row.changed:.1%} |")
    return lines, {"name": name, "removal": removal, "summary": summary.to_dict(),
                   "words": [compact(r.to_dict()) for r in results]}  # fmt: skip


def compact(word: dict) -> dict:
    """A word's JSON without its curves and leave-one-out vector (U + 1 floats each: ~30 MB for the default run):
    its probability, kind, and per ranking the areas and tau the tables average, per intervention its numbers."""
    keep = ("deletion_area", "deletion_least_area", "insertion_area", "tau")
    ranks = {name: {k: r[k] for k in keep} for name, r in word["rankings"].items()}
    return {**{k: v for k, v in word.items() if k not in ("rankings", "leave_one_out")}, "rankings": ranks}


def _f(x: float) -> str:
    return "–" if x != x else f"{x:.3f}"


FAMILIES = ("flickr8k", "pixel", "shapes", "hard", "text")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flickr8k-root", type=Path, help="Flickr8k (either layout): its test photos; without it, no rows")
    p.add_argument("--multi30k-root", type=Path, help="Multi30k (test_2016_flickr.de[.gz]); without it, no text rows")
    p.add_argument("--photos", type=int, default=12, help="Flickr8k test photos, feature space (default 12)")
    p.add_argument("--pixel-photos", type=int, default=6, help="of those, in pixel space too (default 6)")
    p.add_argument("--scenes", type=int, default=30, help="shapes test scenes (default 30)")
    p.add_argument("--sentences", type=int, default=30, help="Multi30k test sentences per translator (default 30)")
    p.add_argument("--draws", type=int, default=3, help="random orders per word (default 3)")
    p.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES, metavar="FAMILY",
                   help="which tables: flickr8k, pixel, shapes, hard, text (default: all)")  # fmt: skip
    p.add_argument(
        "--shapes-hard",
        type=Path,
        metavar="MODEL",
        help="a shapes hard-attention model file "
        "(configs/caption/shapes_hard.yaml's runs/shapes_hard/model.pt): the hard rows on shapes scenes",
    )
    p.add_argument(
        "--flickr8k-hard",
        type=Path,
        metavar="MODEL",
        help="a Flickr8k hard-attention model file (the "
        "shipped hard configs'; with --flickr8k-root): the hard rows on the same test photos",
    )
    p.add_argument(
        "--caption-model",
        type=Path,
        metavar="MODEL",
        help="the soft Flickr8k captioner measured (default: the bundled one), e.g. an earlier bundled model's file; "
        "each of an ensemble's decoders alone too",
    )
    p.add_argument(
        "--text-models",
        nargs="+",
        default=["transformer", "bahdanau"],
        metavar="MODEL",
        help="the translators measured: bundled names or model files (default: transformer bahdanau)",
    )
    p.add_argument("--fill", choices=["photo", "train"], default="photo",
                   help="what a removed region becomes in feature space: the photo's own mean region (default) or "
                   "the mean region of --fill-photos Flickr8k training photos")  # fmt: skip
    p.add_argument("--fill-photos", type=int, default=100, help="training photos --fill train averages (default 100)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--json", type=new_file, help="write every word's numbers here")
    args = p.parse_args(argv)
    for name in ("photos", "pixel_photos", "scenes", "sentences", "draws", "threads", "fill_photos"):
        if getattr(args, name) < 1:  # 0 photos, scenes or sentences measured nothing and exited 0
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.multi30k_root and "text" in args.families:  # named by the option (it was the config key, data.root)
        from _runs import check_corpus

        check_corpus(p, "--multi30k-root", args.multi30k_root, "test_2016_flickr", "de", "en")
    torch.set_num_threads(args.threads)
    from captioning.model.captioner import Captioner

    for flag in ("shapes_hard", "flickr8k_hard", "caption_model"):
        if getattr(args, flag) is not None and not getattr(args, flag).is_file():
            p.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: no such model file")

    def hard_model(flag: str):
        """--shapes-hard / --flickr8k-hard's model, refused in one line before any table where its attention is
        soft (it was a traceback when its table came, the tables measured before it lost)."""
        model = Captioner.load(getattr(args, flag))
        if (kind := model.model.decoder.cfg.attention) != "hard":
            p.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: a {kind}-attention model; the hard rows "
                    "need a hard-attention one (configs/caption/*hard*.yaml)")  # fmt: skip
        return model

    tables: list[tuple[str, str, Callable[[], list[WordResult]]]] = []
    plausible: dict[str, dict] = {}  # model label -> its object words' counts (shapes_plausibility)
    hard = hard_model("flickr8k_hard") if args.flickr8k_root and args.flickr8k_hard and "hard" in args.families \
        else None  # fmt: skip
    hard_shapes = hard_model("shapes_hard") if args.shapes_hard and "hard" in args.families else None
    photos = []
    if args.flickr8k_root and hard is not None and not {"flickr8k", "pixel"} & set(args.families):
        photos = flickr8k_photos(args.flickr8k_root, args.photos, hard.preprocess)  # the hard rows alone
    if args.flickr8k_root and {"flickr8k", "pixel"} & set(args.families):
        bundled = Captioner.load(args.caption_model)  # None: the bundled one
        photos = flickr8k_photos(args.flickr8k_root, args.photos, bundled.preprocess)
        n = len(bundled.decoders)
        whole = f"Flickr8k captioner (ensemble of {n})" if n > 1 else "Flickr8k captioner"
        fill, space = None, "feature space"
        if args.fill == "train":
            fill = train_fill(bundled, args.flickr8k_root, args.fill_photos)
            space = f"feature space (fill: {args.fill_photos} training photos' mean region)"
        if "flickr8k" in args.families:
            tables.append((whole, f"{space}, {len(photos)} test photos",
                           lambda: photo_words(bundled, photos, args.draws, fill=fill)))  # fmt: skip
            for k in range(n if n > 1 else 0):
                member = _member(bundled, k)
                tables.append((f"Flickr8k captioner, decoder {k + 1} alone", f"{space}, {len(photos)} test photos",
                               lambda m=member: photo_words(m, photos, args.draws, fill=fill)))  # fmt: skip
        if "pixel" in args.families:
            some = photos[: args.pixel_photos]
            try:
                side = bundled.model.encoder.grid // pixel_block(bundled.model.encoder.grid)
            except ValueError as err:
                p.error(f"--families pixel: {err}")
            tables.append((whole, f"pixel space ({side} x {side} blocks greyed), {len(some)} "
                           "test photos", lambda: photo_words(bundled, some, args.draws, pixel=True)))  # fmt: skip
    if hard is not None:  # its own encoder: a --fill train of the bundled one's regions would not fit it
        hard_fill = train_fill(hard, args.flickr8k_root, args.fill_photos) if args.fill == "train" else None
        space = "feature space" if hard_fill is None else \
            f"feature space (fill: {args.fill_photos} training photos' mean region)"  # fmt: skip
        for mode, label in HARD_MODES.items():
            measure = partial(photo_words, hard, photos, args.draws, fill=hard_fill)
            tables.append((f"Flickr8k captioner ({label})", f"{space}, {len(photos)} test photos",
                           hard_mode(hard, mode, measure)))  # fmt: skip
    shapes_models = [("soft", Captioner.load("shapes"), None)] if "shapes" in args.families else []
    if hard_shapes is not None:
        shapes_models += [(label, hard_shapes, mode) for mode, label in HARD_MODES.items()]
    if shapes_models:
        from captioning.training.shapes import make_scenes

        scenes = make_scenes(args.scenes, seed=2, size=128, max_objects=3)  # the test split's seed (seed + 2)
        for label, model, mode in shapes_models:

            def shapes_rows(label=label, model=model) -> list[WordResult]:
                results, plausible[label] = shapes_plausibility(model, scenes, args.draws)
                return results

            run = shapes_rows if mode is None else hard_mode(model, mode, shapes_rows)
            tables.append((f"shapes captioner ({label})", f"feature space, {len(scenes)} test scenes", run))
    if args.multi30k_root and "text" in args.families:
        from _multi30k import read_pair

        from text_attn.core.modelfile import ModelFileError
        from text_attn.core.word_kinds import piece_kinds
        from text_attn.translation.explain import require_attention, sentence_probes
        from text_attn.translation.translator import Translator

        sentences = read_pair(args.multi30k_root, "test_2016_flickr", "de", "en", args.sentences)[0]
        labels = {"transformer": "Transformer", "bahdanau": "Bahdanau GRU"}
        for name in args.text_models:
            try:
                translator = Translator.load(name)
                require_attention(translator.net)  # before any table (a traceback at its own, the tables before lost)
            except (ModelFileError, ValueError) as err:
                p.error(f"--text-models {name}: {err}" if isinstance(err, ValueError) else f"--text-models: {err}")
            label = labels.get(name, name)

            def text_rows(tr=translator) -> list[WordResult]:
                out = []
                for n, sentence in enumerate(sentences):
                    tokens, _, probes = sentence_probes(tr, sentence)
                    kinds = piece_kinds(tokens)  # a subword piece is of its whole word's kind
                    for t, probe in enumerate(probes):
                        other = probes[(t + 1) % len(probes)].attention if len(probes) > 1 else None
                        out.append(measure_word(probe, tokens[t], kind=kinds[t], random_draws=args.draws,
                                                seed=word_seed(n, t), other_alpha=other))  # fmt: skip
                        out[-1].item = n
                return out

            tables.append((f"Multi30k {label}", f"source tokens masked, {len(sentences)} test sentences", text_rows))
    if not tables:
        p.error("nothing to measure: give --flickr8k-root and/or --multi30k-root, or --families shapes")
    report = {
        "threads": args.threads,
        "draws": args.draws,
        "seeds": "per word (pixel space: per photo)",
        "fill": args.fill if args.fill == "photo" else f"train ({args.fill_photos} photos)",
        "families": [],
    }
    out_lines = []
    for name, removal, run in tables:
        t0 = time.perf_counter()
        results = run()
        seconds = time.perf_counter() - t0
        lines, data = table_rows(name, removal, results)
        data["seconds"] = round(seconds, 1)
        report["families"].append(data)
        out_lines += lines + [f"\n{len(results)} words in {seconds:.0f} s"]
        print(f"... {name}, {removal}: {len(results)} words, {seconds:.0f} s", file=sys.stderr, flush=True)
    if plausible:
        report["shapes_plausibility"] = plausible
        out_lines += ["\n### shapes: plausibility (object words: is the arg-max in the named object's box?)\n",
                      "| model | object words | attention's arg-max in box | leave-one-out's in box | both | the same "
                      "region |", "|---|---|---|---|---|---|"]  # fmt: skip
        for label, c in plausible.items():
            share = {k: f"{v / max(c['words'], 1):.1%}" for k, v in c.items()}
            cells = [label, str(c["words"])] + [share[k] for k in ("attention_in_box", "leave_one_out_in_box", "both",
                                                                  "agree")]  # fmt: skip
            out_lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(out_lines))
    if args.json:
        # compact: a word a line would be ~3.5 MB (the repository's copy counts against the device tool's 64 MiB)
        write_text(args.json, json.dumps(report, separators=(",", ":"), allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))

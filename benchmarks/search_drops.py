"""How often the beam search drops an ended hypothesis that would have won: a hypothesis that has produced the end keeps
its beam slot only while fewer than K unfinished ones score higher (text_attn.core.decoding.beam_search), and one
pushed out is not kept, so a search can return one its final ranking (score / length**length_penalty) puts below one
it dropped. Published searches (fairseq) keep ended hypotheses apart. This counts, for the bundled models at their
recorded decoding, the inputs where a dropped ended hypothesis outranks the one returned:

    python benchmarks/search_drops.py --multi30k-root ../shared/data/multi30k \\
        --flickr8k-root ../shared/data/flickr8k --json docs/search_drops.json

The search itself is not changed: its steps are watched (its choice of beams and its final ranking, wrapped)."""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import check_corpus, check_flickr8k  # noqa: E402

from text_attn.core.errors import new_file, positive_int  # noqa: E402


class Watch:
    """The search's beam choice and final ranking wrapped: each sentence's ended hypotheses pushed out of its K slots
    (their score and length), and at the end whether the best of them outranks the best hypothesis kept."""

    def __init__(self) -> None:
        import text_attn.core.decoding as decoding

        self.decoding, self.inputs, self.outranked, self.gains = decoding, 0, 0, []
        self.dropped: dict[int, list[tuple[float, int]]] = {}
        self.choose, self.final = decoding.choose_beams, decoding.final_hypotheses
        decoding.choose_beams, decoding.final_hypotheses = self._choose, self._final

    def _choose(self, top_lp, top_tok, scores, finished, lengths, offsets, K, pad_id):
        import torch

        out = self.choose(top_lp, top_tok, scores, finished, lengths, offsets, K, pad_id)
        kept = set(out[0].tolist())  # the parent rows of the new beams: an ended row kept is its own parent
        for row in torch.nonzero(finished).flatten().tolist():
            if row not in kept and bool(torch.isfinite(scores[row])):
                self.dropped.setdefault(row // K, []).append((float(scores[row]), max(1, int(lengths[row]))))
        return out

    def _final(self, parents, step_tokens, step_attns, scores, lengths, length_penalty, B, K, *rest):
        result = self.final(parents, step_tokens, step_attns, scores, lengths, length_penalty, B, K, *rest)
        best = (scores / lengths.clamp(min=1).float().pow(length_penalty)).view(B, K).max(dim=1).values
        for b in range(B):
            self.inputs += 1
            top = max((s / n**length_penalty for s, n in self.dropped.get(b, [])), default=float("-inf"))
            if top > float(best[b]) + 1e-9:
                self.outranked += 1
                self.gains.append(top - float(best[b]))
        self.dropped.clear()
        return result

    def row(self, what: str, decoding: dict[str, Any]) -> dict[str, Any]:
        row = {"what": what, "decoding": decoding, "inputs": self.inputs, "outranked": self.outranked,
               "mean_gain": sum(self.gains) / len(self.gains) if self.gains else None}  # fmt: skip
        self.inputs, self.outranked, self.gains = 0, 0, []
        return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--multi30k-root", type=Path, help="Multi30k (val.de.gz): both bundled translators on val")
    p.add_argument("--flickr8k-root", type=Path, help="Flickr8k: the captioner on its first --photos test photos")
    p.add_argument("--photos", type=positive_int, default=300, help="test photos captioned (default 300)")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    if args.multi30k_root is None and args.flickr8k_root is None:
        p.error("give --multi30k-root, --flickr8k-root or both")
    if args.multi30k_root is not None:
        check_corpus(p, "--multi30k-root", args.multi30k_root, "val", "de")
    if args.flickr8k_root is not None:
        check_flickr8k(p, "--flickr8k-root", args.flickr8k_root)
    import torch

    torch.set_num_threads(args.threads)
    watch, rows = Watch(), []
    if args.multi30k_root is not None:
        from text_attn.translation.translator import Translator

        root = args.multi30k_root
        val = root / "val.de.gz" if (root / "val.de.gz").is_file() else root / "val.de"
        with (gzip.open if val.suffix == ".gz" else open)(val, "rt", encoding="utf-8") as f:
            lines = [line.strip() for line in f]
        for name in ("transformer", "bahdanau"):
            translator = Translator.load(name)
            translator.translate(lines)  # its recorded decoding
            rows.append(watch.row(f"bundled {name}, Multi30k val sentences", translator.decoding()))
    if args.flickr8k_root is not None:
        from captioning.model.captioner import Captioner
        from captioning.training.readers import read_flickr8k

        photos = [item.path for item in read_flickr8k(args.flickr8k_root)["test"][: args.photos]]
        captioner = Captioner.load()
        for i in range(0, len(photos), 50):
            captioner.caption_images(photos[i : i + 50])
        rows.append(watch.row(f"bundled captioner, Flickr8k test photos ({len(photos)})", captioner.decoding()))
    print("| model, inputs | decoding | inputs | a dropped ended hypothesis outranks the one returned |")
    print("|---|---|---|---|")
    for r in rows:
        said = ", ".join(f"{k} {v}" for k, v in r["decoding"].items())
        print(f"| {r['what']} | {said} | {r['inputs']:,} | {r['outranked']} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    from _runs import run_main

    sys.exit(run_main(main))

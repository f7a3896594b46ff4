"""How much a long search grows the process, against what translate's batching estimates it holds (the carried
search-memory bug; text_attn.core.heap_trim). One paragraph (the first --words words of Multi30k's German test
sentences, joined on one line) is translated by the bundled Transformer at --beam-size and an explicit --max-len, in
a fresh process each way, the ways taking turns:

    python benchmarks/search_memory.py --multi30k-root ../shared/data/multi30k --json docs/search_memory.json

- trimmed: as translate runs it (the heap's free pages handed back every 32 steps from step 128);
- not trimmed: text_attn.core.heap_trim's hook off (the search as it ran until 2026-12-05).
Each row: the process's peak resident memory less its memory before the search, the estimate (Translator.search_bytes),
and the search's seconds (2 threads). The medians of --repeats runs."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from text_attn.core.errors import new_file, positive_int

CHILD = r"""
import gzip, json, resource, sys, time
import torch
torch.set_num_threads(2)
import text_attn.core.decoding as decoding
from text_attn.core.memory_room import own_resident
from text_attn.translation.translator import Translator
root, words, beam, max_len, trim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
if not trim:
    decoding.every_few_steps = lambda step: None
text = " ".join(gzip.open(f"{root}/test_2016_flickr.de.gz", "rt").read().split()[:words])
tr = Translator.load()
tr.translate(["ein mann fährt fahrrad ."], beam_size=beam)  # the first call's one-off allocations before measuring
before = own_resident()  # /proc/self/statm's resident pages, in bytes
loaded_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # loading's own peak: the search must pass it
start = time.perf_counter()
out = tr.translate([text], beam_size=beam, max_len=max_len, split=False)  # one long search, not its sentences
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
tokens = len(tr.tokenize(text))
print(json.dumps({"grew": peak - before, "seconds": seconds, "estimate": tr.search_bytes(tokens, beam, max_len),
                  "tokens": tokens, "output_words": len(out[0].text.split()), "search_peaked": peak > loaded_peak}))
"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--multi30k-root", type=Path, required=True, help="Multi30k: its test_2016_flickr.de.gz")
    ap.add_argument("--words", type=positive_int, default=1000, help="the paragraph's words (default 1000)")
    ap.add_argument("--beam-size", type=positive_int, default=5, help="default 5")
    ap.add_argument(
        "--max-len", type=positive_int, default=1200, help="the search's cap: searched to it (default 1200)"
    )
    ap.add_argument("--repeats", type=positive_int, default=2, help="fresh processes each way, in turn (default 2)")
    ap.add_argument("--json", type=new_file, help="also write the rows here")
    args = ap.parse_args(argv)
    if not (args.multi30k_root / "test_2016_flickr.de.gz").is_file():
        ap.error(f"no test_2016_flickr.de.gz in {args.multi30k_root}: give Multi30k's folder as --multi30k-root")
    runs: dict[str, list[dict]] = {"trimmed": [], "not trimmed": []}
    for r in range(args.repeats):
        for way in ("trimmed", "not trimmed") if r % 2 == 0 else ("not trimmed", "trimmed"):
            cmd = [sys.executable, "-c", CHILD, str(args.multi30k_root), str(args.words), str(args.beam_size),
                   str(args.max_len), "1" if way == "trimmed" else "0"]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = []
    for way, got in runs.items():
        rows.append({"way": way, "grew_gb": statistics.median(g["grew"] for g in got) / 1e9,
                     "estimate_gib": got[0]["estimate"] / 2**30,
                     "seconds": statistics.median(g["seconds"] for g in got),
                     "tokens": got[0]["tokens"], "output_words": got[0]["output_words"],
                     "search_peaked": all(g["search_peaked"] for g in got)})  # fmt: skip
    print(
        f"one paragraph of {args.words} words ({rows[0]['tokens']} source tokens), beam {args.beam_size}, "
        f"--max-len {args.max_len}, bundled Transformer, medians of {args.repeats}"
    )
    print("| search | process grew by (peak) | estimate (search_bytes) | seconds |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['way']} | {row['grew_gb']:.2f} GB | {row['estimate_gib']:.2f} GiB | {row['seconds']:.1f} |")
    if not all(g["search_peaked"] for got in runs.values() for g in got):  # its peak is then loading's, not its own
        print(
            "note: a search ended below the peak of loading the model: it measured little (the paragraph's "
            "translation ended early); a longer --words measures the search"
        )
    if args.json:
        args.json.write_text(json.dumps({"words": args.words, "beam_size": args.beam_size, "max_len": args.max_len,
                                         "rows": rows}, indent=1) + "\n")  # fmt: skip
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

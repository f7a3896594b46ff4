"""The training corpus of sequence-level distillation (Kim & Rush 2016): Multi30k's train split with each German
sentence twice, once with its reference and once with a teacher's translation, plus the word links that keep the
student's attention guided (configs/text/multi30k_de_en_transformer_distilled.yaml).

    python benchmarks/distil_data.py --data-root ../shared/data/multi30k --out runs/multi30k-distilled
    text-train fit --config configs/text/multi30k_de_en_transformer_distilled.yaml \\
        --data.root runs/multi30k-distilled --data.alignments runs/multi30k-distilled/train-links.txt

Writes into OUT, each step skipped where its file is already complete (a run cut off goes on where it stopped):
1. ``teacher.en``: ``translate TEACHER --output OUT/teacher.en`` of train.de (``--resume`` after a cut), the teacher
   being the bundled Transformer and GRU as one (``--ensemble bahdanau``, at the Transformer's recorded decoding,
   beam 8): ~22 minutes on 2 cores;
2. ``train.de.gz`` / ``train.en.gz`` (the original pairs, then the same sources with the teacher's translations),
   and val and test_2016_flickr copied as they are (choices stay on Multi30k's own val; test stays untouched);
3. ``train-links.txt``: benchmarks/word_align.py's links of the new train pairs (~2 minutes);
4. ``data-note.txt``: whose the second half's translations are, one line that a student trained on OUT records beside
   its training data (``data note:`` in ``translate --model-info``; text_attn.core.data_note).
Prints how often the teacher wrote the reference exactly, and how long its translations are against the references.
"""

from __future__ import annotations

import gzip
import hashlib
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import console_script, distil_parser, files_named, teacher_files, teacher_named  # noqa: E402

from text_attn.core.data_note import write_data_note  # noqa: E402
from text_attn.core.safe_files import refuse_overlap, write_bytes  # noqa: E402
from text_attn.translation.bundled import model_path  # noqa: E402
from text_attn.translation.corpora import corpus_file, read_lines  # noqa: E402

SRC, TGT = "de", "en"
KEPT = ("val", "test_2016_flickr")  # copied as they are


def lines(path: Path) -> list[str]:
    """read_lines, for a file this script wrote or is writing: none yet is no line."""
    return read_lines(path) if path.is_file() else []


def teach(sources: list[str], out: Path, teacher: list[str]) -> list[str]:
    """The teacher's translation of every source, a line each: out is written by `translate --output` (resumed after a
    cut) and read back."""
    have = len(lines(out))
    if have > len(sources):
        raise SystemExit(f"distil_data: {out} holds {have:,} translations for {len(sources):,} sources: another "
                         "run's (a different --limit?); remove it or choose another --out")  # fmt: skip
    # a whole file is resumed too, with nothing left to translate: translate's record refuses one another teacher
    # made (it was kept, and the data note named the teacher asked for: a student's model file said so, wrongly)
    if have <= len(sources):
        command = [console_script("translate"), *teacher, "--output", str(out)]
        if have:
            command.append("--resume")
        print(f"translating {len(sources):,} sentences: {' '.join(command[1:])}", file=sys.stderr)
        done = subprocess.run(command, input="\n".join(sources) + "\n", text=True)
        if done.returncode:  # its own advice ("remove ... .run.json", "--output FILE") is not for this script's
            again = f": {out} another teacher's? remove it, or choose another --out" if have else ""  # files
            raise SystemExit(f"distil_data: translate failed (exit {done.returncode}; its message above){again}")
    got = lines(out)
    if len(got) != len(sources):
        raise SystemExit(f"distil_data: {out} has {len(got):,} lines for {len(sources):,} sources")
    return got


def main(argv: list[str] | None = None) -> int:
    p = distil_parser(__doc__, "the Multi30k folder (<split>.<lang>[.gz] files)", "--ensemble bahdanau",
                      "translate's options naming the teacher (default: '--ensemble bahdanau', the bundled "
                      "Transformer and GRU as one)", "pairs")  # fmt: skip
    args = p.parse_args(argv)
    if not args.data_root.is_dir():
        raise SystemExit(f"distil_data: {args.data_root}: no such folder (--data-root: the Multi30k folder)")
    inputs = {(split, lang): corpus_file(args.data_root, split, lang) for split in ("train", *KEPT)
              for lang in (SRC, TGT)}  # fmt: skip
    trains = [args.out / f"train.{lang}.gz" for lang in (SRC, TGT)]
    kept = {args.out / found.name: found for (split, _), found in inputs.items() if split != "train"}  # copy -> input
    # an OUT that is the corpus itself (or links to its files) would write over what it reads: refused first
    refuse_overlap({str(path): path for path in [*trains, *kept]}, inputs.values())
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    sources, references = read_lines(inputs["train", SRC]), read_lines(inputs["train", TGT])
    if len(sources) != len(references):
        raise SystemExit(f"distil_data: train.{SRC} has {len(sources):,} lines, train.{TGT} {len(references):,}")
    sources, references = sources[: args.limit], references[: args.limit]
    taught = teach(sources, args.out / f"teacher.{TGT}", shlex.split(args.teacher))
    for path, text in zip(trains, (sources + sources, references + taught), strict=True):
        write_bytes(path, gzip.compress(("\n".join(text) + "\n").encode("utf-8")))
    for copy, found in kept.items():
        write_bytes(copy, found.read_bytes())
    # a student's model file says whose translations it learned (text_attn.core.data_note)
    files = files_named(teacher_files(args.teacher, model_path))  # which weights, should a bundled file be replaced
    write_data_note(args.out, f"train: the pairs, then the same sources again with a teacher's translations: "
                    f"{teacher_named('translate', args.teacher)}{', model files ' + files if files else ''} "
                    "(sequence-level distillation); val and test as they were")  # fmt: skip
    links, pairs = args.out / "train-links.txt", args.out / "train-links.pairs-sha256"
    # the links are of these pairs: a digest of them kept beside (links of the same count were kept after the
    # teacher's translations changed, each line then off against its pair)
    digest = hashlib.sha256(
        "\0".join(["\n".join(sources + sources), "\n".join(references + taught)]).encode()
    ).hexdigest()
    current = pairs.is_file() and pairs.read_text().strip() == digest
    if not (links.is_file() and len(lines(links)) == 2 * len(sources) and current):
        links.unlink(missing_ok=True)
        pairs.unlink(missing_ok=True)
        aligned = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "word_align.py"), *map(str, trains),
                                  "--out", str(links)])  # fmt: skip
        if aligned.returncode:
            raise SystemExit(f"distil_data: word_align.py failed (exit {aligned.returncode}; its message above)")
        write_bytes(pairs, (digest + "\n").encode())
    same = sum(a.strip() == b.strip() for a, b in zip(taught, references, strict=True))
    words = sum(len(t.split()) for t in taught), sum(len(r.split()) for r in references)
    print(f"teacher: {same:,} of {len(sources):,} translations ({same / len(sources):.1%}) are the reference exactly; "
          f"{words[0]:,} words against the references' {words[1]:,} ({words[0] / words[1]:.3f}x)")  # fmt: skip
    print(f"wrote {args.out}: train of {2 * len(sources):,} pairs, its links, val and test copied, in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))

"""Flickr8k for sequence-level distillation (Kim & Rush 2016) of the bundled captioner's two decoders into one: the
same photos and split, each train photo's captions replaced by (or joined with) the ensemble's own caption of it
(configs/caption/flickr8k_distilled.yaml trains the student on it).

    python benchmarks/caption_distil_data.py --data-root ../shared/data/flickr8k --out runs/f8k-distilled
    caption-train fit --config configs/caption/flickr8k_distilled.yaml --data.root runs/f8k-distilled

Writes into OUT, in Flickr8k's original layout (so that `caption-train`'s flickr8k source reads it, standard split):
1. ``teacher.jsonl``: ``caption - --jsonl OUT/teacher.jsonl --resume`` of the train photos, the teacher being the
   bundled captioner at its recorded decoding (``--teacher`` to name another; ``teacher-options.txt`` keeps what it
   was, its options and its model files' digests, and another teacher in the same OUT is refused, the bundled file of
   another day too): ~5 minutes on 2 cores for 6,000 photos; a run cut off goes on
   where it stopped;
2. ``Flicker8k_Dataset``: a link to the dataset's photo folder (nothing copied);
3. ``Flickr8k_text/``: the three split files copied, and ``Flickr8k.token.txt`` with the val and test photos' five
   references as they were (choices stay on Flickr8k's own val; test stays untouched) and each train photo's captions
   as ``--train-captions`` says: ``teacher`` (the teacher's caption alone, ``--copies`` times) or ``both`` (the five
   references, then the teacher's caption ``--copies`` times);
4. ``data-note.txt``: whose the train captions are, one line that a student trained on OUT records beside its training
   data (``data note:`` in ``caption --model-info``; text_attn.core.data_note).
Prints how often the teacher's caption is one of the photo's references, and its length against theirs.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import console_script, distil_parser, files_named, teacher_files, teacher_named  # noqa: E402

from captioning.model.bundled import model_path  # noqa: E402
from captioning.model.reading import caption_tokens  # noqa: E402
from captioning.training.readers import (  # noqa: E402
    ORIGINAL_IMAGES,
    ORIGINAL_TEXT,
    SPLIT_FILES,
    TOKEN_FILE,
    read_token_file,
)
from text_attn.core.data_note import write_data_note  # noqa: E402
from text_attn.core.errors import positive_int  # noqa: E402
from text_attn.core.safe_files import refuse_overlap, write_bytes  # noqa: E402

MIXES = ("teacher", "both")


def split_names(text_dir: Path) -> dict[str, list[str]]:
    """{split: photo names in its file's order} from the original layout's split files (blank lines skipped)."""
    names = {}
    for split, file in SPLIT_FILES.items():
        path = text_dir / file
        if not path.is_file():
            raise SystemExit(f"caption_distil_data: {path}: not found (--data-root: Flickr8k in its original layout)")
        names[split] = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    return names


def references(token_file: Path, images: Path) -> dict[str, list[str]]:
    """{photo name: its reference captions as written}, in file order, for the photos in the folder ``images`` (the
    reader's own parsing of ``name#n<TAB>caption`` lines: captioning.training.readers.read_token_file)."""
    if not token_file.is_file():
        raise SystemExit(f"caption_distil_data: {token_file}: not found")
    return read_token_file(token_file, {p.name for p in images.iterdir()}, read=str.strip)


def read_teacher(path: Path) -> dict[str, str]:
    """{photo name: the teacher's caption} from caption's JSON lines (a record without a caption, or a line cut off
    mid-write, is left out)."""
    got = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # half a line, left by a run cut off (caption --resume writes it again)
                continue
            if isinstance(record, dict) and record.get("caption"):
                got[Path(record["image"]).name] = record["caption"]
    return got


def teach(photos: list[Path], out: Path, teacher: list[str]) -> dict[str, str]:
    """The teacher's caption of every photo: those out lacks captioned by ``caption - --jsonl out --resume``, then out
    read back."""
    have = read_teacher(out)
    missing = [p for p in photos if p.name not in have]
    if missing:
        command = [console_script("caption"), "-", *teacher, "--jsonl", str(out), "--resume"]
        print(f"captioning {len(missing):,} of {len(photos):,} photos: {' '.join(command[1:])}", file=sys.stderr)
        done = subprocess.run(command, input="\n".join(map(str, missing)) + "\n", text=True, stdout=subprocess.DEVNULL)
        if done.returncode:
            raise SystemExit(f"caption_distil_data: caption failed (exit {done.returncode}; its message above)")
    got = read_teacher(out)
    lost = [p.name for p in photos if p.name not in got]
    if lost:
        raise SystemExit(f"caption_distil_data: {out} has no caption for {len(lost):,} photos (first {lost[0]})")
    return got


def token_lines(names: dict[str, list[str]], refs: dict[str, list[str]], taught: dict[str, str], mix: str,
                copies: int) -> list[str]:  # fmt: skip
    """The new token file's lines: train photos as ``mix`` says, val and test photos' references as they were."""
    lines = []
    for split, photos in names.items():
        for name in photos:
            if name not in refs:  # a split file's name with no caption (the real files list a few): left out
                continue
            caps = refs[name] if split != "train" or mix == "both" else []
            if split == "train":
                caps = caps + [taught[name]] * copies
            lines += [f"{name}#{n}\t{cap}" for n, cap in enumerate(caps)]
    return lines


def note(teacher: str, mix: str, copies: int, files: str = "") -> str:
    """The folder's data note (text_attn.core.data_note): a student's model file says whose captions it learned;
    ``files``: the teacher's model files, named with their digests (_runs.files_named)."""
    who = teacher_named("caption", teacher) if teacher.strip() else "the bundled captioner at its recorded decoding"
    who += f", model file {files}" if files else ""
    times = f" ({copies} copies)" if copies > 1 else ""
    what = ("the train photos' captions are not the annotators' but a teacher's" if mix == "teacher"
            else "each train photo's five captions, then a teacher's")  # fmt: skip
    return f"{what}{times}: {who} (sequence-level distillation); val and test as they were"


def main(argv: list[str] | None = None) -> int:
    p = distil_parser(__doc__, "Flickr8k in its original layout", "",
                      "caption's options naming the teacher and its decoding (default: none, the bundled captioner "
                      "at its recorded decoding)", "photos")  # fmt: skip
    p.add_argument("--train-captions", choices=MIXES, default="teacher",
                   help="a train photo's captions: the teacher's alone, or the five references and the teacher's "
                        "(default: teacher)")  # fmt: skip
    p.add_argument("--copies", type=positive_int, default=1,
                   help="how many times the teacher's caption is written (default 1)")  # fmt: skip
    args = p.parse_args(argv)
    images, text = args.data_root / ORIGINAL_IMAGES, args.data_root / ORIGINAL_TEXT
    if not images.is_dir():
        raise SystemExit(f"caption_distil_data: {images}: no such folder (--data-root: Flickr8k, original layout)")
    if args.out.resolve() == args.data_root.resolve():
        raise SystemExit("caption_distil_data: --out is --data-root: it would write over the dataset")
    out_text = args.out / ORIGINAL_TEXT
    written = [out_text / f for f in (*SPLIT_FILES.values(), TOKEN_FILE)]
    # an OUT whose files are the dataset's (a linked Flickr8k_text) would write over what it reads: refused first
    refuse_overlap({str(path): path for path in written}, [text / f for f in (*SPLIT_FILES.values(), TOKEN_FILE)])
    t0 = time.perf_counter()
    names = split_names(text)
    refs = references(text / TOKEN_FILE, images)
    names["train"] = [n for n in names["train"] if n in refs][: args.limit]
    args.out.mkdir(parents=True, exist_ok=True)
    # what teacher.jsonl was captioned with, options then model files: another teacher, another OUT (the bundled
    # captioner of 2026-12-05 replaced the one a folder of 2026-12-04 was captioned by: the same options, other weights)
    said, files = args.out / "teacher-options.txt", files_named(teacher_files(args.teacher, model_path))
    if said.is_file():
        options, _, were = (part.strip() for part in said.read_text(encoding="utf-8").partition("\n"))
        if options != args.teacher.strip() or (were and were != files):  # no files said: written before they were
            who = ", ".join(filter(None, [options or "the bundled captioner", were]))
            raise SystemExit(f"caption_distil_data: {args.out}'s captions are another teacher's ({who}): choose "
                             "another --out")  # fmt: skip
        files = files if were else ""  # captioned before the files were recorded: which weights did is not known
    write_bytes(said, f"{args.teacher.strip()}\n{files}\n".encode())
    taught = teach([images / n for n in names["train"]], args.out / "teacher.jsonl", shlex.split(args.teacher))
    link = args.out / ORIGINAL_IMAGES
    if not link.is_symlink() and not link.exists():
        os.symlink(images.resolve(), link, target_is_directory=True)
    out_text.mkdir(exist_ok=True)
    for split, file in SPLIT_FILES.items():
        write_bytes(out_text / file, ("\n".join(names[split]) + "\n").encode("utf-8"))
    lines = token_lines(names, refs, taught, args.train_captions, args.copies)
    write_bytes(out_text / TOKEN_FILE, ("\n".join(lines) + "\n").encode("utf-8"))
    write_data_note(args.out, note(args.teacher, args.train_captions, args.copies, files))
    train = names["train"]
    same = sum(caption_tokens(taught[n]) in [caption_tokens(r) for r in refs[n]] for n in train)
    words = sum(len(caption_tokens(taught[n])) for n in train)
    ref_words = sum(len(caption_tokens(r)) for n in train for r in refs[n]) / max(1, sum(len(refs[n]) for n in train))
    print(f"teacher: {same:,} of {len(train):,} captions ({same / len(train):.1%}) are one of the photo's references; "
          f"{words / len(train):.2f} words a caption against the references' {ref_words:.2f}")  # fmt: skip
    print(f"wrote {args.out}: {len(train):,} train photos ({args.train_captions}, the teacher's caption x "
          f"{args.copies}), val and test as they were, in {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))

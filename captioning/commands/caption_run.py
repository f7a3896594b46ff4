"""What a ``caption --jsonl FILE`` run's records were made with: the model file's content and the options that shape a
record (decoding, ``--given``, ``--evidence``, ``--unsure``), kept beside FILE as ``FILE.run.json``. ``--resume`` with
another model or other such options is refused: the file would otherwise hold two runs' records, told apart by
nothing.
Options that give the same records (the device, batch size, workers, ``--cuda-graphs``) are not recorded.

A FILE written before run records (2026-12-01) has records nothing can check: a ``--resume`` of it says so once and
writes a record that covers only the records from this run on (``"records_before": N, "checked": false``, N the
records FILE held), so it claims none of the earlier ones; a later ``--resume`` checks against the records it covers,
and while it covers none (FILE still holds only N records) it is as if there were none."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from text_attn.core.file_digest import sha256_of
from text_attn.core.run_record import differences as record_differences
from text_attn.core.run_record import read_record, run_file
from text_attn.core.unsure import CAPTION_UNSURE
from text_attn.core.unsure_options import unsure_typed

# the options recorded, as the command line names them (their values as given, after the model's defaults are filled)
SHAPING = (("--beam-size", "beam_size"), ("--max-len", "max_len"), ("--length-penalty", "length_penalty"),
           ("--no-repeat-ngram", "no_repeat_ngram"), ("--n-best", "n_best"), ("--sample", "sample"),
           ("--temperature", "temperature"), ("--top-k", "top_k"), ("--top-p", "top_p"),
           ("--sample-seed", "sample_seed"), ("--given", "given"), ("--given-file", "given_file"),
           ("--evidence", "evidence"), ("--unsure-below", "unsure"))  # fmt: skip


DRAWS = "draws"  # how a seed's draws are made (recorded with a --sample-seed)
# the --references read (their digest): the records' "references" fields; another file on --resume is said, not
# refused (the scores are the new file's, over every record; only the earlier records' fields are the old file's)
REFERENCES = "--references"


def run_settings(args: argparse.Namespace, model_file: Path) -> dict[str, Any]:
    """The record of this run (JSON-ready). A --sample run records its seed, given or drawn for the run
    (text_attn/core/drawn_seed.py); where none was (an older version, or processes another launcher started), none.
    --given-file is recorded by its content as it was read, as the model file is by its bytes."""
    options = {flag: getattr(args, name, None) for flag, name in SHAPING}
    if not args.sample:
        for flag in ("--temperature", "--top-k", "--top-p", "--sample-seed"):
            options.pop(flag)
    elif options["--sample-seed"] is None:
        options.pop("--sample-seed")
    else:  # a seed's draws are each photo's own since 2026-12-02; a record from before drew them as one stream
        options[DRAWS] = "each photo's own"
    if options["--given-file"] is not None:  # what check_given read from it (a FIFO or <(...) cannot be read again)
        options["--given-file"] = _digest(getattr(args, "given_by_name", None))
    if getattr(args, "references_by_name", None) is not None:
        options[REFERENCES] = _digest(args.references_by_name)
    return {"model": str(model_file), "model_sha256": sha256_of(model_file), "options": options}


def _digest(read: Any) -> str:
    """A captions file as it was read (file name -> its captions), by the SHA-256 of its JSON."""
    return hashlib.sha256(json.dumps(read, sort_keys=True).encode()).hexdigest()


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What tells ``new`` from ``old``, a phrase each ("--beam-size 5 (this run: 3)", "another model file (...)")."""
    worded = {"--unsure-below": unsure_typed(CAPTION_UNSURE)}
    said = record_differences(old, new, skip=(DRAWS, REFERENCES), worded=worded)
    was, now = old.get("options", {}), new["options"]
    # said alone where the seeds are the same (another seed is said as itself)
    if was.get(DRAWS) != now.get(DRAWS) and was.get("--sample-seed") == now.get("--sample-seed"):
        said.append("--sample-seed's draws as one stream through the run (an older version's; this run: each photo's "
                    "own)")  # fmt: skip
    return said


def records_held(jsonl: str | Path) -> int:
    """How many caption records FILE and its parts folder (``--devices``) hold (failed ones are captioned again)."""
    from captioning.photos.collection import captioned_lines  # here: the module imports torch (caption --help does not)
    from text_attn.core.part_files import held_ids

    return len(captioned_lines(Path(jsonl))) + len(held_ids(Path(f"{jsonl}.parts")))


def check_resume(jsonl: str | Path, settings: dict[str, Any], say: bool = True) -> str | None:
    """With --resume: None where FILE.run.json records this run's settings or FILE holds no records, else the line
    that refuses the resume. FILE's records with no run record (written before run records, or beyond what the record
    covers): None, one note (``say``: this process says it) and ``settings`` marked as covering only what this run
    adds (module doc). An unreadable record: OSError / ValueError (ResumeError: FILE is not caption's)."""
    path = run_file(jsonl)
    held = Path(jsonl).is_file() and Path(jsonl).stat().st_size > 0 or Path(f"{jsonl}.parts").is_dir()
    if not held:  # no records to mix (FILE removed, its record left): a fresh start
        return None
    old = read_record(path)  # a torn or hand-edited record: ValueError
    before = old.get("records_before") if old is not None and old.get("checked") is False else None
    before = before if isinstance(before, int) else None
    count = records_held(jsonl) if old is None or before is not None else 0
    if old is None or before is not None and count <= before:  # a record that covers none of them: as if none
        if count:
            settings.update(records_before=count, checked=False)
            if say:
                print(f"caption: note: --resume: {jsonl} has no run record for its {count} record(s) (written before "
                      f"2026-12-01): they cannot be checked against this model and options; {path.name} covers the "
                      "records from this run on", file=sys.stderr)  # fmt: skip
        return None
    if before is not None:  # the record covers what came after FILE's first records: it carries that on
        settings.update(records_before=before, checked=False)
    if not (said := differences(old, settings)):
        was, now = old.get("options", {}).get(REFERENCES), settings["options"].get(REFERENCES)
        if say and now is not None and was != now:  # without --references now nothing is scored: nothing to say
            how = (
                'with other --references: their "references" fields are that file\'s'
                if was is not None
                else 'without --references (or before 2026-12-07): they have no "references" field, or another\'s'
            )
            print(f"caption: note: --resume: {jsonl}'s records before this run were written {how}; the scores are "
                  "against this run's for every record", file=sys.stderr)  # fmt: skip
        return None
    which = f"records after its first {before} (which no run record covers)" if before is not None else "records"
    return (f"--resume: {jsonl}'s {which} were made with {'; '.join(said)}: resume with the same model and options, "
            f"or give another --jsonl FILE (to mix them anyway, remove {path})")  # fmt: skip

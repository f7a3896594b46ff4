"""--sample without --sample-seed draws a seed for the run, says it and records it (text_attn/core/drawn_seed.py): the
seed said draws the same outputs again, and a --resume goes on with it. (Such a run drew from torch's generator,
recorded nothing, and nothing could draw it again.)"""

from __future__ import annotations

import argparse
import json
import os
import re

import pytest
from test_search_flags import _text_model_file

from text_attn.core.drawn_seed import SEED_VARIABLE, settle_seed

SENTENCES = ["ma pipo", "deko ro su", "su su ma", "ro pipo deko", "ma ma", "pipo su ro"]


def _args(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"sample": True, "sample_seed": None, **given})


def test_a_seed_is_drawn_only_for_a_sample_run_without_one(monkeypatch, tmp_path):
    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    args = _args()
    note = settle_seed(args)
    assert isinstance(args.sample_seed, int) and 0 <= args.sample_seed < 2**32
    assert note == f"--sample drew with seed {args.sample_seed}: --sample-seed {args.sample_seed} draws the same again"
    other = _args()
    settle_seed(other)
    assert other.sample_seed != args.sample_seed  # drawn afresh each run (a 1 in 2**32 chance of a false failure)
    given, greedy = _args(sample_seed=7), _args(sample=False)
    assert settle_seed(given) is None and given.sample_seed == 7
    assert settle_seed(greedy) is None and greedy.sample_seed is None
    # another launcher's processes would each draw their own: none is drawn
    alone = _args()
    assert settle_seed(alone, alone=False) is None and alone.sample_seed is None
    # a process the first one started takes its seed, silently
    monkeypatch.setenv(SEED_VARIABLE, "123")
    started = _args()
    assert settle_seed(started, alone=False) is None and started.sample_seed == 123
    # the first process never does: a variable left in its environment (a notebook's earlier run) is no run's seed
    first = _args()
    assert settle_seed(first).startswith("--sample drew with seed") and first.sample_seed != 123


def test_a_resume_takes_the_seed_its_run_records(monkeypatch, tmp_path):
    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    out = tmp_path / "out.jsonl"
    record = tmp_path / "out.jsonl.run.json"
    record.write_text(json.dumps({"options": {"--sample": True, "--sample-seed": 99}}))
    args = _args()
    said = settle_seed(args, [out])
    assert said == "--resume goes on with the run's --sample-seed 99 (its records were drawn with it)"
    assert args.sample_seed == 99
    # a run of an older version drew without a seed: none now either (its resume check then matches, as before)
    record.write_text(json.dumps({"options": {"--sample": True}}))
    args = _args()
    assert settle_seed(args, [out]) is None and args.sample_seed is None
    # a greedy run's record, or a torn one (the resume's own check says why): a seed drawn
    for text in (json.dumps({"options": {"--sample": False}}), '{"options": {'):
        record.write_text(text)
        args = _args()
        assert settle_seed(args, [out]).startswith("--sample drew with seed") and args.sample_seed is not None


def test_translate_says_the_seed_it_drew_which_draws_the_same_again_and_a_resume_goes_on_with_it(
    monkeypatch, tmp_path, capsys
):
    from text_attn.translation.translate_cli import translate_main

    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    model = _text_model_file(tmp_path / "text.pt")
    out = tmp_path / "out.txt"
    sample = ["--model", str(model), "--sample", "--temperature", "3", "--max-len", "6"]
    assert translate_main([*sample, "--output", str(out), *SENTENCES]) == 0
    err = capsys.readouterr().err
    seed = int(re.search(r"translate: note: --sample drew with seed (\d+): --sample-seed \1 draws the same", err)[1])
    drawn = out.read_text().splitlines()
    record = json.loads((tmp_path / "out.txt.run.json").read_text())
    assert len(drawn) == 6 and record["options"]["--sample-seed"] == seed
    assert translate_main([*sample, "--sample-seed", str(seed), *SENTENCES]) == 0
    assert capsys.readouterr().out.splitlines() == drawn
    others = []
    for _ in range(3):  # unseeded runs draw other seeds: some line differs (each run's lines are its own)
        assert translate_main([*sample, *SENTENCES]) == 0
        others.append(capsys.readouterr().out.splitlines())
    assert any(lines != drawn for lines in others)
    # cut after 2 lines, resumed without a seed: the run's seed, so the lines an uninterrupted run drew
    out.write_text("".join(f"{line}\n" for line in drawn[:2]))
    assert translate_main([*sample, "--output", str(out), "--resume", *SENTENCES]) == 0
    err = capsys.readouterr().err
    assert f"translate: note: --resume goes on with the run's --sample-seed {seed}" in err and "drew with" not in err
    assert out.read_text().splitlines() == drawn


def test_caption_says_the_seed_it_drew_and_a_jsonl_resume_goes_on_with_it(monkeypatch, tmp_path, capsys):
    import random

    from captioning.commands.caption import caption_main
    from captioning.model.captioner import Captioner
    from captioning.training.shapes import make_scene

    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    size = Captioner.load("shapes").preprocess.image_size
    photos = []
    for i in range(5):
        photos.append(str(tmp_path / f"scene{i}.png"))
        make_scene(random.Random(i), size=size).image.save(photos[-1])
    sample = [*photos, "--model", "shapes", "--sample", "--temperature", "2", "--workers", "0"]

    def captions(jsonl) -> list[str]:
        return [json.loads(line)["caption"] for line in jsonl.read_text().splitlines()]

    first = tmp_path / "first.jsonl"
    assert caption_main([*sample, "--jsonl", str(first)]) == 0
    err = capsys.readouterr().err
    seed = int(re.search(r"caption: note: --sample drew with seed (\d+): --sample-seed \1 draws the same", err)[1])
    again = tmp_path / "again.jsonl"
    assert caption_main([*sample, "--sample-seed", str(seed), "--jsonl", str(again)]) == 0
    assert captions(again) == captions(first) and len(set(captions(first))) > 1
    # cut after 2 records, resumed without a seed: the run's seed goes on
    lines = first.read_text().splitlines()
    first.write_text("".join(f"{line}\n" for line in lines[:2]))
    assert caption_main([*sample, "--jsonl", str(first), "--resume", "--batch-size", "2"]) == 0
    assert f"caption: note: --resume goes on with the run's --sample-seed {seed}" in capsys.readouterr().err
    assert captions(first) == captions(again)


def test_caption_gives_its_drawn_seed_to_its_own_processes_alone(monkeypatch, tmp_path, capsys):
    """The seed went into os.environ for the processes --devices starts and stayed: every later --sample run in the
    process (a notebook's), and the programs it started, drew with it, silently."""
    from captioning.commands import caption
    from captioning.commands.caption import caption_main

    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    for name in ("LOCAL_RANK", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_SIZE", "JSM_NAMESPACE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    seen = []
    monkeypatch.setattr(caption, "_on_processes", lambda args, argv: seen.append((os.environ.get(SEED_VARIABLE),
                                                                                  args.sample_seed)) or 0)  # fmt: skip
    photo = tmp_path / "p.png"
    photo.write_bytes(b"")
    assert caption_main([str(photo), "--model", "shapes", "--sample", "--devices", "2", "--jsonl",
                         str(tmp_path / "o.jsonl")]) == 0  # fmt: skip
    assert seen[-1][0] == str(seen[-1][1])  # during the run: for the processes it starts
    assert SEED_VARIABLE not in os.environ  # after it: gone
    assert caption_main([str(photo), "--model", "shapes", "--sample", "--sample-seed", "5", "--devices", "2",
                         "--jsonl", str(tmp_path / "o.jsonl")]) == 0  # fmt: skip
    assert seen[-1] == (None, 5)  # a seed typed reaches them on their command line


def test_one_caption_process_under_a_launcher_draws_its_seed(monkeypatch, tmp_path, capsys):
    """A SLURM job sets SLURM_NTASKS: one caption process in it (no --devices) drew no seed, as if each of several
    processes would draw its own."""
    from captioning.commands.caption import caption_main

    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    monkeypatch.setenv("SLURM_NTASKS", "1")
    photo = tmp_path / "p.png"
    from PIL import Image

    Image.new("RGB", (32, 32), (200, 30, 30)).save(photo)
    assert caption_main([str(photo), "--model", "shapes", "--sample"]) == 0
    assert "caption: note: --sample drew with seed" in capsys.readouterr().err


def test_a_refused_caption_resume_says_no_seed_first(monkeypatch, tmp_path, capsys):
    """A greedy run's file resumed with --sample: the seed drawn was said, then the refusal named it as what
    differed; the refusal alone now."""
    from PIL import Image

    from captioning.commands.caption import caption_main

    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    photos = []
    for i in range(2):
        photos.append(str(tmp_path / f"p{i}.png"))
        Image.new("RGB", (32, 32), (100 * i, 30, 30)).save(photos[-1])
    out = tmp_path / "greedy.jsonl"
    assert caption_main([*photos, "--model", "shapes", "--jsonl", str(out)]) == 0
    out.write_text(out.read_text().splitlines(keepends=True)[0])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        caption_main([*photos, "--model", "shapes", "--jsonl", str(out), "--resume", "--sample"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("caption: error: --resume:"), err

"""The caption / translate flags that expose what generate() offers for every family: n-gram blocking, seeded
sampling (temperature, top-k, top-p), n-best lists with scores. (The search options themselves:
tests/core/test_search_options.py.)"""

from __future__ import annotations

import json

import pytest
import torch


# --- the command-line flags ---------------------------------------------------------------------------------------
def _text_model_file(path):
    """An untrained RNN translator over a few words, saved as a text model file."""
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
    from text_attn.translation.translator import Translator

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ma", "pipo", "deko", "ro", "su"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8, dec_hidden=8,
                        attn_dim=8)  # fmt: skip
    Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(path)
    return path


def test_translate_n_best_output_file_and_bad_combinations(tmp_path, capsys):
    from text_attn.translation.translate_cli import translate_main

    model = _text_model_file(tmp_path / "text.pt")
    out = tmp_path / "out.txt"
    args = ["--model", str(model), "--beam-size", "3", "--n-best", "2", "--output", str(out)]
    assert translate_main([*args, "ma pipo", "deko ro"]) == 0
    lines = out.read_text().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["1", "1", "2", "2"]
    assert float(lines[0].split("\t")[1]) >= float(lines[1].split("\t")[1])
    assert capsys.readouterr().out == ""
    # --n-best 1 is a list too (a script passing --n-best $N got plain lines for N = 1): its line is the list's first
    one = tmp_path / "one.txt"
    assert translate_main([*args[:4], "--n-best", "1", "--output", str(one), "ma pipo", "deko ro"]) == 0
    assert one.read_text().splitlines() == [lines[0], lines[2]]
    with pytest.raises(SystemExit):  # and, like any --n-best, it is refused beside --given (it lists the search's)
        translate_main(["--model", str(model), "--given", "ma", "--n-best", "1", "ma pipo"])
    assert "--n-best is for the translations the model writes" in capsys.readouterr().err
    # a sampler setting without --sample, and --layer for an RNN, would be ignored: refused instead
    ignored = (["--temperature", "2"], ["--top-k", "5", "--sample-seed", "1"], ["--layer", "0"])
    # nan and inf passed the range checks (NaN scores, garbage words); a seed beyond torch's range, a traceback
    unusable = (["--length-penalty", "nan"], ["--sample", "--temperature", "inf"], ["--sample", "--top-p", "nan"],
                ["--sample", "--sample-seed", str(2**64)])  # fmt: skip
    for bad in (["--sample", "--beam-size", "2"], ["--n-best", "3"], ["--top-p", "0"], *ignored, *unusable):
        with pytest.raises(SystemExit) as exc:
            translate_main(["--model", str(model), *bad, "ma"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("translate: error: ")
        if bad[0] in ("--temperature", "--top-k"):
            verb = "applies" if len(bad) == 2 else "apply"
            assert f"{' '.join(bad[::2]).replace(' ', ', ')} only {verb} with --sample" in err
        if bad in unusable:
            assert f"argument {bad[-2]}: expected a" in err
        if bad[:2] == ["--sample", "--beam-size"]:  # it said "and no --n-best", which --n-best 1 is not refused for
            assert err.endswith("use it with --beam-size 1 and --n-best 1 (or no --n-best)\n")
    # more beams than the model has words (5 + <pad> <bos> <eos> <unk>): a mistyped 100000 once filled the memory
    assert translate_main(["--model", str(model), "--beam-size", "9", "ma"]) == 0
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(model), "--beam-size", "10", "ma"])
    assert (exc.value.code, capsys.readouterr().err) == (
        2, "translate: error: --beam-size 10 is more than the model's 9 words: at most 9\n")  # fmt: skip
    # a --max-len no sentence could be searched at: said once for the option (it was an error per line, naming the line)
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(model), "--max-len", "1000000000", "ma", "pipo"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith("translate: error: --max-len 1000000000: the search at beam 1 would need about 15 GiB")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (["--top-p", "2"], "--top-p must be more than 0 and at most 1, got 2"),
        (["--top-p", "0"], "--top-p must be more than 0 and at most 1, got 0"),
        (["--temperature", "-0.5"], "--temperature must be more than 0, got -0.5"),
        (["--top-k", "-1"], "--top-k must be 0 or more, got -1"),
    ],
)
def test_a_sampler_value_out_of_range_names_its_option_and_value(bad, says, capsys):
    """One line listed all three ranges ("--temperature must be > 0, --top-k >= 0 and --top-p in (0, 1]") for any one
    of them: the reader had to find which. Checked on the options alone, before any model loads."""
    from text_attn.core.search_options import check_search_options, fill_decoding_defaults
    from text_attn.translation.translate_parser import translate_parser

    args = translate_parser().parse_args(["--sample", *bad])
    fill_decoding_defaults(args, {})
    with pytest.raises(SystemExit) as exc:
        check_search_options("translate", args)
    assert (exc.value.code, capsys.readouterr().err) == (2, f"translate: error: {says}\n")


def test_sample_seed_help_names_each_commands_own_options(capsys):
    """translate's help said the seed repeats at any --devices, --workers and in a --resume: options it does not
    have."""
    from captioning.commands.caption_parser import _parser as caption_parser
    from text_attn.translation.translate_parser import translate_parser

    def seed_help(parser) -> str:
        return next(a.help for a in parser._actions if "--sample-seed" in a.option_strings)

    translate, caption = seed_help(translate_parser()), seed_help(caption_parser())
    assert "(keyed by its number) at any --batch-size;" in translate
    assert not [flag for flag in ("--devices", "--workers", "photo", "--num-nodes") if flag in translate]
    # both resume with the seed their run records (one drawn for the run, where none is given)
    assert all("a --resume goes on with the seed its run records" in h for h in (translate, caption))
    assert "(keyed by its photo's name) at any --batch-size, --devices, --workers and in a --resume" in caption


@pytest.mark.parametrize("command", ["caption", "translate"])
def test_the_sampler_and_n_best_help_give_the_default_a_run_uses(command):
    """--temperature, --top-k, --top-p and --n-best said no default in --help (1.0, 0, 1.0 and 1)."""
    import re

    from captioning.commands.caption_parser import _parser as caption_parser
    from text_attn.core.search_options import fill_decoding_defaults
    from text_attn.translation.translate_parser import translate_parser

    parser = caption_parser() if command == "caption" else translate_parser()
    args = parser.parse_args(["x"])
    fill_decoding_defaults(args, {})  # what the run fills in for options left out
    for flag, dest in (("--temperature", "temperature"), ("--top-k", "top_k"), ("--top-p", "top_p"),
                       ("--n-best", "n_best")):  # fmt: skip
        said = next(a.help for a in parser._actions if flag in a.option_strings)
        found = re.search(r"default: ([0-9.]+)", said)
        assert found and float(found.group(1)) == getattr(args, dest), (flag, said)


def test_caption_seed_beside_sample_points_to_sample_seed(tmp_path, capsys):
    """--seed is --demo shapes' scene seed; given with --sample it was refused without naming the option meant."""
    from captioning.commands.caption import caption_main

    (tmp_path / "photo.jpg").write_bytes(b"")
    for argv, says in (
        (["--sample", "--seed", "1"], "--seed only applies to --demo shapes (the seed of --sample's draws is "
                                      "--sample-seed)"),
        (["--seed", "1"], "--seed only applies to --demo shapes"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            caption_main([*argv, str(tmp_path / "photo.jpg")])
        assert (exc.value.code, capsys.readouterr().err) == (2, f"caption: error: {says}\n")


@pytest.mark.long
def test_caption_n_best_and_seeded_sampling(capsys, tmp_path, monkeypatch):
    from captioning.commands.caption import caption_main

    monkeypatch.chdir(tmp_path)  # the demo's overlay goes to caption-demo/ here, not into the checkout

    def run(*args):
        assert caption_main(["--demo", "shapes", "--seed", "5", "--json", *args]) == 0
        return json.loads(capsys.readouterr().out)[0]

    rec = run("--beam-size", "4", "--n-best", "3")
    # plain: the list under the caption, a line each as caption --n-best writes it (it was refused without --json)
    assert caption_main(["--demo", "shapes", "--seed", "5", "--beam-size", "4", "--n-best", "3"]) == 0
    listed = [line.removeprefix("n-best:").strip() for line in capsys.readouterr().out.splitlines()
              if line.startswith("n-best:")]  # fmt: skip
    assert listed == [
        f"{a['score']:.4f}\t{a['caption']}\t{'cut' if a['truncated'] else 'ended'}" for a in rec["n_best"]
    ]
    with pytest.raises(SystemExit) as exc:
        caption_main(["--demo", "shapes", "--beam-size", "100000"])
    assert exc.value.code == 2 and "--beam-size 100000 is more than the model's" in capsys.readouterr().err
    assert len(rec["n_best"]) == 3 and rec["n_best"][0]["caption"] == rec["caption"]
    assert rec["n_best"][0]["score"] == pytest.approx(rec["score"], abs=1e-5)
    one, two = run("--sample", "--sample-seed", "1", "--temperature", "2"), run("--sample", "--sample-seed", "1",
                                                                                  "--temperature", "2")  # fmt: skip
    assert one["caption"] == two["caption"] and "n_best" not in one


GERMAN = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch im Park.",
    "Kinder spielen am Strand.",
    "Ein Mann in einem roten Hemd kocht.",
    "Eine Gruppe von Menschen steht vor einem Gebäude.",
    "Ein kleines Mädchen isst ein Eis.",
    "Ein Hund rennt über eine Wiese.",
    "Zwei Männer sitzen auf einer Bank.",
    "Eine Frau fährt mit dem Auto in die Stadt.",
]


@pytest.mark.long
def test_translate_seeded_samples_are_each_inputs_own_at_any_batch_size(capsys):
    """--sample-seed draws each input's words from (seed, its number, the step): the same lines whether the inputs
    are translated one at a time or together (the run-long stream gave most of them others)."""
    from text_attn.translation.translate_cli import translate_main

    def run(batch: str, *sentences: str) -> list[str]:
        args = ["--model", "bahdanau", "--sample", "--sample-seed", "5", "--temperature", "1.5", "--batch-size", batch]
        assert translate_main([*args, *sentences]) == 0
        return capsys.readouterr().out.splitlines()

    together = run("16", *GERMAN)
    assert run("1", *GERMAN) == together and len(together) == 10
    assert run("3", *GERMAN[::-1])[::-1] != together  # an input's number is its key: reordered, each draws anew
    assert run("4", *GERMAN[:4]) == together[:4]  # the first inputs draw alike whatever follows them


@pytest.mark.long
def test_caption_seeded_samples_are_each_photos_own_at_any_batch_size_and_after_a_resume(capsys, tmp_path):
    """--sample-seed draws each photo's words from (seed, its name, the step): the same captions at --batch-size 1
    and 4, under --devices, and in a --resume of a --jsonl run cut short (its photos then sat elsewhere in the
    batches)."""
    import random

    from captioning.commands.caption import caption_main
    from captioning.model.captioner import Captioner
    from captioning.training.shapes import make_scene

    size = Captioner.load("shapes").preprocess.image_size
    photos = []
    for i in range(7):
        photos.append(str(tmp_path / f"scene{i}.png"))
        make_scene(random.Random(i), size=size).image.save(photos[-1])
    sample = ["--model", "shapes", "--sample", "--sample-seed", "5", "--temperature", "2", "--workers", "0"]

    def run(jsonl, *args: str) -> dict[str, str]:
        assert caption_main([*photos, *sample, "--jsonl", str(jsonl), *args]) == 0, capsys.readouterr().err
        records = [json.loads(line) for line in jsonl.read_text().splitlines()]
        return {r["image"]: r["caption"] for r in records}

    four = run(tmp_path / "four.jsonl", "--batch-size", "4")
    assert len(four) == 7 and len(set(four.values())) > 1
    assert run(tmp_path / "one.jsonl", "--batch-size", "1") == four
    assert run(tmp_path / "lightning.jsonl", "--devices", "1", "--batch-size", "3") == four  # the --devices loop
    # a run cut after 2 photos, resumed: the other 5 are batched from the third on, as they were not before
    cut = tmp_path / "four.jsonl"
    cut.write_text("".join(line + "\n" for line in cut.read_text().splitlines()[:2]))
    assert run(cut, "--batch-size", "4", "--resume") == four

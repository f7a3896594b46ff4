"""translate on long inputs, --plot at scale and progress off a terminal (audit of 2026-12). A line of several
sentences was cut to about one, silently, and searched to 2 x (its tokens + 1) + 10 steps (a 500-word line: 57 s,
2.8 GB); --plot drew every picture after the last sentence from results kept in memory, a line each, none after a
Ctrl-C; --references scored nothing after a Ctrl-C; under nohup nothing was said for a whole run."""

from __future__ import annotations

import re
import sys
from types import SimpleNamespace

import pytest
import torch
from helpers.multi30k import DE, EN, write_corpus
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.core.modelfile import ModelFileError
from text_attn.translation import translate_cli
from text_attn.translation import translator as translator_module
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.source_check import LONG_INPUT
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def test_the_training_lengths_are_recorded_and_a_bad_record_refused(tmp_path, model_file):
    dm = TranslationDataModule(task="pair", root=str(write_corpus(tmp_path / "c")), src_lang="de", tgt_lang="en",
                               tokenizer="subword", subword_vocab=300)  # fmt: skip
    dm.setup("fit")
    train = [i % len(DE) for i in range(6)]  # write_corpus's 6 training pairs
    src = max(len(dm.codec.encode(DE[i], "source")) for i in train)
    tgt = max(len(dm.codec.encode(EN[i], "target")) for i in train)
    assert dm.source_check["lengths"]["source_max"] == src and dm.source_check["lengths"]["target_max"] == tgt
    lengths = Translator.load(model_file).trained_lengths
    assert set(lengths) == {"source_max", "source_p99", "target_max", "target_p99"}
    data = torch.load(model_file, weights_only=True)
    data["source_check"]["lengths"] = {**lengths, "source_max": "long"}
    torch.save(data, tmp_path / "bad.pt")
    with pytest.raises(ModelFileError, match="source_check"):
        Translator.load(tmp_path / "bad.pt")


def _spied(monkeypatch) -> list[dict]:
    """Each search's max_len and per-row caps (search(model, state, batch, bos, eos, max_len, ...))."""
    calls, real = [], translator_module.search

    def spy(*a, **k):
        row = k.get("row_max_len")
        calls.append({"max_len": a[5], "rows": None if row is None else row.tolist()})
        return real(*a, **k)

    monkeypatch.setattr(translator_module, "search", spy)
    return calls


def test_a_long_input_gets_one_note_and_a_capped_search_the_others_their_own(model_file, capsys, monkeypatch):
    translator = Translator.load(model_file)
    longest, target = translator.trained_lengths["source_max"], translator.trained_lengths["target_max"]
    joined = " ".join(DE * 3)  # several sentences on one line
    n_long = len(translator.codec.encode(joined, "source"))
    assert n_long > longest
    calls = _spied(monkeypatch)
    given = ["--model", str(model_file), DE[0], joined, DE[1], joined, "--batch-size", "4"]
    assert translate_main([*given, "--no-split"]) == 0  # each line whole, as translated before lines were split
    own = [2 * (len(translator.codec.encode(s, "source")) + 1) + 10 for s in (DE[0], DE[1])]
    cap = 2 * target + 10
    assert calls[0]["rows"] == [own[0], cap, own[1], cap] and cap < 2 * (n_long + 1) + 10
    notes = [line for line in capsys.readouterr().err.splitlines() if "longer than" in line]
    assert notes == [f"translate: note: inputs 2, 4: longer than any sentence the model learned from (the longest: "
                     f"{longest} tokens): translated as one sentence each, their output capped at {cap} tokens; split "
                     "them into sentences (one a line)"]  # fmt: skip
    calls.clear()  # an explicit --max-len wins
    assert translate_main(["--model", str(model_file), joined, "--max-len", "300", "--no-split"]) == 0
    assert calls == [{"max_len": 300, "rows": None}]
    assert "split it into sentences" in capsys.readouterr().err
    calls.clear()  # by default each sentence of a line is translated on its own: its own cap, and no note
    assert translate_main(given) == 0
    each = [2 * (len(translator.codec.encode(s, "source")) + 1) + 10 for s in DE * 3]
    assert calls == [{"max_len": max(own + each), "rows": [own[0], *each, own[1], *each]}]
    assert "longer than" not in capsys.readouterr().err


def test_a_file_without_the_record_takes_a_fixed_bound(model_file, tmp_path, capsys):
    data = torch.load(model_file, weights_only=True)
    del data["source_check"]["lengths"]  # a model file from before the record (the bundled ones)
    torch.save(data, tmp_path / "old.pt")
    old = Translator.load(tmp_path / "old.pt")
    assert old.trained_lengths is None and old.longest_source() == LONG_INPUT
    assert old.default_steps(LONG_INPUT) == 2 * (LONG_INPUT + 1) + 10 == old.default_steps(10 * LONG_INPUT)
    assert translate_main(["--model", str(tmp_path / "old.pt"), "Hund " * (LONG_INPUT + 1), "--max-len", "2"]) == 0
    assert f"input 1: longer than {LONG_INPUT} tokens" in capsys.readouterr().err


def test_plots_are_drawn_as_batches_are_written_and_a_ctrl_c_keeps_them_and_scores(model_file, tmp_path, capsys,
                                                                                   monkeypatch):  # fmt: skip
    calls, real = {"n": 0}, Translator.translate_tokens

    def interrupted(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:  # the third batch: the first two batches' pictures are there already
            assert sorted(p.name for p in tmp_path.glob("g-*.png")) == [f"g-{n}.png" for n in (1, 2, 3, 4)]
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(Translator, "translate_tokens", interrupted)
    refs = tmp_path / "refs.en"
    refs.write_text("".join(f"{EN[i % 2]}\n" for i in range(6)), encoding="utf-8")
    args = ["--model", str(model_file), *(DE[i % 2] for i in range(6)), "--batch-size", "2", "--max-len", "3", "--plot",
            str(tmp_path / "g.png"), "--references", str(refs), "--scores", str(tmp_path / "s.json")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        translate_main(args)
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 130
    assert f"wrote 4 plots {tmp_path / 'g-1.png'} ... {tmp_path / 'g-4.png'}" in err
    assert sum(line.startswith("wrote") for line in err) == 2  # the plots' line and the --scores file's
    assert any(line.startswith("translate: scores against --references") and "4 input(s) written before the "
               "interrupt" in line for line in err), err  # fmt: skip
    assert (tmp_path / "s.json").is_file() and err[-1] == "translate: interrupted after 4 input(s)"


def test_a_ctrl_c_while_a_batchs_pictures_are_drawn_keeps_every_picture_of_its_lines(model_file, tmp_path, capsys,
                                                                                     monkeypatch):  # fmt: skip
    """The batch's pictures were taken off the queue before they were drawn: interrupted after its first picture,
    its lines were written and the rest of its pictures lost (6 pictures for 8 lines)."""
    from text_attn.translation import plot_files

    calls, real = {"n": 0}, plot_files.draw

    def draw(path, tr, net):
        calls["n"] += 1
        if calls["n"] == 3:  # the second batch's first picture
            raise KeyboardInterrupt
        return real(path, tr, net)

    monkeypatch.setattr(plot_files, "draw", draw)
    args = ["--model", str(model_file), *(DE[i % 2] for i in range(6)), "--batch-size", "2", "--max-len", "3", "--plot",
            str(tmp_path / "g.png")]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        translate_main(args)
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 130 and err[-1] == "translate: interrupted after 4 input(s)"
    assert sorted(p.name for p in tmp_path.glob("g-*.png")) == [f"g-{n}.png" for n in (1, 2, 3, 4)]
    assert f"wrote 4 plots {tmp_path / 'g-1.png'} ... {tmp_path / 'g-4.png'}" in err


def test_one_line_on_stdin_at_batch_size_one_gets_the_plain_name(model_file, tmp_path, capsys, monkeypatch):
    stdin = tmp_path / "in.de"
    for lines, names in (([DE[0]], ["g.png"]), ([DE[0], DE[1]], ["g-1.png", "g-2.png"])):
        for old in tmp_path.glob("g*.png"):
            old.unlink()
        stdin.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        with stdin.open(encoding="utf-8") as f:
            monkeypatch.setattr("sys.stdin", f)
            assert translate_main(["--model", str(model_file), "--batch-size", "1", "--max-len", "3", "--plot",
                                   str(tmp_path / "g.png")]) == 0  # fmt: skip
        assert sorted(p.name for p in tmp_path.glob("g*.png")) == names
    capsys.readouterr()


def test_off_a_terminal_a_line_now_and_then_and_a_file_gives_the_bar_a_total(model_file, tmp_path, capsys,
                                                                              monkeypatch):  # fmt: skip
    stdin = tmp_path / "in.de"
    stdin.write_text("".join(f"{DE[i % 2]}\n" for i in range(4)), encoding="utf-8")
    monkeypatch.setattr(translate_cli, "NEWS_EVERY_S", 0.0)  # a line at every batch, not a minute apart
    with stdin.open(encoding="utf-8") as f:
        monkeypatch.setattr("sys.stdin", f)
        assert translate_main(["--model", str(model_file), "--batch-size", "2", "--max-len", "3"]) == 0
    news = [line for line in capsys.readouterr().err.splitlines() if "written," in line]
    # the lines taken, not the file's offset: that runs a 64 KiB read ahead, 100% after the first batch of a small file
    assert [re.sub(r"[\d.]+ a second", "R a second", line) for line in news] == [
        f"translate: {n} input(s) written, R a second, {share} of the input read"
        for n, share in ((2, "50%"), (4, "100%"))
    ]
    bars = []
    import tqdm.auto

    class Bar(tqdm.auto.tqdm):
        def __init__(self, *a, **k):
            bars.append(self)
            super().__init__(*a, **k)

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: the bar, not the lines
    with stdin.open(encoding="utf-8") as f:
        monkeypatch.setattr("sys.stdin", f)
        assert translate_main(["--model", str(model_file), "--batch-size", "2", "--max-len", "3"]) == 0
    assert bars[0].total == stdin.stat().st_size and bars[0].n == stdin.stat().st_size  # bytes: an ETA


def test_validation_caps_a_long_source_as_translate_does():
    # one checkpoint, one score: validation searched a source longer than every training one to its own 2 x n + 10
    # where translate stopped it at 2 x the longest training target + 10
    from text_attn.translation.objective import decode_caps

    lengths = {"source_max": 20, "source_p99": 15, "target_max": 18, "target_p99": 14}
    src_lens = torch.tensor([5, 21, 22, 150])  # the end token counted: 4, 20, 21 and 149 source tokens
    assert decode_caps(src_lens, lengths).tolist() == [20, 52, 46, 46]  # over 20 tokens: 2 x 18 + 10
    assert decode_caps(src_lens).tolist() == [20, 52, 54, 212]  # no record: over LONG_INPUT tokens, 2 x 101 + 10
    old = SimpleNamespace(trained_lengths=None, position_limit=None)
    assert [Translator.default_steps(old, n - 1) for n in src_lens.tolist()] == decode_caps(src_lens).tolist()


def test_a_plot_folder_that_takes_no_file_is_refused_before_the_work(model_file, tmp_path, capsys, monkeypatch):
    """It was said after the translations were written (exit 2 with the work done); now before the model loads."""

    def refuse(folder):
        raise PermissionError(1, "Operation not permitted", str(folder))

    monkeypatch.setattr(translate_cli, "probe_writable", refuse)
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(model_file), DE[0], "--plot", str(tmp_path / "p.png")])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == ""
    assert (
        err.strip() == f"translate: error: cannot write --plot {tmp_path / 'p.png'}: [Errno 1] Operation not "
        f"permitted: '{tmp_path}'"
    )

"""text-train through its LightningCLI, and translate on the model file it writes (plus bad input)."""

import json
from pathlib import Path

import pytest
import torch

from text_attn.translation.train_cli import text_train_cli, train_main
from text_attn.translation.translate_cli import translate_main

CONFIG = str(Path(__file__).parent.parent / "fixtures/text/tiny_reorder.yaml")


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path, monkeypatch):
    """LightningCLI saves its config.yaml in the working directory when there is no logger."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "model.pt"
    train_main(
        ["fit", "--config", CONFIG, "--model.export_path", str(out), "--trainer.default_root_dir", str(out.parent)]
    )
    return out


def test_fit_writes_a_self_contained_model_file(model_file):
    data = torch.load(model_file, weights_only=True)
    assert data["format"] == "attention-toolkit/text-model"
    assert data["arch"] == "rnn" and data["config"]["attention"] == "bahdanau"
    assert data["src_vocab"]["lines"].split("\n")[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]  # one string
    json.dumps({k: v for k, v in data.items() if k != "state_dict"})  # metadata is plain JSON


def test_translate_prints_one_line_per_input_and_plots(model_file, tmp_path, capsys):
    png = tmp_path / "grid.png"
    rc = translate_main(
        ["--model", str(model_file), "--beam-size", "2", "--plot", str(png), "ma pipo deko ro gotu", "ro gake kade"]
    )
    out = capsys.readouterr()
    assert rc == 0
    assert len(out.out.strip().splitlines()) == 2
    assert (tmp_path / "grid-1.png").stat().st_size > 0 and (tmp_path / "grid-2.png").exists()


def test_translate_plot_names_characters_no_font_has_once(model_file, tmp_path, capsys, monkeypatch):
    """Labels in a script no installed font has: one note for the whole run, not one warning per picture and
    character (here every font but a symbol font is hidden, so the model's Latin tokens are that script)."""
    import warnings

    from matplotlib import font_manager

    from text_attn.core import fonts

    symbols = font_manager.findfont(font_manager.FontProperties(family="STIXSizeFourSym"))
    monkeypatch.setattr(fonts, "_fonts", lambda bold: (("STIXSizeFourSym", symbols),))
    monkeypatch.setattr(fonts, "_rescan", lambda: False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rc = translate_main(["--model", str(model_file), "--plot", str(tmp_path / "g.png"), "ma pipo", "ro gake"])
    err = capsys.readouterr().err
    assert rc == 0 and (tmp_path / "g-1.png").exists() and (tmp_path / "g-2.png").exists()
    assert err.count("in no installed font") == 1 and "translate: note: --plot:" in err
    assert not [w for w in seen if issubclass(w.category, fonts.GlyphWarning)]


def test_translate_bad_input_gets_one_clear_line(model_file, tmp_path, capsys, monkeypatch):
    # a line that is not UTF-8 among good ones: the good one is still translated, exit code 1
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("ma pipo\n\udcff\n"))
    assert translate_main(["--model", str(model_file)]) == 1
    out = capsys.readouterr()
    assert len(out.out.strip().splitlines()) == 1
    assert "input 2: not valid UTF-8 text" in out.err and "Traceback" not in out.err
    # unknown words: a note, still translated
    assert translate_main(["--model", str(model_file), "qqq ma"]) == 0
    assert "unknown word(s) qqq" in capsys.readouterr().err
    # missing file and a file that is not a model: one line, exit 2
    not_model = tmp_path / "notes.txt"
    not_model.write_text("hello")
    plain = tmp_path / "plain.pt"
    torch.save({"a": torch.zeros(1)}, plain)
    for path, msg in [
        (tmp_path / "none.pt", "not found"),
        (not_model, "not a model file"),
        (plain, "expected a text-model file"),
    ]:
        with pytest.raises(SystemExit) as exc:
            translate_main(["--model", str(path), "x"])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0]


def test_text_train_reports_bad_options_in_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        train_main(["fit", "--config", CONFIG, "--model.network", "{attention: cosine}"])
    assert exc.value.code == 2
    assert "unknown attention 'cosine'" in capsys.readouterr().err


def test_test_subcommand_reports_free_running_bleu_by_length_and_alignment():
    cli = text_train_cli(["test", "--config", CONFIG, "--ckpt_path", "null"])  # untrained weights, on purpose
    metrics = cli.trainer.callback_metrics
    for key in ("test_loss", "test_bleu", "test_align_acc", "test_bleu_5-10"):
        assert key in metrics, key
    assert 0.0 <= float(metrics["test_bleu"]) <= 1.0 and 0.0 <= float(metrics["test_align_acc"]) <= 1.0

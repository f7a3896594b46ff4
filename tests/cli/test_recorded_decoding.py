"""A model file may record the decoding chosen for it on validation data (``info["decoding"]``, written by the
tuning benchmarks): ``caption`` and ``translate`` use it when --beam-size / --length-penalty are not given, and an
explicit flag still wins. (Which recorded values are valid: tests/core/test_decoding_defaults.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from text_attn.core.modelfile import ModelFileError, update_info

SHAPES = Path(__file__).resolve().parents[2] / "captioning" / "assets" / "shapes_soft.pt"


def _text_model_file(path):
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
    from text_attn.translation.translator import Translator

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ma", "pipo", "deko", "ro", "su"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8, dec_hidden=8,
                        attn_dim=8)  # fmt: skip
    Translator(Seq2Seq(cfg), vocab, vocab, "word", True, info={"terms": "test"}).save(path)
    return path


def test_update_info_merges_and_keeps_the_weights(tmp_path):
    from text_attn.translation.translator import Translator

    path = _text_model_file(tmp_path / "m.pt")
    before = torch.load(path, weights_only=True)
    info = update_info(path, {"decoding": {"beam_size": 4, "length_penalty": 0.5}})
    assert info == {"terms": "test", "decoding": {"beam_size": 4, "length_penalty": 0.5}}
    after = torch.load(path, weights_only=True)
    assert after["info"] == info and not list(tmp_path.glob("*.part"))
    for name, value in before["state_dict"].items():
        assert torch.equal(value, after["state_dict"][name])
    assert Translator.load(path).info["decoding"]["beam_size"] == 4
    (tmp_path / "x.pt").write_bytes(b"not a model")
    with pytest.raises(ModelFileError):
        update_info(tmp_path / "x.pt", {"decoding": {}})


def test_translate_uses_the_recorded_decoding_and_a_flag_wins(tmp_path, capsys):
    from text_attn.translation.translate_cli import translate_main

    plain = _text_model_file(tmp_path / "plain.pt")
    tuned = tmp_path / "tuned.pt"
    shutil.copy(plain, tuned)
    update_info(tuned, {"decoding": {"beam_size": 3, "length_penalty": 1.0}})
    out = tmp_path / "out.txt"

    def run(model, *flags):
        assert translate_main(["--model", str(model), "--output", str(out), *flags, "ma pipo", "deko ro su"]) == 0
        return out.read_text()

    # --n-best 3 needs a beam of 3: the tuned file's default beam gives it, the plain file's (1) does not
    assert run(tuned, "--n-best", "3") == run(plain, "--beam-size", "3", "--length-penalty", "1", "--n-best", "3")
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(plain), "--n-best", "3", "ma"])
    assert exc.value.code == 2 and "--beam-size (1)" in capsys.readouterr().err
    # greedy: the same words; the score divided by length**penalty, the recorded penalty's, as a beam's is
    assert run(tuned, "--beam-size", "1", "--n-best", "1") == run(plain, "--n-best", "1", "--length-penalty", "1")
    capsys.readouterr()  # the runs' notes (an untrained model's outputs reach the length cap)
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(tuned), "--length-penalty", "-1", "ma"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err == "translate: error: --length-penalty must be 0 or more, got -1.0\n"


@pytest.mark.long
def test_caption_uses_the_recorded_decoding_and_model_info_says_it(tmp_path, capsys, monkeypatch):
    from captioning.commands.caption import caption_main

    monkeypatch.chdir(tmp_path)  # the demo's overlay goes to caption-demo/ here, not into the checkout

    tuned = tmp_path / "shapes.pt"
    shutil.copy(SHAPES, tuned)
    update_info(
        tuned, {"decoding": {"beam_size": 4, "length_penalty": 1.5, "no_repeat_ngram": 2, "chosen_by": "a test"}}
    )

    def run(model, *flags):
        assert caption_main(["--demo", "shapes", "--seed", "5", "--json", "--model", str(model), *flags]) == 0
        return json.loads(capsys.readouterr().out)[0]

    rec = run(tuned, "--n-best", "4")  # beam 4 from the file
    explicit = run(SHAPES, "--beam-size", "4", "--length-penalty", "1.5", "--no-repeat-ngram", "2", "--n-best", "4")
    assert rec["caption"] == explicit["caption"] and rec["score"] == pytest.approx(explicit["score"], abs=1e-6)
    assert [n["score"] for n in rec["n_best"]] == pytest.approx([n["score"] for n in explicit["n_best"]], abs=1e-6)
    unblocked = run(SHAPES, "--beam-size", "4", "--length-penalty", "1.5", "--n-best", "4")
    assert rec["n_best"] != unblocked["n_best"]  # the recorded blocking took effect (shapes captions repeat bigrams)
    greedy = run(tuned, "--beam-size", "1", "--no-repeat-ngram", "0")
    plain = run(SHAPES, "--beam-size", "1")
    assert greedy["caption"] == plain["caption"]  # the recorded penalty scores a greedy caption, as a beam's
    assert greedy["score"] == pytest.approx(
        run(SHAPES, "--beam-size", "1", "--length-penalty", "1.5")["score"], abs=1e-6
    )
    assert greedy["score"] == pytest.approx(plain["score"] / (len(plain["words"]) + 1) ** 1.5, abs=1e-5)  # + <eos>
    assert caption_main(["--model-info", "--model", str(tuned)]) == 0
    info = capsys.readouterr().out
    assert "decoding:" in info and "beam_size 4, length_penalty 1.5, no_repeat_ngram 2, chosen_by a test" in info


def test_update_info_merges_a_decoder_setting_the_model_reads(tmp_path):
    """The caption tuner records a hard-attention model's chosen decoding (one region a word or the expected context)
    in the decoder's own config, which the loaded model then runs with; a file without such settings is refused."""
    from helpers.tiny_captioner import tiny_model_file

    from captioning.model.captioner import Captioner

    path = tiny_model_file(tmp_path / "hard.pt", attention="hard")
    assert Captioner.load(path).model.decoder.cfg.hard_inference == "argmax"
    info = update_info(path, {"decoding": {"beam_size": 3, "hard_inference": "expect"}},
                       merge={"decoder": {"hard_inference": "expect"}})  # fmt: skip
    assert info["decoding"]["hard_inference"] == "expect"
    loaded = Captioner.load(path)
    assert loaded.model.decoder.cfg.hard_inference == "expect" and loaded.model.decoder.cfg.attention == "hard"
    with pytest.raises(ModelFileError, match="no 'nothing' settings"):
        update_info(path, {}, merge={"nothing": {"x": 1}})
    assert Captioner.load(path).model.decoder.cfg.hard_inference == "expect"  # the refused update changed nothing


def test_a_recorded_beam_wider_than_the_vocabulary_is_said_to_be_the_files(tmp_path, capsys):
    """caption-export refuses such a decoding; a file written by hand may still hold one. It was refused as
    "--beam-size 50 is more than the model's 25 words" though no one typed --beam-size, and even --model-info failed:
    now the line names the file's recorded decoding, --model-info describes the file, and a typed --beam-size wins."""
    from captioning.commands.caption import caption_main
    from captioning.model.captioner import Captioner
    from tests.helpers.tiny_captioner import tiny_model_file
    from text_attn.translation.translate_cli import translate_main

    model = tiny_model_file(tmp_path / "m.pt")
    words = len(Captioner.load(model).vocab)
    update_info(model, {"decoding": {"beam_size": words + 25}})
    photo = str(Path(__file__).parents[1] / "fixtures" / "images" / "coffee.png")
    with pytest.raises(SystemExit) as exc:
        caption_main([photo, "--model", str(model), "--max-len", "3"])
    assert (exc.value.code, capsys.readouterr().err) == (2, f"caption: error: {model}: its recorded decoding's beam "
                                                         f"size {words + 25} is more than the model's {words} words: "
                                                         f"give --beam-size (at most {words})\n")  # fmt: skip
    assert caption_main(["--model", str(model), "--model-info"]) == 0
    assert f"decoding:       beam_size {words + 25}" in capsys.readouterr().out
    assert caption_main([photo, "--model", str(model), "--max-len", "3", "--beam-size", "2"]) == 0
    capsys.readouterr()
    with pytest.raises(ValueError, match=f"the model file's recorded decoding has beam_size {words + 25}"):
        Captioner.load(model).caption_images([photo], max_len=3)  # the Python API says so too
    # a recorded beam narrower than --n-best: the line says whose beam it is
    update_info(model, {"decoding": {"beam_size": 2}})
    with pytest.raises(SystemExit) as exc:
        caption_main([photo, "--model", str(model), "--max-len", "3", "--n-best", "3", "--json"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--n-best 3 is more than the beam size the model file records (2)" in err
    # translate: the same words for a recorded value (no file name there), its own for a typed one (unchanged)
    text = _text_model_file(tmp_path / "text.pt")
    update_info(text, {"decoding": {"beam_size": 10}})
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(text), "ma"])
    assert (exc.value.code, capsys.readouterr().err) == (2, "translate: error: the model file's recorded beam size "
                                                         "10 is more than the model's 9 words: give --beam-size (at "
                                                         "most 9)\n")  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(text), "--beam-size", "10", "ma"])
    assert capsys.readouterr().err == "translate: error: --beam-size 10 is more than the model's 9 words: at most 9\n"

"""``translate --alignments FILE``: a line of Pharaoh word alignments per input (an empty one for a failed input),
each the links alignments.links reads off the translation's attention; with --given-file, the translation given
(forced alignment); refusals in one line."""

import io

import pytest
import torch

from text_attn.translation.alignments import links, pharaoh
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

pytestmark = pytest.mark.usefixtures("one_thread")

SOURCES = ["Ein Mann fährt Fahrrad.", "", "Zwei Hunde spielen im Schnee."]


def test_a_line_per_input_as_the_links_of_its_translation(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(SOURCES) + "\n"))
    out = tmp_path / "a.txt"
    code = translate_main(["--model", "bahdanau", "--alignments", str(out), "--batch-size", "2"])
    err = capsys.readouterr().err
    assert code == 1 and "input 2: empty sentence" in err  # the empty line failed, the others translated
    translator = Translator.load("bahdanau")
    first, third = translator.translate([SOURCES[0], SOURCES[2]])
    assert out.read_text().split("\n") == [pharaoh(links(translator, first)), "", pharaoh(links(translator, third)), ""]
    assert out.read_text().split("\n")[0]  # links were written


def test_a_given_file_is_aligned_as_given(capsys, tmp_path, monkeypatch):
    given = ["A man is riding a bike.", "Two dogs play in the snow."]
    refs = tmp_path / "refs.en"
    refs.write_text("\n".join(given) + "\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{SOURCES[0]}\n{SOURCES[2]}\n"))
    out = tmp_path / "a.txt"
    assert translate_main(["--given-file", str(refs), "--alignments", str(out)]) == 0, capsys.readouterr().err
    translator = Translator.load()
    want = [pharaoh(links(translator, translator.read([s], g)[0])) for s, g in zip([SOURCES[0], SOURCES[2]], given,
                                                                                   strict=True)]  # fmt: skip
    assert out.read_text().splitlines() == want
    assert all(len(line.split()) >= 5 for line in want)  # most of the six words of each translation given linked


def test_a_model_without_attention_is_refused(capsys, tmp_path):
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ein", "mann", "a", "man"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8, attention="none")  # fmt: skip
    model = Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(tmp_path / "none.pt")
    with pytest.raises(SystemExit) as exc:
        translate_main(["ein mann", "--model", str(model), "--alignments", str(tmp_path / "a.txt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "--alignments: this model has no attention to align" in err[0]
    assert not (tmp_path / "a.txt").exists()


@pytest.mark.parametrize(
    ("args", "why"),
    [(["--alignments", "no/a.txt"], "cannot write --alignments no/a.txt: the folder no does not exist"),
     (["--alignments", "o.txt", "--output", "o.txt"], "name the same file"),
     (["--alignments", "folder"], "--alignments folder")],
)  # fmt: skip
def test_refusals_in_one_line(capsys, tmp_path, monkeypatch, args, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as exc:
        translate_main(["Ein Mann.", "--model", "bahdanau", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err

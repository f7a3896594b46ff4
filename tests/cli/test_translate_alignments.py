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
    assert code == 0 and "input 2" not in err  # the blank line: a blank line of links, the others translated
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
    translator.net.set_plot_layer(1)  # without --layer: the penultimate of the bundled Transformer's 3 decoder layers
    want = [pharaoh(links(translator, translator.read([s], g)[0])) for s, g in zip([SOURCES[0], SOURCES[2]], given,
                                                                                   strict=True)]  # fmt: skip
    assert out.read_text().splitlines() == want
    assert all(len(line.split()) >= 5 for line in want)  # most of the six words of each translation given linked
    last = tmp_path / "last.txt"  # --layer -1 reads the last layer, whose links differ on these two
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{SOURCES[0]}\n{SOURCES[2]}\n"))
    assert translate_main(["--given-file", str(refs), "--alignments", str(last), "--layer", "-1"]) == 0
    translator.net.set_plot_layer(-1)
    assert last.read_text().splitlines() == [pharaoh(links(translator, translator.read([s], g)[0]))
                                             for s, g in zip([SOURCES[0], SOURCES[2]], given, strict=True)]  # fmt: skip
    assert last.read_text() != out.read_text()


@pytest.mark.parametrize("model", ["bahdanau", "transformer"])
def test_align_by_evidence_links_what_drives_each_piece(capsys, tmp_path, monkeypatch, model):
    from text_attn.translation import explain
    from text_attn.translation.explain import translation_evidence

    calls = []
    monkeypatch.setattr(explain, "translation_evidence", lambda *a: calls.append(a) or translation_evidence(*a))
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{SOURCES[0]}\n{SOURCES[2]}\n"))
    out = tmp_path / "a.txt"
    args = ["--model", model, "--alignments", str(out), "--align-by", "evidence", "--html", str(tmp_path / "p.html"),
            "--evidence"]  # fmt: skip
    assert translate_main(args) == 0, capsys.readouterr().err
    translator = Translator.load(model)
    want = []
    for tr in translator.translate([SOURCES[0], SOURCES[2]]):
        found = translation_evidence(translator, list(tr.source), list(tr.tokens))
        want.append(pharaoh(links(translator, tr, found.evidence)))
    assert out.read_text().splitlines() == want
    if model == "transformer":  # its penultimate layer, taught to align, agrees with the evidence on these two
        assert want == [pharaoh(links(translator, tr)) for tr in translator.translate([SOURCES[0], SOURCES[2]])]
        translator.net.set_plot_layer(-1)  # its last layer does not: the links are the evidence's, not a layer's
        assert want != [pharaoh(links(translator, tr)) for tr in translator.translate([SOURCES[0], SOURCES[2]])]
    assert (tmp_path / "p.html").read_text().count('class="drives"') == 2  # --evidence's line drawn for both
    assert len(calls) == 2  # from the computation the links were read from: once a sentence


def test_a_model_without_attention_is_refused(capsys, tmp_path):
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ein", "mann", "a", "man"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8, attention="none")  # fmt: skip
    model = Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(tmp_path / "none.pt")
    for flag, verb, out in (("--alignments", "align", "a.txt"), ("--plot", "plot", "a.png")):  # --plot: exit 0 was
        with pytest.raises(SystemExit) as exc:  # a note at the end, no file
            translate_main(["ein mann", "--model", str(model), flag, str(tmp_path / out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and f"{flag}: this model has no attention to {verb}" in err[0]
        assert not (tmp_path / out).exists()


@pytest.mark.parametrize(
    ("args", "why"),
    [(["--alignments", "no/a.txt"], "cannot write --alignments no/a.txt: the folder no does not exist"),
     (["--alignments", "o.txt", "--output", "o.txt"], "name the same file"),
     (["--alignments", "folder"], "--alignments folder"),
     (["--align-by", "evidence"], "--align-by evidence says how --alignments links words: give --alignments FILE"),
     # the PNGs --plot writes beside its own name (one a sentence, the evidence): once written over the others
     (["--plot", "q.png", "--output", "q-2.png"], "--output q-2.png has the name of a file --plot q.png may write"),
     (["--plot", "e.png", "--evidence", "--alignments", "e-evidence.png"], "--alignments e-evidence.png has the"),
     (["--plot", "p", "--scores", "p-1-evidence.png"], "--scores p-1-evidence.png has the")],
)  # fmt: skip
def test_refusals_in_one_line(capsys, tmp_path, monkeypatch, args, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as exc:
        translate_main(["Ein Mann.", "--model", "bahdanau", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err


def test_the_bundled_transformer_reads_the_layer_taught_to_align(capsys, tmp_path):
    """The default model (guided alignment since 2026-11-30) is read from its penultimate decoder layer, the one its
    training taught the word aligner's links: the docs' sentence gets the links a person would set (docs/text.md)."""
    translator = Translator.load()
    assert translator.net.plot_layer == 1 and len(translator.net.decoder_layers) == 3
    assert "multi30k_de_en_transformer_aligned.yaml" in translator.info["training"]
    out = tmp_path / "links.txt"
    sentence = "Ein Mann fährt mit seinem Fahrrad eine Straße entlang."
    assert translate_main([sentence, "--alignments", str(out)]) == 0
    assert capsys.readouterr().out == "A man is riding his bike down a street.\n"
    # Ein-A Mann-man fährt-is,riding seinem-his Fahrrad-bike eine-a Straße-street. entlang.-down; "mit" unlinked
    assert out.read_text() == "0-0 1-1 2-2 2-3 4-4 5-5 6-7 7-8 8-6\n"
    last = tmp_path / "last.txt"  # its last layer, not taught, puts "A" on "Mann" (and more astray)
    assert translate_main([sentence, "--alignments", str(last), "--layer", "-1"]) == 0
    assert "1-0" in last.read_text().split() and "0-0" not in last.read_text().split()


def test_the_bundled_gru_was_taught_to_align_too(capsys, tmp_path):
    """``--model bahdanau`` (guided alignment since 2026-12-01): its one attention links the docs' sentence mostly as a
    person would. The GRU before it looked a word late ("A" on the final "entlang.", "a" on "Fahrrad")."""
    translator = Translator.load("bahdanau")
    assert "multi30k_de_en_bahdanau_aligned.yaml" in translator.info["training"]
    out = tmp_path / "links.txt"
    sentence = "Ein Mann fährt mit seinem Fahrrad eine Straße entlang."
    assert translate_main([sentence, "--model", "bahdanau", "--alignments", str(out)]) == 0
    assert capsys.readouterr().out == "A man is riding his bike down a road.\n"
    links = out.read_text().split()
    # Ein-A Mann-man fährt-is,riding seinem-his Fahrrad-bike eine-a Straße-road: each linked as a person would
    assert {"0-0", "1-1", "2-2", "2-3", "4-4", "5-5", "6-7", "7-8"} <= set(links), links
    assert "8-0" not in links and "5-4" not in links  # not "A" on "entlang.", nor "his" a word late on "Fahrrad"


def test_the_demo_prints_what_the_guide_shows(capsys):
    """docs/text.md shows the bundled model's first demo sentence with its word lines: that is what --demo prints."""
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "text.md").read_text(encoding="utf-8")
    shown = guide.split("`translate --demo` translates a few German sentences", 1)[1].split("```text\n", 1)[1]
    shown = shown.split("```", 1)[0]
    assert translate_main(["--demo"]) == 0
    assert capsys.readouterr().out.startswith(shown)


def test_the_page_of_the_default_model_names_it(tmp_path, capsys):
    """Without --model the --html page names the bundled default (it said "model None") and opens on the layer the
    translation's attention comes from (the penultimate: "layer 2" of 3)."""
    page = tmp_path / "p.html"
    assert translate_main(["Ein Mann fährt Fahrrad.", "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "model bundled (multi30k_de_en.pt) (Transformer" in html and "model None" not in html
    assert '<option value="1" selected>layer 2</option>' in html

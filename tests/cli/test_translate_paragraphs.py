"""``translate --paragraphs``: text wrapped over lines (blank lines between paragraphs) is translated a paragraph at a
time, each paragraph's translation what its lines joined into one give, one output line (and record) a paragraph;
--references and --given-file read a paragraph an input; --resume continues a paragraph run and refuses to mix it with
a line run; without it, a line that breaks a sentence off is said once, pointing at --paragraphs. The bundled
Transformer."""

import io
import json

import pytest

from text_attn.translation.translate_cli import translate_main

WRAPPED = (
    "Ein Mann in einem roten T-\nShirt läuft über die\nStraße. Eine Frau wartet an der\nHaltestelle.\n"
    "\n\nZwei Hunde spielen im\nSchnee.\n\nEin Kind fährt mit dem Fahr-\nrad.\n"
)
PARAGRAPHS = [
    "Ein Mann in einem roten T-Shirt läuft über die Straße. Eine Frau wartet an der Haltestelle.",
    "Zwei Hunde spielen im Schnee.",
    "Ein Kind fährt mit dem Fahrrad.",
]


def _run(capsys, monkeypatch, args: list[str], stdin: str | None = None) -> tuple[int, list[str], str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
    try:
        code = translate_main(args)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_a_paragraph_is_translated_as_its_lines_joined(capsys, monkeypatch, tmp_path):
    code, alone, _ = _run(capsys, monkeypatch, PARAGRAPHS)
    assert code == 0 and len(alone) == 3 and "woman" in alone[0]
    records = tmp_path / "r.jsonl"
    code, out, err = _run(capsys, monkeypatch, ["--paragraphs", "--jsonl", str(records)], WRAPPED)
    assert code == 0 and out == alone, err  # a line a paragraph, as its lines joined translate
    read = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["input"] for r in read] == [1, 2, 3] and [r["source"] for r in read] == PARAGRAPHS
    assert read[0]["sentence_count"] == 2
    assert "mid-sentence" not in err
    code, out, _ = _run(capsys, monkeypatch, ["--paragraphs", "Zwei Hunde spielen im\nSchnee.", "Ein Kind\n"])
    assert code == 0 and out[0] == alone[1]  # an argument: one paragraph


def test_without_it_a_line_at_a_time_and_the_breaks_said_once(capsys, monkeypatch):
    code, out, err = _run(capsys, monkeypatch, [], WRAPPED)
    assert code == 0 and "error" not in err  # the blank lines: blank lines out, no error
    assert len(out) == 11 and [n for n, line in enumerate(out, 1) if not line] == [5, 6, 9]
    notes = [line for line in err.splitlines() if "mid-sentence" in line]
    assert len(notes) == 1 and "inputs 2, 3, 7, 10 break off mid-sentence" in notes[0] and "--paragraphs" in notes[0]
    # an argument wrapped over lines ("$(cat a.txt)"): its line breaks end sentences too, said as stdin's are (unsaid)
    code, out, err = _run(capsys, monkeypatch, ["Zwei Hunde spielen im\nSchnee.", "Ein Kind."])
    notes = [line for line in err.splitlines() if "mid-sentence" in line]
    assert code == 0 and len(notes) == 1 and "input 1 breaks off mid-sentence" in notes[0], err


def test_references_and_given_translations_are_read_a_paragraph_an_input(capsys, monkeypatch, tmp_path):
    refs = tmp_path / "refs.txt"
    refs.write_text("A man in a red T-shirt walks across the\nstreet. A woman waits at the stop.\n\nTwo dogs play in "
                    "the snow.\n\nA child rides a bike.\n\nAn extra one.\n")  # fmt: skip
    scores = tmp_path / "s.json"
    args = ["--paragraphs", "--references", str(refs), "--scores", str(scores)]
    code, _, err = _run(capsys, monkeypatch, args, WRAPPED)
    assert code == 0 and "3 input(s)" in err
    assert "has 4 paragraphs for 3 input(s)" in err
    per = {s["input"]: s for s in json.loads(scores.read_text())["per_sentence"]}
    assert per[1]["reference"] == "A man in a red T-shirt walks across the street. A woman waits at the stop."
    given = tmp_path / "given.txt"
    given.write_text("A man in a red shirt walks across\nthe street. A woman waits.\n\nTwo dogs\nplay.\n")
    code, out, err = _run(capsys, monkeypatch, ["--paragraphs", "--given-file", str(given)], WRAPPED)
    assert code == 1 and "input 3: --given-file" in err and "has no paragraph 3" in err
    assert [line.split("\t")[:3:2] for line in out] == [
        ["1", "A man in a red shirt walks across the street. A woman waits."],
        ["2", "Two dogs play."],
    ]


def test_a_paragraph_run_resumes_and_is_not_mixed_with_a_line_run(capsys, monkeypatch, tmp_path):
    whole, part = tmp_path / "whole.txt", tmp_path / "part.txt"
    assert _run(capsys, monkeypatch, ["--paragraphs", "--output", str(whole)], WRAPPED)[0] == 0
    written = whole.read_text()
    assert len(written.splitlines()) == 3
    part.write_text(written.splitlines()[0] + "\n")  # stopped after the first paragraph
    (tmp_path / "part.txt.run.json").write_text((tmp_path / "whole.txt.run.json").read_text())
    code, _, err = _run(capsys, monkeypatch, ["--paragraphs", "--output", str(part), "--resume"], WRAPPED)
    assert code == 0 and part.read_text() == written, err
    record = json.loads((tmp_path / "part.txt.run.json").read_text())
    assert record["options"]["--paragraphs"] is True
    code, _, err = _run(capsys, monkeypatch, ["--output", str(part), "--resume"], WRAPPED)
    assert code == 2 and "--paragraphs given (this run: not given)" in err
    assert part.read_text() == written  # refused before the file was touched
    plain = tmp_path / "plain.txt"
    assert _run(capsys, monkeypatch, ["--output", str(plain), PARAGRAPHS[1]])[0] == 0
    options = json.loads((tmp_path / "plain.txt.run.json").read_text())["options"]
    assert "--paragraphs" not in options and "--no-split" not in options  # a record from before them still matches
    code, _, err = _run(capsys, monkeypatch, ["--no-split", "--output", str(plain), "--resume", PARAGRAPHS[1]])
    assert code == 2 and "--no-split not given (this run: given)" in err


@pytest.mark.parametrize("flag", ["--no-split", "--demo"])
def test_paragraphs_refuse_what_cannot_go_with_them(capsys, monkeypatch, flag):
    code, _, err = _run(capsys, monkeypatch, ["--paragraphs", flag], "")
    assert code == 2 and err.count("\n") == 1 and "--paragraphs translates a paragraph's sentences" in err
    assert flag in err


def test_on_a_terminal_it_says_how_an_input_ends(capsys, monkeypatch):
    """A blank line ends a paragraph; without --paragraphs, Enter ends a sentence (the terminal waited silently)."""

    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal(io.BytesIO(b"Zwei Hunde spielen im\nSchnee.\n\n")))
    code = translate_main(["--paragraphs"])
    captured = capsys.readouterr()
    assert code == 0 and len(captured.out.splitlines()) == 1
    assert "type a paragraph, then an empty line to translate it" in captured.err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"Ein Hund.\n")))  # a pipe or a file: nothing said
    assert translate_main(["--paragraphs"]) == 0 and "type a paragraph" not in capsys.readouterr().err
    # a line at a time (no --paragraphs): Enter translates, said once in the model's language; a file: nothing said
    monkeypatch.setattr("sys.stdin", Terminal(io.BytesIO(b"Ein Hund rennt.\n")))
    assert translate_main([]) == 0
    said = capsys.readouterr().err
    assert said.count("type a sentence in German and press Enter to translate it (Ctrl-D: the end)") == 1
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"Ein Hund.\n")))
    assert translate_main([]) == 0 and "press Enter" not in capsys.readouterr().err


def test_a_heading_and_a_lists_items_are_translated_each_on_its_own_their_markers_kept(capsys, monkeypatch, tmp_path):
    heading, first, second = "Zwei Hunde spielen im Schnee", PARAGRAPHS[2], "Eine Frau wartet an der Haltestelle."
    code, alone, _ = _run(capsys, monkeypatch, [heading, first, second])
    assert code == 0 and len(alone) == 3
    links = tmp_path / "links.txt"
    wrapped = f"{heading}\n- Ein Kind fährt mit dem Fahr-\n  rad.\n- {second}\n"  # a heading, a list, an item wrapped
    code, out, err = _run(capsys, monkeypatch, ["--paragraphs", "--alignments", str(links)], wrapped)
    # each its own translation, each marker before its item's: joined, the heading was read into the first item
    assert code == 0 and out == [f"{alone[0]} - {alone[1]} - {alone[2]}"], err
    # the links count the words as written, markers too, each linked to its own
    pairs = {tuple(map(int, link.split("-"))) for link in links.read_text().split()}
    src, dst = f"{heading} - {first} - {second}".split(), out[0].split()
    assert all(0 <= i < len(src) and 0 <= j < len(dst) for i, j in pairs)
    dashes = ([i for i, w in enumerate(src) if w == "-"], [j for j, w in enumerate(dst) if w == "-"])
    assert set(zip(*dashes, strict=True)) <= pairs and all(dst[j] == "-" for i, j in pairs if src[i] == "-")
    # without --paragraphs, a line that is an item: its marker kept before its translation, as the line alone's
    code, out, _ = _run(capsys, monkeypatch, [], f"• {first}\n1. {second}\n")
    assert code == 0 and out == [f"• {alone[1]}", f"1. {alone[2]}"]


def test_keep_layout_writes_a_documents_translation_laid_out_as_it_was(capsys, monkeypatch, tmp_path):
    heading, first, second = "Zwei Hunde spielen im Schnee", PARAGRAPHS[2], "Eine Frau wartet an der Haltestelle."
    code, alone, _ = _run(capsys, monkeypatch, [heading, first, second, PARAGRAPHS[0]])
    assert code == 0 and len(alone) == 4
    # a wrapped paragraph, then a heading and a list (an item wrapped), then an e-mail quote of two sentences
    document = (f"{WRAPPED.split(chr(10) * 2)[0]}\n\n{heading}\n- Ein Kind fährt mit dem Fahr-\n  rad.\n- {second}\n\n"
                f"> {first}\n> {second}\n")  # fmt: skip
    code, out, err = _run(capsys, monkeypatch, ["--paragraphs", "--keep-layout"], document)
    assert code == 0, err
    # each line as its source's: the paragraph one line (its sentences joined), the heading and items each a line,
    # the quote's sentences on one (its lines were wrapped), a blank line between paragraphs
    quoted = f"> {alone[1]} {alone[2]}"
    assert out == [alone[3], "", alone[0], f"- {alone[1]}", f"- {alone[2]}", "", quoted]
    code, batched, _ = _run(capsys, monkeypatch, ["--paragraphs", "--keep-layout", "--batch-size", "1"], document)
    assert batched == out  # a paragraph a batch: the blank lines between batches too
    records = tmp_path / "r.jsonl"
    code, _, _ = _run(capsys, monkeypatch, ["--paragraphs", "--jsonl", str(records)], document)
    laid = [json.loads(line)["laid_out"] for line in records.read_text().splitlines()]
    assert "\n\n".join(laid).splitlines() == out  # each record's laid_out: its paragraph as --keep-layout writes it
    code, plain, _ = _run(capsys, monkeypatch, ["--paragraphs"], document)  # without it: a line a paragraph
    assert plain == [alone[3], f"{alone[0]} - {alone[1]} - {alone[2]}", quoted]
    # an argument is a paragraph too; a failed one (empty) leaves no blank line of its own
    args = ["--paragraphs", "--keep-layout", " ", f"{heading}\n- {first}\n- {second}"]
    code, out, err = _run(capsys, monkeypatch, args)
    assert code == 1 and "input 1: empty sentence" in err
    assert out == [alone[0], f"- {alone[1]}", f"- {alone[2]}"]


def test_a_laid_out_output_is_not_resumed_and_a_line_runs_is_refused_for_its_options(capsys, monkeypatch, tmp_path):
    """A --keep-layout file holds a paragraph over several lines: --resume counted its lines as paragraphs done and
    skipped as many, exit 0. A line run's file resumed with --paragraphs was refused as holding more lines than
    inputs, not for the option that tells why."""
    laid, lines = tmp_path / "laid.txt", tmp_path / "lines.txt"
    document = f"{PARAGRAPHS[1]}\n\nZwei Hunde spielen im Schnee\n- Ein Hund\n- Eine Katze\n\n{PARAGRAPHS[2]}\n"
    assert _run(capsys, monkeypatch, ["--paragraphs", "--keep-layout", "--output", str(laid)], document)[0] == 0
    assert json.loads((tmp_path / "laid.txt.run.json").read_text())["options"]["--keep-layout"] is True
    written = laid.read_text()
    laid.write_text("".join(written.splitlines(keepends=True)[:4]))  # stopped in its second paragraph
    code, out, err = _run(capsys, monkeypatch, ["--paragraphs", "--output", str(laid), "--resume"], document)
    assert code == 2 and err.startswith(f"translate: error: --resume: {laid} was written with --keep-layout"), err
    assert _run(capsys, monkeypatch, ["--output", str(lines)], "Ein Hund.\nEine Katze.\nZwei Hunde.\n")[0] == 0
    code, _, err = _run(capsys, monkeypatch, ["--paragraphs", "--output", str(lines), "--resume"], "Ein Hund.\n")
    assert code == 2 and "--paragraphs not given (this run: given)" in err, err


@pytest.mark.parametrize(("flags", "said"), [
    ([], "give --paragraphs too"), (["--paragraphs", "--n-best", "2"], "--n-best counts output lines"),
    (["--paragraphs", "--given", "A dog."], "--given counts output lines"),
    (["--paragraphs", "--output", "o.txt", "--resume"], "--resume counts output lines"),
])  # fmt: skip
def test_keep_layout_is_refused_where_output_lines_are_inputs(capsys, monkeypatch, tmp_path, flags, said):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, monkeypatch, ["--keep-layout", *flags, "Ein Hund."])
    assert code == 2 and out == [] and err.count("\n") == 1 and said in err, err

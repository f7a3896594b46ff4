"""Word alignments scored against gold links: AER by hand (metrics.alignment_error), the gold file format
(alignments.read_gold) and the hand-aligned Multi30k val pairs, the layer --alignments reads by default
(alignments.alignment_layer), links read from other rows than attention, and benchmarks/alignment_error.py's
baselines: the diagonal, the statistical aligner (which must recover a synthetic corpus's true links) and
grow-diag-final-and, and its bootstrap."""

import gzip
import sys
from pathlib import Path

import pytest
import torch

from text_attn.core.metrics import alignment_error
from text_attn.translation.alignments import alignment_layer, links, read_gold
from text_attn.translation.translator import Translation

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "multi30k"
GOLD = ROOT / "benchmarks" / "data" / "multi30k_val_alignments.txt"
HELD_OUT = ROOT / "benchmarks" / "data" / "multi30k_val_alignments_101_150.txt"  # val lines 101-150
sys.path.insert(0, str(ROOT / "benchmarks"))

from _word_aligner import DiagonalIBM2, grow_diag_final_and  # noqa: E402 - the benchmarks' folder on the path first
from alignment_error import bootstrap, diagonal  # noqa: E402


def test_aer_precision_and_recall_by_hand():
    predicted = [{(0, 0), (1, 1), (2, 1)}, {(0, 0)}]
    sure = [{(0, 0), (1, 1), (2, 2)}, {(0, 1)}]
    possible = [{(2, 1)}, {(0, 0)}]
    # |A| = 4, |S| = 4; A & S = (0,0), (1,1): 2; A & (P | S) = (0,0), (1,1), (2,1), (0,0) of pair 2: 4
    got = alignment_error(predicted, sure, possible)
    assert got["aer"] == pytest.approx(1 - (2 + 4) / (4 + 4))
    assert got["precision"] == pytest.approx(4 / 4) and got["recall"] == pytest.approx(2 / 4)
    assert alignment_error(sure, sure, [set(), set()])["aer"] == 0.0  # every sure link and nothing else
    assert alignment_error([set(), set()], sure, possible) == {"aer": 1.0, "precision": 0.0, "recall": 0.0}
    with pytest.raises(ValueError, match="1 predicted, 2 sure"):
        alignment_error(predicted[:1], sure, possible)
    with pytest.raises(ValueError, match="no links to score"):  # it was AER 0.0, "perfect", of nothing
        alignment_error([set()], [set()], [{(0, 0)}])


def test_gold_files_read_sure_and_possible_links(tmp_path):
    path = tmp_path / "gold.txt"
    path.write_text("# a comment\n0-0 1p2 10-11\n\n3p3\n")
    assert read_gold(path) == [({(0, 0), (10, 11)}, {(1, 2)}), (set(), set()), (set(), {(3, 3)})]
    path.write_text("0-0\n0-x\n")
    with pytest.raises(ValueError, match=r"line 2: '0-x' is not a link"):
        read_gold(path)


def test_the_hand_aligned_gold_files():
    for path, pairs, sure, possible in ((GOLD, 100, 1097, 212), (HELD_OUT, 50, 526, 83)):
        gold = read_gold(path)
        assert len(gold) == pairs
        assert sum(len(s) for s, _ in gold) == sure and sum(len(p) for _, p in gold) == possible  # as the header says
        assert all(not (s & p) for s, p in gold)  # a link is sure or possible, not both


@pytest.mark.skipif(not (DATA / "val.de.gz").is_file(), reason=f"Multi30k not found at {DATA}")
def test_the_gold_links_name_words_of_the_val_pairs():
    de = gzip.open(DATA / "val.de.gz", "rt", encoding="utf-8").read().splitlines()
    en = gzip.open(DATA / "val.en.gz", "rt", encoding="utf-8").read().splitlines()
    linked = words = 0
    for path, first in ((GOLD, 0), (HELD_OUT, 100)):
        for k, (sure, possible) in enumerate(read_gold(path), first):
            m, n = len(de[k].split()), len(en[k].split())
            assert all(i < m and j < n for i, j in sure | possible), k + 1
            linked, words = linked + len({j for _, j in sure | possible}), words + n
    assert linked / words > 0.98  # a few English words have no German counterpart


def test_the_penultimate_decoder_layer_aligns():
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
    from text_attn.translation.transformer import Transformer, TransformerConfig

    def transformer(layers):
        cfg = TransformerConfig(src_vocab_size=9, tgt_vocab_size=9, d_model=8, num_heads=2, enc_layers=1,
                                dec_layers=layers, ff_dim=8)  # fmt: skip
        return Transformer(cfg)

    assert [alignment_layer(transformer(n)) for n in (1, 2, 3, 6)] == [0, 0, 1, 4]
    rnn = Seq2Seq(Seq2SeqConfig(src_vocab_size=9, tgt_vocab_size=9, embed_dim=4, enc_hidden=4, dec_hidden=4,
                                attn_dim=4))  # fmt: skip
    assert alignment_layer(rnn) is None


def test_links_read_from_rows_given_instead_of_the_attention():
    from types import SimpleNamespace

    word_level = SimpleNamespace(codec=SimpleNamespace(mode="word"))
    attention = torch.tensor([[0.8, 0.1, 0.1], [0.6, 0.3, 0.1]])  # both words on source word 0
    evidence = torch.tensor([[0.5, -0.1, 0.0], [0.0, 0.4, 0.9]])  # word 1: the end (column 2) drives it most
    tr = Translation(source=["ein", "mann"], tokens=["a", "man"], text="a man", attention=attention, unknown=[])
    assert links(word_level, tr) == [(0, 0), (0, 1)]
    assert links(word_level, tr, evidence) == [(0, 0)]  # the end links nothing
    assert links(word_level, tr, torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])) == [(1, 0), (1, 1)]


def test_the_diagonal_baseline_by_hand():
    # 4 source words, 2 target: j -> round(j * 4 / 2) = 0, 2; 2 source, 3 target: round(0), round(0.67), round(1.33)
    assert diagonal(["a b c d", "a b"], ["x y", "x y z"]) == [{(0, 0), (2, 1)}, {(0, 0), (1, 1), (1, 2)}]


def test_the_statistical_aligner_recovers_a_synthetic_corpus_true_links():
    from text_attn.translation.tasks import make_reorder

    pairs = make_reorder(600, seed=3, max_len=20)  # a one-to-one lexicon, adjectives and verbs moved
    sources, targets = [p.src for p in pairs], [p.tgt for p in pairs]
    model = DiagonalIBM2(sources, targets, iterations=5)
    found, truth = [], []
    for p in pairs[:100]:
        found.append(model.align(p.src, p.tgt))
        truth.append({(i, j) for j, i in enumerate(p.alignment)})
    assert alignment_error(found, truth, [set()] * len(truth))["aer"] < 0.02
    # a word never seen in training is left unaligned, not linked at random
    assert model.align([*pairs[0].src, "qqq"], ["zzz"]) == set()


def test_grow_diag_final_and_by_hand():
    forward = {(0, 0), (1, 1), (2, 3)}
    backward = {(0, 0), (1, 2), (3, 3)}
    # from the intersection (0,0): (1,1) is a diagonal neighbour in the union and its words are free; then (1,2)
    # next to (1,1), with target word 2 free; (2,3) next to (1,2), target 3 free; (3,3) next to (2,3): source 3 free
    assert grow_diag_final_and(forward, backward) == {(0, 0), (1, 1), (1, 2), (2, 3), (3, 3)}
    # far from the intersection: added only where both words are unlinked (final-and)
    assert grow_diag_final_and({(0, 0), (5, 5)}, {(0, 0), (5, 6)}) == {(0, 0), (5, 5)}


def test_the_bootstrap_counts_strict_wins():
    sure = [{(0, 0)}, {(1, 1)}, {(0, 1)}]
    possible = [set()] * 3
    assert bootstrap(sure, [set()] * 3, sure, possible, rounds=50) == 1.0
    assert bootstrap(sure, sure, sure, possible, rounds=50) == 0.0  # ties are not wins
    # a resample of no links at all (nothing predicted, no sure link) is no round: alignment_error refuses it
    some = [{(0, 0)}, set(), set()]
    assert bootstrap(some, [set()] * 3, [{(0, 0)}, set(), set()], possible, rounds=50) == 1.0


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "train.de.gz").is_file(), reason=f"Multi30k not found at {DATA}")
def test_a_short_run_prints_the_table_and_writes_every_row(tmp_path):
    import json
    import subprocess

    out = tmp_path / "aer.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "alignment_error.py"), "--multi30k-root", str(DATA), "--limit",
           "6", "--iterations", "2", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| transformer: attention, layer 1 |" in done.stdout and "bootstrap" in done.stdout
    result = json.loads(out.read_text())
    assert result["pairs"] == 6 and result["sure"] == sum(len(s) for s, _ in read_gold(GOLD)[:6])
    rows = result["rows"]
    assert {"diagonal (no model)", "bahdanau: attention", "transformer: evidence (leave-one-out)"} <= set(rows)
    assert all(0 <= r["aer"] <= 100 for r in rows.values())
    assert all(len(r["links"]) == 6 for n, r in rows.items() if " head " not in n)
    # the rows are what the library computes: the GRU's attention links of the first pair, read again here
    from text_attn.translation.alignments import links, pharaoh
    from text_attn.translation.translator import Translator

    de = gzip.open(DATA / "val.de.gz", "rt", encoding="utf-8").readline().strip()
    en = gzip.open(DATA / "val.en.gz", "rt", encoding="utf-8").readline().strip()
    gru = Translator.load("bahdanau")
    assert rows["bahdanau: attention"]["links"][0] == pharaoh(links(gru, gru.read([de], en)[0]))


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "val.de.gz").is_file(), reason=f"Multi30k not found at {DATA}")
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--transformer", "NOTES"], "--transformer NOTES: "),
        (["--bahdanau", "NOTES"], "--bahdanau NOTES: "),
        # these were tracebacks, three of them after every row was measured
        (["--transformer", "bahdanau"], "--transformer bahdanau: not a Transformer, as its rows need"),
        (["--bahdanau", "transformer"], "--bahdanau transformer: not an RNN with attention"),
        (["--gold", "NOTES"], "--gold NOTES: "),
        (["--first-line", "5000"], "--first-line 5000: val has 1,014 lines, and the gold file links 1 from there"),
    ],
)
def test_bad_models_gold_and_lines_are_one_line_before_the_work(tmp_path, args, says):
    import subprocess

    bad = tmp_path / "notes.pt"
    bad.write_text("not a model")
    args = [str(bad) if a == "NOTES" else a for a in args]
    cmd = [sys.executable, str(ROOT / "benchmarks" / "alignment_error.py"), "--multi30k-root", str(DATA), "--limit",
           "1", "--skip-baselines", *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == ""
    assert last.startswith("alignment_error.py: error: ") and says.replace("NOTES", str(bad)) in last, last


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "val.de.gz").is_file(), reason=f"Multi30k not found at {DATA}")
def test_the_held_out_gold_is_read_against_its_own_val_lines(tmp_path):
    import json
    import subprocess

    out = tmp_path / "held.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "alignment_error.py"), "--multi30k-root", str(DATA), "--gold",
           str(HELD_OUT), "--first-line", "101", "--limit", "2", "--skip-baselines", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 Multi30k val pairs (lines 101-102)" in done.stdout
    from text_attn.translation.alignments import links, pharaoh
    from text_attn.translation.translator import Translator

    de = gzip.open(DATA / "val.de.gz", "rt", encoding="utf-8").read().splitlines()[100]
    en = gzip.open(DATA / "val.en.gz", "rt", encoding="utf-8").read().splitlines()[100]
    gru = Translator.load("bahdanau")
    assert json.loads(out.read_text())["rows"]["bahdanau: attention"]["links"][0] == pharaoh(
        links(gru, gru.read([de], en)[0])
    )


def test_word_align_writes_a_line_of_links_per_pair(tmp_path):
    from word_align import main as word_align

    from text_attn.translation.tasks import make_reorder

    pairs = make_reorder(400, seed=5, max_len=16)
    src, tgt = tmp_path / "train.src", tmp_path / "train.tgt"
    src.write_text("".join(" ".join(p.src) + "\n" for p in pairs))
    tgt.write_text("".join(" ".join(p.tgt) + "\n" for p in pairs))
    out = tmp_path / "links.txt"
    assert word_align([str(src), str(tgt), "--out", str(out), "--iterations", "4"]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == len(pairs)  # line k: pair k, as data.alignments reads it
    found = [{tuple(map(int, link.split("-"))) for link in line.split()} for line in lines]
    truth = [{(i, j) for j, i in enumerate(p.alignment)} for p in pairs]
    assert alignment_error(found, truth, [set()] * len(truth))["aer"] < 0.03
    with pytest.raises(SystemExit, match="word_align: .*file not found"):
        word_align([str(tmp_path / "missing.src"), str(tgt), "--out", str(out)])

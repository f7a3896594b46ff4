"""Word alignments read off attention (text_attn.translation.alignments): pieces joined into words, a source word's
weight the sum over its pieces and an output word's row the mean over its, each output word linked to its heaviest
source word; the Pharaoh format."""

from types import SimpleNamespace

import pytest
import torch

from text_attn.translation.alignments import links, pharaoh, word_attention, words_of
from text_attn.translation.translator import Translation


class _Codec:
    mode = "subword"

    @staticmethod
    def decode(pieces):
        return "".join(pieces).replace("▁", " ").strip()


TRANSLATOR = SimpleNamespace(codec=_Codec())


def test_pieces_join_into_the_words_spaces_make():
    assert words_of(TRANSLATOR, ["▁Fahr", "rad", ".", "▁Ein"]) == (["Fahrrad.", "Ein"], [0, 0, 0, 1])
    word_level = SimpleNamespace(codec=SimpleNamespace(mode="word"))
    assert words_of(word_level, ["ein", "mann"]) == (["ein", "mann"], [0, 1])


def test_word_attention_and_links_by_hand():
    # source: "▁Ein ▁Fahr rad" -> words Ein, Fahrrad; output "▁A ▁bi cycle" -> words A, bicycle; a column for <eos>
    attention = torch.tensor([[0.6, 0.1, 0.1, 0.2],   # A: Ein 0.6, Fahrrad 0.2
                              [0.5, 0.2, 0.2, 0.1],   # bi: Ein 0.5, Fahrrad 0.4
                              [0.1, 0.3, 0.5, 0.1]])  # cycle: Ein 0.1, Fahrrad 0.8  # fmt: skip
    tr = Translation(source=["▁Ein", "▁Fahr", "rad"], tokens=["▁A", "▁bi", "cycle"], text="A bicycle",
                     attention=attention, unknown=[])  # fmt: skip
    src, out, weights = word_attention(TRANSLATOR, tr)
    assert (src, out) == (["Ein", "Fahrrad"], ["A", "bicycle"])
    # bicycle's row: the mean of bi's and cycle's rows, each summed over Fahr + rad
    torch.testing.assert_close(weights, torch.tensor([[0.6, 0.2], [0.3, 0.6]]))
    # per piece: A -> Ein, bi -> Ein, cycle -> rad: word links where any pieces link (summed, Fahrrad would win bi)
    assert links(TRANSLATOR, tr) == [(0, 0), (0, 1), (1, 1)]
    heads = Translation(source=tr.source, tokens=tr.tokens, text=tr.text, unknown=[],
                        attention=torch.stack([attention, torch.zeros_like(attention)], 1))  # (T, H, S)  # fmt: skip
    torch.testing.assert_close(word_attention(TRANSLATOR, heads)[2], weights / 2)  # the heads averaged


def test_a_piece_whose_attention_peaks_on_the_end_links_nothing():
    attention = torch.tensor([[0.1, 0.2, 0.7],    # A: the end (the source's <eos> column)
                              [0.2, 0.5, 0.3]])  # man: Mann  # fmt: skip
    tr = Translation(source=["▁Ein", "▁Mann"], tokens=["▁A", "▁man"], text="A man", attention=attention, unknown=[])
    assert links(TRANSLATOR, tr) == [(1, 1)]  # "A" left unaligned


def test_no_attention_no_links_and_the_pharaoh_format():
    tr = Translation(source=["▁Ein"], tokens=["▁A"], text="A", attention=None, unknown=[])
    assert word_attention(TRANSLATOR, tr) is None and links(TRANSLATOR, tr) == []
    assert pharaoh([(2, 0), (0, 1), (0, 0)]) == "0-0 0-1 2-0"
    assert pharaoh([]) == ""


@pytest.mark.parametrize("model", ["bahdanau", "transformer"])
def test_the_bundled_models_link_every_output_word_once(model):
    from text_attn.translation.translator import Translator

    translator = Translator.load(model)
    (tr,) = translator.translate(["Ein Mann fährt mit seinem Fahrrad eine Straße entlang."])
    pairs = links(translator, tr)
    assert {j for _, j in pairs} <= set(range(len(tr.text.split()))) and all(0 <= i < 9 for i, _ in pairs)
    assert len({j for _, j in pairs}) >= len(tr.text.split()) - 2  # nearly every output word linked
    assert (5, tr.text.split().index("bike")) in pairs  # "bike" <- "Fahrrad"

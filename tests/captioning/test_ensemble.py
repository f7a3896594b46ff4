"""DecoderEnsemble (captioning.model.ensemble) and ``caption-export --ensemble``: a step's distribution is the mean of
the members' probabilities (by hand), an ensemble of one decoder twice decodes exactly as that decoder, beam 1 equals
greedy, the fixed-shape search steps it like the eager one, and the model file round-trips; what cannot be one
ensemble (another vocabulary, another encoder, --average beside it, init_from) is refused in one line."""

import pytest
import torch

from captioning.commands.caption import caption_main
from captioning.commands.export import export_main
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from captioning.model.ensemble import DecoderEnsemble
from captioning.training.shapes import VOCAB
from tests.helpers.tiny_captioner import separate_run
from text_attn.core.decoding import search
from text_attn.core.fixed_search import fixed_search
from text_attn.core.vocab import Vocabulary

BOS, EOS, PAD = 1, 2, 0
CFG = dict(vocab_size=30, feature_dim=12, embed_dim=8, hidden_dim=16, attn_dim=10)


def _decoders(n: int, attention: str = "soft") -> list[ShowAttendTellDecoder]:
    torch.manual_seed(3)
    return [ShowAttendTellDecoder(DecoderConfig(**CFG, attention=attention)).eval() for _ in range(n)]


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_a_step_is_the_mean_of_the_members_probabilities(attention):
    members = _decoders(3, attention)
    ens = DecoderEnsemble(members).eval()
    feats, tokens = torch.randn(4, 9, 12), torch.tensor([1, 5, 7, 2])
    state = ens.init_state(feats)
    assert set(state) == {f"{k}.{n}" for k in range(3) for n in ("h", "c", "keys")}
    assert ens.one_row_per_source_state == ("0.keys", "1.keys", "2.keys")
    log_probs, alpha, new = ens.step(tokens, state)
    own = [m.step(tokens, m.init_state(feats)) for m in members]
    by_hand = torch.stack([lp.exp() for lp, _, _ in own]).mean(0).log()  # (4, V)
    torch.testing.assert_close(log_probs, by_hand, rtol=0, atol=1e-6)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(4))
    torch.testing.assert_close(alpha, torch.stack([a for _, a, _ in own]).mean(0), rtol=0, atol=0)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(4))
    for k, (_, _, after) in enumerate(own):  # each member's state moved on as its own step moves it
        assert torch.equal(new[f"{k}.h"], after["h"]) and torch.equal(new[f"{k}.c"], after["c"])


def test_one_decoder_twice_decodes_as_that_decoder():
    (dec,) = _decoders(1)
    twin = ShowAttendTellDecoder(dec.cfg).eval()
    twin.load_state_dict(dec.state_dict())
    ens = DecoderEnsemble([dec, twin]).eval()
    feats = torch.randn(3, 9, 12)
    for beam, ngram in [(1, 0), (4, 2)]:
        kw = dict(beam_size=beam, no_repeat_ngram=ngram, pad_id=PAD, banned=(PAD, BOS))
        one = search(dec, dec.init_state(feats), 3, BOS, EOS, 12, **kw)
        two = search(ens, ens.init_state(feats), 3, BOS, EOS, 12, **kw)
        assert torch.equal(one.tokens, two.tokens) and torch.equal(one.lengths, two.lengths)
        torch.testing.assert_close(two.scores, one.scores, rtol=0, atol=1e-5)
        torch.testing.assert_close(two.attention, one.attention, rtol=0, atol=1e-6)


def test_beam_one_is_greedy_and_the_fixed_search_steps_it_alike():
    ens = DecoderEnsemble(_decoders(2)).eval()
    feats = torch.randn(4, 9, 12)
    greedy = search(ens, ens.init_state(feats), 4, BOS, EOS, 12, beam_size=1, pad_id=PAD)
    beam1 = search(ens, ens.init_state(feats), 4, BOS, EOS, 12, beam_size=1, length_penalty=0.0, pad_id=PAD,
                   n_best=1)  # fmt: skip
    assert torch.equal(greedy.tokens, beam1.tokens)
    for beam, ngram in [(1, 0), (3, 3)]:
        kw = dict(beam_size=beam, no_repeat_ngram=ngram, banned=(PAD, BOS), pad_id=PAD)
        eager = search(ens, ens.init_state(feats), 4, BOS, EOS, 12, drop_ended=False, **kw)
        fixed = fixed_search(ens, ens.init_state(feats), 4, BOS, EOS, 12, **kw)
        assert torch.equal(fixed.tokens, eager.tokens) and torch.equal(fixed.lengths, eager.lengths)
        torch.testing.assert_close(fixed.scores, eager.scores, rtol=0, atol=0)
        torch.testing.assert_close(fixed.attention, eager.attention, rtol=0, atol=0)


def test_members_of_other_settings_are_refused():
    torch.manual_seed(0)
    with pytest.raises(ValueError, match="same settings"):
        DecoderEnsemble([ShowAttendTellDecoder(DecoderConfig(**CFG)), ShowAttendTellDecoder(DecoderConfig(**{
            **CFG, "hidden_dim": 8}))])  # fmt: skip
    with pytest.raises(ValueError, match="at least 2"):
        DecoderEnsemble(_decoders(1))
    with pytest.raises(TypeError, match="only decodes"):  # no teacher forcing: its members train apart
        DecoderEnsemble(_decoders(2))(torch.randn(1, 9, 12), torch.tensor([[1, 5]]))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ens")
    vocab = Vocabulary.build([list(VOCAB)])
    for seed in (1, 2, 3):
        separate_run(vocab, seed, tmp / f"m{seed}.pt")
    return tmp


@pytest.mark.long
def test_export_makes_one_model_file_of_several_runs(capsys, files):
    out = files / "ens.pt"
    assert export_main([str(files / "m1.pt"), str(out), "--ensemble", str(files / "m2.pt"), str(files / "m3.pt")]) == 0
    assert "in an ensemble of 3 decoders" in capsys.readouterr().err
    assert torch.load(out, weights_only=True)["decoder_members"] == 3
    loaded = Captioner.load(out)
    assert loaded.ensemble and len(loaded.model.decoder.members) == 3
    for k in (1, 2, 3):  # each member holds its run's decoder
        own = Captioner.load(files / f"m{k}.pt").model.decoder.state_dict()
        theirs = loaded.model.decoder.members[k - 1].state_dict()
        assert all(torch.equal(own[n], theirs[n]) for n in own)
    # the file's captions are the in-memory ensemble's (features of random photos through the one encoder)
    feats = loaded.encode(torch.randn(2, 3, 64, 64))
    members = [Captioner.load(files / f"m{k}.pt").model.decoder for k in (1, 2, 3)]
    ens = DecoderEnsemble(members).eval()
    v = loaded.vocab
    # generate's max_len counts words: the search's end_step
    want = search(ens, ens.init_state(feats), 2, v.bos_id, v.eos_id, 8, beam_size=3, pad_id=v.pad_id,
                  banned=(v.pad_id, v.bos_id, v.unk_id), end_step=True)  # fmt: skip
    got = loaded.generate(feats, beam_size=3, max_len=8)
    assert torch.equal(got.tokens, want.tokens)
    # an ensemble file takes one more member (its decoders first), float16: 4 decoders
    assert export_main([str(out), str(files / "ens4.pt"), "--ensemble", str(files / "m1.pt"), "--half"]) == 0
    assert len(Captioner.load(files / "ens4.pt").model.decoder.members) == 4
    capsys.readouterr()
    assert caption_main(["--model", str(out), "--model-info"]) == 0
    assert "an ensemble of 3 such decoders, their word probabilities averaged" in capsys.readouterr().out


def _refused(capsys, argv, says):
    with pytest.raises(SystemExit) as exc:
        export_main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and says in err, err


def test_what_cannot_be_one_ensemble_is_refused_in_one_line(capsys, files, tmp_path):
    other = Vocabulary.build([["a", "b", "c"]])
    separate_run(other, 1, tmp_path / "vocab.pt")
    m1, bad = str(files / "m1.pt"), str(tmp_path / "bad.pt")
    vocab, gone = tmp_path / "vocab.pt", tmp_path / "gone.pt"
    _refused(capsys, [m1, bad, "--ensemble", str(vocab)], f"--ensemble {vocab}: not the same model")
    for option in ("--ensemble", "--average"):  # not there: load_any's own line, named with its option
        _refused(capsys, [m1, bad, option, str(gone)], f"{option} {gone}: ")
    moved = Captioner.load(files / "m2.pt")
    with torch.no_grad():
        next(moved.model.encoder.parameters()).add_(0.01)
    moved.save(tmp_path / "encoder.pt")
    why = f"--ensemble {tmp_path / 'encoder.pt'}: its encoder's weights differ from {m1}'s: an ensemble shares one"
    _refused(capsys, [m1, bad, "--ensemble", str(tmp_path / "encoder.pt")], why)
    _refused(capsys, [m1, bad, "--ensemble", m1, "--average", m1], "one at a time")
    assert not (tmp_path / "bad.pt").exists()
    # an ensemble is not averaged with a single model, nor trained from
    assert export_main([m1, str(tmp_path / "ens.pt"), "--ensemble", str(files / "m2.pt")]) == 0
    capsys.readouterr()  # its "wrote" line, on stderr
    _refused(
        capsys, [m1, bad, "--average", str(tmp_path / "ens.pt")], f"--average {tmp_path / 'ens.pt'} is an ensemble"
    )
    single = Captioner.load(files / "m1.pt")
    with pytest.raises(ValueError, match="is an ensemble of 2 decoders"):
        Captioner.start_weights(tmp_path / "ens.pt", single.model, single.vocab)

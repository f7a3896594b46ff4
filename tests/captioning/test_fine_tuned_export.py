"""A fine-tuned encoder's model file (issue 72): with --encoder-from-package it carries only the tensors training
changed (float16 with --half), takes the rest from the installed ImageNet package, and loads as the encoder it was;
its encoder is frozen at inference (the fast path: folded, ONNX Runtime); --model-info says how many were tuned;
--member takes one decoder out of an ensemble; --encoder-of puts a decoder on another run's encoder."""

from __future__ import annotations

import pytest
import torch

from captioning.commands.caption import caption_main
from captioning.commands.export import export_main
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from text_attn.core.vocab import Vocabulary

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = Vocabulary.build([["a", "dog", "runs"], ["a", "cat", "sits"]])


def _tuned(fine_tune: str = "last") -> Captioner:
    enc = EncoderConfig("efficientnet_lite0", grid=3, weights="imagenet", fine_tune=fine_tune, image_size=96)
    torch.manual_seed(0)
    cap = Captioner.build(VOCAB, enc, DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8))
    with torch.no_grad():  # what training does to the last stage
        for p in cap.model.encoder.body[-1].parameters():
            p.add_(0.01 * torch.randn_like(p))
    return cap


def test_only_the_changed_tensors_travel_and_the_encoder_loads_as_it_was(tmp_path, capsys):
    cap = _tuned()
    cap.model.eval()
    tuned = {k for k, p in cap.model.encoder.named_parameters() if p.requires_grad}
    full, small = tmp_path / "full.pt", tmp_path / "small.pt"
    cap.save(full)
    cap.save(small, half=True, encoder_from_package=True)
    data = torch.load(small, weights_only=True)
    stored = {k.removeprefix("encoder.") for k in data["state_dict"] if k.startswith("encoder.")}
    assert stored == tuned  # the last stage's weights, none of the ImageNet ones the package has
    assert data["encoder_weights"]["changed"] == len(tuned)
    assert all(data["state_dict"][f"encoder.{k}"].dtype == torch.float16 for k in tuned)
    assert data["encoder"]["fine_tune"] == "none"  # frozen at inference
    assert small.stat().st_size < full.stat().st_size
    back = Captioner.load(small)
    assert back.encoder_changed == len(tuned)
    assert back.model.encoder.fold_for_inference  # the fast frozen path
    mine, theirs = cap.model.encoder.state_dict(), back.model.encoder.state_dict()
    for k in mine:
        torch.testing.assert_close(theirs[k], mine[k].half().float() if k in tuned else mine[k], rtol=0, atol=0)
    images = torch.randn(2, 3, 96, 96)
    with torch.no_grad():
        for p in cap.model.encoder.body[-1].parameters():
            p.copy_(p.half().float())  # the file's float16 rounding: then the same network (folded, ONNX: ~1e-4)
        torch.testing.assert_close(back.model.encode(images), cap.model.encode(images), atol=2e-3, rtol=2e-3)
    assert caption_main(["--model", str(small), "--model-info"]) == 0
    # which stage: recorded from the training setting before the file forced fine_tune none
    assert f"{len(tuned)} tensors fine-tuned on captions (its last stage) stored" in capsys.readouterr().out


@pytest.mark.long
def test_a_re_export_says_what_it_stores_that_its_model_file_left_out(tmp_path, capsys):
    """A model file of float16 weights whose encoder the package ships (the bundled model's kind), re-exported without
    --half and --encoder-from-package: twice the size or more, silently before; each is said in one note, and neither
    where the option keeps it. (This tiny model has no domain check: a third note says so.)"""
    small, out = tmp_path / "small.pt", tmp_path / "out.pt"
    _tuned().save(small, half=True, encoder_from_package=True)
    assert export_main([str(small), str(out)]) == 0
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("caption-export: note: ")]
    assert notes[:2] == [
        f"caption-export: note: small.pt stores float16 weights: {out} holds them as float32, the same values at twice "
        "the size (--half keeps float16)",
        f"caption-export: note: small.pt leaves out its encoder's ImageNet weights (an installed package ships them): "
        f"{out} stores them (--encoder-from-package leaves them out)",
    ]
    assert out.stat().st_size > 2 * small.stat().st_size
    assert export_main([str(small), str(tmp_path / "kept.pt"), "--half", "--encoder-from-package"]) == 0
    assert "weights" not in capsys.readouterr().err.partition("wrote ")[0]  # the domain check's note alone
    assert export_main([str(out), str(tmp_path / "again.pt")]) == 0  # a float32 file with its encoder: nothing to say
    assert "weights" not in capsys.readouterr().err.partition("wrote ")[0]


def test_a_frozen_encoder_still_travels_without_weights(tmp_path):
    cap = _tuned("none")
    with torch.no_grad():  # undo the change: the package's weights exactly
        fresh = Captioner.build(VOCAB, EncoderConfig("efficientnet_lite0", grid=3, image_size=96))
        cap.model.encoder.load_state_dict(fresh.model.encoder.state_dict())
    cap.save(tmp_path / "m.pt", encoder_from_package=True)
    data = torch.load(tmp_path / "m.pt", weights_only=True)
    assert not any(k.startswith("encoder.") for k in data["state_dict"]) and data["encoder_weights"]["changed"] == 0
    assert Captioner.load(tmp_path / "m.pt").encoder_changed == 0


@pytest.mark.long
def test_member_takes_one_decoder_out_of_an_ensemble(tmp_path, capsys):
    from tests.helpers.tiny_captioner import separate_run

    a, b = separate_run(VOCAB, 1), separate_run(VOCAB, 2)
    a.info, b.info = {"training": "run A", "test_scores": {"Bleu_4": 0.2}, "terms": "T"}, {"training": "run B"}
    a.save(tmp_path / "a.pt")
    b.save(tmp_path / "b.pt")
    both = tmp_path / "both.pt"
    assert export_main([str(tmp_path / "a.pt"), str(both), "--ensemble", str(tmp_path / "b.pt")]) == 0
    # the data's facts stay; a's test scores are not the ensemble's; each file's training line, numbered
    told = "an ensemble joined by caption-export --ensemble of: (1) run A; (2) run B"
    assert Captioner.load(both).info == {"training": told, "terms": "T"}
    # a member trained on other data: its data and its data's terms are said too (only the first's were)
    c = separate_run(VOCAB, 3)
    c.info = {"training": "run C", "training_data": "my photos", "terms": "mine: private use"}
    c.save(tmp_path / "c.pt")
    assert export_main([str(tmp_path / "a.pt"), str(tmp_path / "ac.pt"), "--ensemble", str(tmp_path / "c.pt")]) == 0
    info = Captioner.load(tmp_path / "ac.pt").info
    assert info["terms"] == "T; mine: private use" and info["training_data"] == "my photos"
    for k, want in ((1, a), (2, b)):
        out = tmp_path / f"m{k}.pt"
        assert export_main([str(both), str(out), "--member", str(k)]) == 0
        got = Captioner.load(out)
        assert not got.ensemble and got.info["training"] == f"decoder {k} of 2 of: {told}"
        for name, value in want.model.decoder.state_dict().items():
            assert torch.equal(got.model.decoder.state_dict()[name], value)
    capsys.readouterr()
    for src, k, why in ((both, "3", "has decoders 1 to 2"), (tmp_path / "a.pt", "1", "not an ensemble")):
        with pytest.raises(SystemExit) as exc:
            export_main([str(src), str(tmp_path / "x.pt"), "--member", k])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and why in err[0]
    assert not (tmp_path / "x.pt").exists()
    # a --half file and its float32 sibling share one encoder, stored at two precisions (they were refused as two)
    assert export_main([str(tmp_path / "a.pt"), str(tmp_path / "a16.pt"), "--half"]) == 0
    assert export_main([str(tmp_path / "a16.pt"), str(tmp_path / "h.pt"), "--ensemble", str(tmp_path / "b.pt")]) == 0
    assert Captioner.load(tmp_path / "h.pt").ensemble
    # members taken out, joined again: the line says so, not "decoder 1 of 2 of: an ensemble ..." alone
    assert export_main([str(tmp_path / "m1.pt"), str(tmp_path / "j.pt"), "--ensemble", str(tmp_path / "m2.pt")]) == 0
    assert Captioner.load(tmp_path / "j.pt").info["training"] == (
        f"an ensemble joined by caption-export --ensemble of: (1) decoder 1 of 2 of: {told}; (2) decoder 2 of 2 of: "
        f"{told}"
    )


@pytest.mark.long
def test_encoder_of_puts_a_decoder_on_another_runs_encoder(tmp_path, capsys):
    """The bundled model's recipe: its second decoder, taken out (--member 2), over the first's fine-tuned encoder
    (--encoder-of), to train on there and join it again (--ensemble): the file then shares one encoder."""
    from tests.helpers.tiny_captioner import separate_run

    a, b = separate_run(VOCAB, 1, tmp_path / "a.pt"), separate_run(VOCAB, 2)
    with torch.no_grad():  # run a's encoder "fine-tuned": its weights moved
        for p in a.model.encoder.parameters():
            p.add_(0.05 * torch.randn_like(p))
    protos = torch.eye(a.model.encoder.out_dim)[:2]  # made on the encoder's features: as wide as they are
    a.domain, a.domain_check = "a's photos", {"prototypes": protos, "threshold": 0.3}
    a.save(tmp_path / "a.pt")
    b.save(tmp_path / "b.pt")
    both = tmp_path / "both.pt"
    with pytest.raises(SystemExit):  # before: two encoders, no ensemble
        export_main([str(tmp_path / "b.pt"), str(both), "--ensemble", str(tmp_path / "a.pt")])
    assert "an ensemble shares one encoder" in capsys.readouterr().err
    moved = tmp_path / "b_on_a.pt"
    assert export_main([str(tmp_path / "b.pt"), str(moved), "--encoder-of", str(tmp_path / "a.pt")]) == 0
    assert "over the encoder of" in capsys.readouterr().err
    got = Captioner.load(moved)
    for name, value in a.model.encoder.state_dict().items():  # a's encoder
        assert torch.equal(got.model.encoder.state_dict()[name], value), name
    for name, value in b.model.decoder.state_dict().items():  # b's decoder
        assert torch.equal(got.model.decoder.state_dict()[name], value), name
    assert got.domain == "a's photos" and torch.equal(got.domain_check["prototypes"], protos)
    # now the two decoders share one encoder: an ensemble of them is accepted
    assert export_main([str(tmp_path / "a.pt"), str(both), "--ensemble", str(moved)]) == 0
    assert len(Captioner.load(both).decoders) == 2
    # with --average: the decoders averaged, the encoder --encoder-of's (it was the mean of a's and b's encoders, the
    # file saying "encoder from: a.pt")
    mean = tmp_path / "mean_on_a.pt"
    b2 = separate_run(VOCAB, 4)
    b2.save(tmp_path / "b2.pt")
    args = [
        str(tmp_path / "b.pt"),
        str(mean),
        "--average",
        str(tmp_path / "b2.pt"),
        "--encoder-of",
        str(tmp_path / "a.pt"),
    ]
    assert export_main(args) == 0
    got = Captioner.load(mean)
    for name, value in a.model.encoder.state_dict().items():
        assert torch.equal(got.model.encoder.state_dict()[name], value), name
    for name, value in b.model.decoder.state_dict().items():
        if value.is_floating_point():
            assert torch.allclose(
                got.model.decoder.state_dict()[name], (value + b2.model.decoder.state_dict()[name]) / 2
            )
    # another model's encoder: one line, exit code 2, nothing written
    separate_run(VOCAB, 3, tmp_path / "wide.pt", hidden_dim=24)
    capsys.readouterr()
    for other in ("wide.pt", "missing.pt"):
        with pytest.raises(SystemExit) as exc:
            export_main([str(tmp_path / "b.pt"), str(tmp_path / "x.pt"), "--encoder-of", str(tmp_path / other)])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and "--encoder-of" in err[0] and other in err[0]
        assert not (tmp_path / "x.pt").exists()


def _other(path, vocab: Vocabulary = VOCAB, hidden_dim: int = 32, **encoder) -> str:
    """A tiny model file as separate_run's, with other settings: ``encoder``, EncoderConfig fields."""
    enc = EncoderConfig(**{"backbone": "resnet18", "stride": 16, "weights": None, "grid": 4, "image_size": 64,
                           **encoder})  # fmt: skip
    Captioner.build(vocab, enc, DecoderConfig(embed_dim=16, hidden_dim=hidden_dim, attn_dim=16)).save(path)
    return str(path)


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    """separate_run's model file of run 1, written once: the cases below only read it."""
    from tests.helpers.tiny_captioner import separate_run

    path = tmp_path_factory.mktemp("run_a") / "a.pt"
    separate_run(VOCAB, 1, path)
    return path


@pytest.mark.parametrize(
    ("other", "why"),
    [
        ({"image_size": 96}, "its encoder.image_size is 96, not 64"),
        (
            {"source_side": 64, "jpeg_quality": 90, "jpeg_subsampling": "4:2:0"},
            "its encoder.source_side is 64, not none",
        ),
        ({"hidden_dim": 24}, "its decoder.hidden_dim is 24, not 32"),
        ({"vocab": Vocabulary.build([["a", "dog", "runs", "bird"]])}, "another vocabulary: 8 words, not 9"),
        ({"fine_tune": "last", "frozen_bn": False}, None),  # training's alone (a file records frozen_bn false)
    ],
)
def test_a_refused_encoder_of_names_the_setting_that_differs(run_a, tmp_path, capsys, other, why):
    """The refusal said "another vocabulary or other settings": neither which nor how."""
    args = [str(run_a), str(tmp_path / "x.pt"), "--encoder-of", _other(tmp_path / "b.pt", **other)]
    if why is None:
        assert export_main(args) == 0
        return
    with pytest.raises(SystemExit) as exc:
        export_main(args)
    err = capsys.readouterr().err.strip().splitlines()
    said = f"not the same model as {run_a} ({why})"
    assert exc.value.code == 2 and len(err) == 1 and err[0].endswith(said), err


def test_the_stages_a_package_based_file_tuned_are_read_from_the_tensors_it_carries():
    """The bundled model's file records no fine-tuned stages (only "57 tensors"): a run started from it, frozen,
    wrote a model file whose --model-info said its encoder was ImageNet's ("weights in the file"), though its last
    stage had learned from captions. Its tensors say which stages: the last."""
    from captioning.model.captioner import stages_tuned

    z, body = torch.zeros(1), ["stem", "stride2", "stride4", "stride8", "stride16", "stride32"]
    assert stages_tuned({"encoder.body.stride32.0.weight": z, "decoder.w": z}, body) == "last"
    assert stages_tuned({"encoder.body.stride16.1.bias": z, "encoder.body.stride32.0.weight": z}, body) == "last2"
    assert stages_tuned({"encoder.body.stride4.0.weight": z, "encoder.body.stride32.0.weight": z}, body) == "all"
    assert stages_tuned({"decoder.w": z}, body) is None
    # a stride-16 encoder's last stage is stride16 (it was read as two stages; review)
    assert stages_tuned({"encoder.body.stride16.0.weight": z}, body[:-1]) == "last"
    bundled = Captioner.load()
    assert bundled.encoder_changed == 57 and bundled.fine_tuned == "last"
    assert Captioner.read_start("flickr8k", member=1).tuned == "last"  # what a run started from it records

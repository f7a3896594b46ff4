"""Loading a bundled model draws nothing at random and builds the network a default build and load would: every
parameter and buffer (the Transformer's sinusoid table, the encoder's BatchNorm statistics) equal, in the encoder's
channels-last layout (text_attn.core.empty_build)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from captioning.model.bundled import BUNDLED_MODEL
from captioning.model.captioner import Captioner
from captioning.model.ensemble import DecoderEnsemble
from text_attn.core.modelfile import ModelFileError, load_model_file
from text_attn.translation.bundled import BAHDANAU_MODEL
from text_attn.translation.transformer import sinusoid_table
from text_attn.translation.translate_cli import BUNDLED_MODEL as TRANSFORMER_MODEL
from text_attn.translation.translator import KIND, Translator


def _tensors(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(net.named_parameters()), **dict(net.named_buffers())}


def test_the_translators_load_as_a_default_build_and_load_would():
    from text_attn.translation.networks import build_network, make_config

    for path in (TRANSFORMER_MODEL, BAHDANAU_MODEL):
        rng = torch.random.get_rng_state()
        loaded = Translator.load(path).net
        assert torch.equal(torch.random.get_rng_state(), rng), path.name
        data = load_model_file(path, KIND)
        ref = build_network(data["arch"], make_config(data["arch"], dict(data["config"])))
        ref.load_state_dict(data["state_dict"])
        got, want = _tensors(loaded), _tensors(ref)
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want), path.name
    table = Translator.load(TRANSFORMER_MODEL).net.src_pos.table
    assert torch.equal(table, sinusoid_table(*table.shape))


def test_the_bundled_captioner_loads_as_a_default_build_and_load_would():
    """Its decoders as a default build loads them; its encoder's stored tensors (the fine-tuned last stage) in place."""
    from captioning.model.captioner import KIND as CAPTION_KIND
    from captioning.model.captioner import VERSION
    from captioning.model.decoder import DecoderConfig

    rng = torch.random.get_rng_state()
    model = Captioner.load().model
    assert torch.equal(torch.random.get_rng_state(), rng)
    data = load_model_file(BUNDLED_MODEL, CAPTION_KIND, VERSION)
    ref = DecoderEnsemble.build(DecoderConfig(**data["decoder"]), data["decoder_members"])
    ref.load_state_dict({k.removeprefix("decoder."): v for k, v in data["state_dict"].items() if k[:8] == "decoder."})
    got, want = _tensors(model.decoder), _tensors(ref)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    # the encoder's fine-tuned last stage, stored in the file, over the weights of its package (the rest)
    encoder = _tensors(model.encoder)
    stored = {k.removeprefix("encoder."): v for k, v in data["state_dict"].items() if k.startswith("encoder.")}
    assert stored and all(torch.equal(encoder[k], v.to(encoder[k].dtype)) for k, v in stored.items())
    convs = [p for p in model.encoder.body.parameters() if p.dim() == 4]
    assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
    assert not any(t.is_meta for t in _tensors(model).values())


def test_each_family_knows_the_other_familys_bundled_names():
    """caption --model transformer names translate: captioning's list of the text models' names is text_attn's own
    table's (captioning may not import it)."""
    from captioning.model import bundled as caption_bundled
    from text_attn.translation import bundled as text_bundled

    assert caption_bundled.TEXT_NAMES == tuple(text_bundled.MODEL_NAMES)
    assert caption_bundled.text_model_named("transformer").startswith("transformer is a bundled text model")
    assert caption_bundled.text_model_named("shapes") is None and caption_bundled.text_model_named(None) is None
    # Python says it as the command does (Captioner.load("bahdanau") was "model file not found"), and so for the other
    with pytest.raises(ModelFileError, match="^bahdanau is a bundled text model: translate --model bahdanau SENTENCE"):
        Captioner.load("bahdanau")
    for load, names in ((Captioner.load, "flickr8k, shapes"), (Translator.load, "multi30k_de_en, transformer")):
        with pytest.raises(TypeError, match=f"a model is a file's path or a bundled model's name \\({names}"):
            load(5)  # was pathlib's "expected str, bytes or os.PathLike object, not int"


def test_a_folder_named_as_a_bundled_model_does_not_hide_it(tmp_path, monkeypatch):
    """Flickr8k's own folder, ``flickr8k/``, beside the user made ``model.init_from flickr8k`` "no such file" (a path
    here won over the bundled name, though a folder is no model); a file of that name still wins."""
    from captioning.model.bundled import model_path
    from text_attn.translation.bundled import model_path as text_model_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "flickr8k").mkdir()
    (tmp_path / "transformer").mkdir()
    assert model_path("flickr8k") == BUNDLED_MODEL
    assert text_model_path("transformer").is_file() and text_model_path("transformer").name != "transformer"
    (tmp_path / "shapes").write_bytes(b"mine")
    assert model_path("shapes") == Path("shapes")

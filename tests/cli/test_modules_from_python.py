"""Both families' LightningModules driven from Python, as a notebook drives them: ``load_from_checkpoint`` of a run's
checkpoint (no data module at hand) builds the network from what the checkpoint carries and computes what the
exported model file computes; ``trainer.predict`` returns each test item's caption or translation; a network given data
whose vocabulary is not its own is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from captioning import Captioner
from captioning.training.data import CaptionDataModule
from captioning.training.module import CaptionModule
from text_attn import Translator
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule

pytestmark = pytest.mark.usefixtures("one_thread")

TINY_ENCODER = dict(backbone="resnet18", weights=None, grid=4, stride=32, image_size=64, crop=False)


def _caption_data(**kw) -> CaptionDataModule:
    return CaptionDataModule(source="shapes", train_size=32, val_size=8, test_size=8, scene_size=64, max_objects=2,
                             batch_size=16, cache_features=True, feature_cache_dir=None, **kw)  # fmt: skip


def _text_data(**kw) -> TranslationDataModule:
    return TranslationDataModule(task="reorder", train_size=96, val_size=16, test_size=16, batch_size=16, min_len=5,
                                 max_len=12, **kw)  # fmt: skip


def _modules(family: str, root: Path):
    if family == "caption":
        decoder = dict(embed_dim=16, hidden_dim=32, attn_dim=16, dropout=0.0)
        module = CaptionModule(encoder=TINY_ENCODER, decoder=decoder, lr=0.01, val_max_len=12, val_meteor=False,
                               export_path=str(root / "model.pt"))  # fmt: skip
        return CaptionModule, module, _caption_data()
    network = dict(attention="bahdanau", embed_dim=16, enc_hidden=16, dec_hidden=32, attn_dim=16)
    module = TranslationModule(arch="rnn", network=network, lr=0.005, export_path=str(root / "model.pt"))
    return TranslationModule, module, _text_data()


def _trainer(root: Path, **kw) -> pl.Trainer:
    return pl.Trainer(default_root_dir=root, logger=False, enable_progress_bar=False, enable_model_summary=False,
                      accelerator="cpu", **kw)  # fmt: skip


@pytest.fixture(scope="module", params=["caption", "text"])
def run(request, tmp_path_factory):
    """One tiny fit per family; its last checkpoint holds the weights its model file was exported from (nothing
    monitored: the last weights)."""
    root = tmp_path_factory.mktemp(request.param)
    pl.seed_everything(0, verbose=False)
    cls, module, dm = _modules(request.param, root)
    last = ModelCheckpoint(dirpath=root / "checkpoints", save_last=True)
    _trainer(root, max_steps=4, limit_val_batches=1, num_sanity_val_steps=0, callbacks=[last]).fit(module, dm)
    return request.param, cls, module, dm, root


def _predictions(module, dm) -> list[dict]:
    return [row for batch in _trainer(Path("."), enable_checkpointing=False).predict(module, dm) for row in batch]


def test_a_checkpoint_loads_as_the_module_and_computes_what_its_model_file_does(run):
    family, cls, fitted, dm, root = run
    loaded = cls.load_from_checkpoint(root / "checkpoints" / "last.ckpt")  # was: unexpected keys "model.*" / "net.*"
    for name, weight in fitted.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], weight), name
    if family == "caption":
        features = dm.features["val"].float()
        ours = loaded.captioner().caption_features(features, 1, 12)
        theirs = Captioner.load(root / "model.pt").caption_features(features, 1, 12)
        assert [words for words, *_ in ours] == [words for words, *_ in theirs]
        for (_, alphas, *_), (_, exported, *_) in zip(ours, theirs, strict=True):
            torch.testing.assert_close(alphas, exported)
        # what the data was, kept as caption-export keeps it (it was None: a model file saved from it lost them)
        again, model_file = loaded.captioner(for_export=True), Captioner.load(root / "model.pt")
        assert again.domain == model_file.domain == "synthetic shapes" and again.casing == model_file.casing
        assert again.info == model_file.info and (again.domain_check is None) == (model_file.domain_check is None)
    else:
        sources = [" ".join(example.src) for example in dm.splits["val"].examples]
        exported = Translator.load(root / "model.pt")
        assert [t.text for t in loaded.translator().translate(sources)] == [t.text for t in exported.translate(sources)]
    # and used with data, as the fitted module is: the same predictions
    assert _predictions(loaded, dm) == _predictions(fitted, dm)


def test_predict_gives_each_test_item_its_output(run):
    family, _, fitted, dm, _ = run
    rows = _predictions(fitted, dm)  # was: a ValueError unpacking the captions; no predict_step (text)
    assert sorted(row["index"] for row in rows) == list(range(8 if family == "caption" else 16))
    key = "caption" if family == "caption" else "translation"
    assert all(isinstance(row[key], str) for row in rows)
    if family == "caption":  # each photo's greedy caption, as the module's captioner gives it
        words = [w for w, *_ in fitted.captioner().caption_features(dm.features["test"].float(), 1, 12)]
        assert [row["caption"] for row in sorted(rows, key=lambda r: r["index"])] == [" ".join(w) for w in words]


def test_a_loaded_network_refuses_data_of_another_vocabulary(run):
    family, cls, _, _, root = run
    loaded = cls.load_from_checkpoint(root / "checkpoints" / "last.ckpt")
    other = _caption_data(min_freq=1000) if family == "caption" else _text_data(max_vocab=10)
    with pytest.raises(ValueError, match="vocabulary .* differs from the one built from the data"):
        _trainer(root).validate(loaded, other, verbose=False)

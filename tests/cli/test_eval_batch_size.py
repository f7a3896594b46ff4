"""One set of weights gets one validation / test score whatever data.batch_size (docs: validate takes any batch
size). An audit's checkpoint scored val_bleu 0.0040 / val_loss 2.682 at batch 64 and 0.0060 / 2.653 at batch 8: the
text decoding capped every sentence at 2 x its batch's longest source + 10, and both families logged the loss as a
mean of batch means. Untrained seeded weights (--ckpt_path null) show both at their plainest: their outputs run to
the cap, and their losses are far from equal per word."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from captioning.commands.train import caption_train_cli
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule
from text_attn.translation.objective import decode_caps
from text_attn.translation.train_cli import text_train_cli

FIX = Path(__file__).parent.parent / "fixtures"
# the losses' parts all in: label smoothing and attention supervision (its own count of supervised steps)
PARTS = ["--data.attention_targets", "true", "--model.objective.attn_sup_lambda", "0.5"]
PARTS += ["--model.objective.label_smoothing", "0.1"]


def _scores(cli_main, args: list[str], batch_sizes: tuple[int, int]) -> list[dict[str, float]]:
    out = []
    for size in batch_sizes:  # the whole split at each size: 1 batch, then several with a short last one
        cli = cli_main([*args, "--data.batch_size", str(size), "--ckpt_path", "null"])
        out.append({k: float(v) for k, v in cli.trainer.callback_metrics.items()})
    return out


@pytest.mark.parametrize(
    ("stage", "config", "more"),
    [
        ("validate", "tiny_reorder.yaml", PARTS),
        ("test", "tiny_transformer.yaml", ["--model.val_beam_size", "2"]),  # test's own metrics, a beam's caps
    ],
)
def test_text_scores_do_not_depend_on_the_batch_size(cli_run_in_tmp, stage, config, more):
    args = [stage, "--config", str(FIX / "text" / config), "--data.val_size", "16", "--data.test_size", "16"]
    args += ["--trainer.limit_val_batches", "1.0", "--trainer.limit_test_batches", "1.0"]
    whole, parts = _scores(text_train_cli, [*args, *more], (16, 5))
    prefix = "val" if stage == "validate" else "test"
    assert {f"{prefix}_loss", f"{prefix}_bleu", f"{prefix}_align_acc"} <= set(whole)
    assert ("val_attn_sup" in whole) == (stage == "validate")
    assert parts == pytest.approx(whole, rel=1e-5, abs=1e-7)


@pytest.mark.long
def test_caption_scores_do_not_depend_on_the_batch_size(cli_run_in_tmp):
    args = ["validate", "--config", str(FIX / "captions/tiny_shapes.yaml"), "--data.val_size", "10"]
    args += ["--trainer.limit_val_batches", "1.0", "--model.val_beam_size", "2", *PARTS]
    whole, parts = _scores(caption_train_cli, args, (10, 3))
    assert {"val_loss", "val_Bleu_4", "val_CIDEr", "val_grounding", "val_grounding_mass"} <= set(whole)
    assert parts == pytest.approx(whole, rel=1e-5, abs=1e-7)


def test_each_sentence_is_decoded_to_the_cap_translate_gives_it(one_thread):
    """Validation's per-sentence cap is translate's (2 x (source tokens + 1) + 10): each sentence of a batch of mixed
    lengths decodes to what Translator.translate_tokens gives it alone, the short ones cut at their own cap."""
    dm = TranslationDataModule(task="reorder", train_size=64, val_size=8, test_size=8, batch_size=8, min_len=5,
                               max_len=20)  # fmt: skip
    torch.manual_seed(0)
    net = {"attention": "bahdanau", "embed_dim": 16, "enc_hidden": 16, "dec_hidden": 32, "attn_dim": 16}
    module = TranslationModule(network=net)
    module.trainer = SimpleNamespace(datamodule=dm)  # all setup reads from a trainer
    module.setup("validate")
    module.net.eval()
    batch = next(iter(dm.val_dataloader()))
    lens = batch["src_lens"]
    assert int(lens.min()) < int(lens.max())  # sentences of other lengths share the batch
    assert decode_caps(lens).tolist() == [2 * n + 10 for n in lens.tolist()]  # each with its end token
    decoded = [module.tgt_vocab.decode(t) for t in module._decode(batch).token_lists()]
    translator, examples = module.translator(), dm.splits["val"].examples
    alone = [translator.translate_tokens([examples[i].src])[0].tokens for i in batch["index"].tolist()]
    assert decoded == alone
    # the untrained network writes no end: each output runs to its own cap, not the batch's longest's
    assert [len(t) for t in decoded] == decode_caps(lens).tolist()

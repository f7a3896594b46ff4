"""Which shipped configs the default test run fits (tests/cli/test_shipped_configs.py); the others run with -m slow.
One rule for both tests that need it: the fits, and the parse check for the configs the default run does not fit."""

from __future__ import annotations

from pathlib import Path

# The default run fits one config per code path; the others repeat a path it fits: the fine-tuning stages
# (EfficientNet's last stage trains: ~20 s each here); the COCO configs and flickr8k_resnet101_soft (the Karpathy
# reader with a ResNet: tests/cli/test_caption_train.py reads it); Flickr8k's hard and SCST stages (hard attention:
# shapes_hard; SCST: shapes_soft_scst, ~3 s against ~6 s; the Flickr8k reader: flickr8k_lite2_soft; a start from the
# bundled captioner: your_photos, not its SCST stage; the bundled Transformer's your_pairs: its mechanics are
# tests/text/test_text_start_from.py's); German captions (the Multi30k reader and the casing:
# tests/captioning/test_caption_languages.py fits them); the dates task,
# reorder_transformer and the Multi30k configs but one (each network is fitted on reorder, the reader by
# multi30k_de_en_transformer); the distillation stage (a start from the bundled Transformer with links, as
# multi30k_de_en_transformer_aligned); the captioner's distillation stage (a start from the bundled captioner's first
# decoder: your_photos).
SLOW = ("finetune", "coco_", "flickr8k_resnet101_soft", "flickr8k_lite2_hard", "flickr8k_lite2_soft_scst", "dates_",
        "your_photos_scst", "your_pairs", "flickr8k_de_",
        "reorder_transformer", "multi30k_de_en_bahdanau", "multi30k_de_en_luong", "multi30k_de_en_none",
        "multi30k_en_fr_", "transformer_distilled", "flickr8k_distilled")  # fmt: skip


def fitted_by_default(config: Path) -> bool:
    return not any(k in config.stem for k in SLOW)

"""The core every model family imports: attention modules, decoding (greedy and beam search), the vocabulary,
metrics, model files, errors, the length-bucketing batch sampler and the Lightning CLI runner.

It never imports an application (``text_attn.translation``, ``captioning``). Only ``lightning_cli`` and ``training``
import Lightning, and only when they are imported themselves.
"""

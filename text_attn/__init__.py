"""text_attn: the attention library every model family shares (``text_attn.core``) and the text models
(``text_attn.translation``: RNN encoder-decoder, Transformer, their data, training and ``translate``).

Importing this package, or ``text_attn.core``, builds nothing and imports no Lightning.
"""

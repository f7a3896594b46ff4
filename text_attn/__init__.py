"""text_attn: the shared attention library (attention, vocabulary, decoding, metrics) and the text models."""

"""The text application: RNN encoder-decoder (Bahdanau, Luong) and Transformer networks, synthetic tasks and
parallel corpora, the data module, the LightningModule, the ``Translator`` inference object and the CLIs."""

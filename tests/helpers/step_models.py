"""Small models for the search tests (text_attn.core.decoding and fixed_search): the search's step protocol on a random
recurrent scorer."""

import torch
from torch import nn


class RandomGRU(nn.Module):
    """A random recurrent scorer with per-sentence initial states (``{"h": (B, 16)}``): a realistic step model."""

    def __init__(self, vocab=11, hidden=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def step(self, tokens, state):
        h = self.cell(self.emb(tokens), state["h"])
        logits = self.out(h) * 3.0  # sharpen so sequences end at different lengths
        return torch.log_softmax(logits, -1), torch.softmax(h[:, :5], -1), {"h": h}

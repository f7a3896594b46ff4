"""Small models for the search tests (text_attn.core.decoding and fixed_search): the search's step protocol on a random
recurrent scorer, and on a hand-built table of log-probabilities."""

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


BOS, EOS, PAD = 1, 2, 0


class TableModel:
    """Log-probs read from a table keyed by the prefix (a hand-built scorer)."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab: int = 6):
        self.table, self.vocab = table, vocab

    def step(self, tokens, state):
        prefixes = [p + (int(t),) for p, t in zip(state["prefix"], tokens, strict=True)]
        rows = []
        for p in prefixes:
            probs = torch.full((self.vocab,), 1e-9)
            for tok, pr in self.table.get(p[1:], {EOS: 1.0}).items():
                probs[tok] = pr
            rows.append((probs / probs.sum()).log())
        attn = torch.stack([torch.tensor([len(p), 0.0]) for p in prefixes])
        return torch.stack(rows), attn, {"prefix": prefixes, "dummy": state["dummy"]}

    def select_state(self, state, index):
        return {
            "prefix": [state["prefix"][i] for i in index.tolist()],
            "dummy": state["dummy"][index],
        }


def table_state(n):
    """A TableModel's state for ``n`` rows: empty prefixes."""
    return {"prefix": [()] * n, "dummy": torch.zeros(n)}


# Greedy takes 3 (0.5) then must pick among weak continuations (best 0.4 -> total 0.2);
# beam finds 4 (0.4) then 5 (0.9) = 0.36.
TRAP = {
    (): {3: 0.5, 4: 0.4, EOS: 0.1},
    (3,): {3: 0.4, 4: 0.3, 5: 0.3},
    (4,): {5: 0.9, EOS: 0.1},
    (3, 3): {EOS: 1.0},
    (4, 5): {EOS: 1.0},
}


class EndsAt(RandomGRU):
    """RandomGRU whose source b can only end at step ends[b] and then must: ``ends`` is kept one row per source (row
    r of the queries reads source r // K, as the caption decoder's keys), so a source leaving the batch must take its
    row of it along."""

    one_row_per_source_state = ("ends",)

    def step(self, tokens, state):
        log_probs, attn, new = super().step(tokens, state)
        ends, t = state["ends"], state["t"]
        at_end = ends.repeat_interleave(tokens.numel() // ends.numel()) == t  # (N,)
        logits = log_probs.clone()
        logits[:, EOS] = torch.where(at_end, 50.0, -50.0)  # end exactly at the source's step
        return torch.log_softmax(logits, -1), attn, {**new, "ends": ends, "t": t + 1}

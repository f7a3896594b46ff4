"""Reference models for the beam-search state tests (tests/captioning/test_caption_search_state.py,
tests/text/test_text_search_state.py)."""

from text_attn.core.decoding import select_rows


class Plain:
    """The same model with no one-row-per-source / source-constant state and its own ``select_state``: beam search
    expands and reorders everything and steps every row until the last source ends (the reference)."""

    def __init__(self, model):
        self.model = model

    def step(self, tokens, state):
        return self.model.step(tokens, state)

    def select_state(self, state, index):
        return select_rows(state, index)


class Counting:
    """The same model, its state layout included, counting the rows each step runs on (``rows``, one entry a step)."""

    def __init__(self, model):
        self.model, self.rows = model, []
        for name in ("one_row_per_source_state", "source_constant_state"):
            if hasattr(model, name):
                setattr(self, name, getattr(model, name))

    def step(self, tokens, state):
        self.rows.append(tokens.numel())
        return self.model.step(tokens, state)

"""The reference model for the beam-search state tests (tests/captioning/test_caption_search_state.py,
tests/text/test_text_search_state.py)."""


class Plain:
    """The same model with no one-row-per-source / source-constant state: beam search expands and reorders
    everything (the reference)."""

    def __init__(self, model):
        self.model = model

    def step(self, tokens, state):
        return self.model.step(tokens, state)

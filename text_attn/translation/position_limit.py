"""What a model with a learned position table (a Transformer with ``positions: learned``) cannot read or write, in
one wording for ``translate``, the Python API (Translator.length_error) and attention-serve's HTTP process, which
refuses such a request before a worker sees it and imports no torch: nor does this module."""

from __future__ import annotations

LEARNED = "the {most} positions the model learned (positions: learned)"


def position_error(
    most: int | None, n_tokens: int | None = None, max_len: int | None = None, given: int | None = None
) -> str | None:
    """What is wrong, for a model of ``most`` learned positions (None: any length), with a source of ``n_tokens``
    tokens, an output cap ``max_len`` (tokens, the end not counted) or a translation given to read of ``given`` tokens
    as the model writes them (it is read with its end), in a few words; None: nothing."""
    if most is None:
        return None
    learned = LEARNED.format(most=most)
    if n_tokens is not None and n_tokens + 1 > most:
        return f"{n_tokens:,} tokens: with its end more than {learned}; split it"
    if given is not None and given + 1 > most:
        return f"{given:,} tokens as the model writes them: with its end more than {learned}, room for {most - 1}"
    if max_len is not None and max_len + 1 > most:
        room = f"room for {most - 1} output tokens and the end"
        return f"max_len {max_len}: the model learned {most} positions, {room} (positions: learned)"
    return None

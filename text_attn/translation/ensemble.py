"""Translators of one language pair decoded as one model: TranslationEnsemble (the step model) and
EnsembleTranslator (a Translator whose searches and readings step it).

Each member reads the sentence as the first reads it (its casing fixes), spelled in the member's own tokens and source
vocabulary, and keeps its own decoder state; a step's next-token distribution is the mean of the members'
probabilities, p(y) = (1/K) Σ_k p_k(y), over the first member's target vocabulary. The members may differ in kind (a
Transformer and a GRU) and in vocabulary, as long as every target token of each is one of the first's: the search then
writes the first's tokens, each member is fed the same token by its own id, and a token a member cannot write has
probability 0 in that member's share. The bundled Transformer and GRU qualify (the GRU's 4,149 target pieces are all
among the Transformer's 7,549); on Multi30k together they translate at +0.5 sacreBLEU over the Transformer alone on val
and +0.7 on test (the distilled Transformer bundled since 2026-12-04; with the one before it +1.0 and +0.8:
``benchmarks/translate_ensemble.py``, docs/results.md).

TranslationEnsemble speaks the search protocol (``step``, ``source_constant_state``, ``one_row_per_source_state``) with
a flat state, ``"k.name"`` for member k's entry ``name``, as captioning.model.ensemble.DecoderEnsemble does for
decoders. It decodes; it does not train (each member trains on its own). The attention a step returns is the first
member's, over the first member's source tokens (the members' source tokens need not line up). EnsembleTranslator is
the first member as ``translate`` and Python use it (its reading of the input, its notes, its recorded decoding, its
attention), with the ensemble's words and probabilities.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
from torch import Tensor

from text_attn.core.api_args import a_batch
from text_attn.core.decoding import evaluating
from text_attn.translation.translator import Translator


class TranslationEnsemble:
    """The members' networks stepped as one (the search protocol): see the module doc."""

    def __init__(self, members: list[Translator], names: list[str] | None = None):
        """``names``: what the messages call each member (``translate`` says its options); default "member k" and
        "the first member"."""
        members = a_batch(members, "an ensemble", "translators")
        wrong = next((m for m in members if not isinstance(m, Translator)), None)
        if wrong is not None:  # a name reached "'str' object has no attribute 'codec'"
            raise TypeError(f"an ensemble's members are translators (Translator.load(name or path) each), got "
                            f"{type(wrong).__name__} {wrong!r}"[:300])  # fmt: skip
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 translators, got {len(members)}")
        names = names or ["the first member", *(f"member {k}" for k in range(1, len(members)))]
        if len(names) != len(members):  # zip's "argument 2 is longer than argument 1"
            raise ValueError(f"an ensemble of {len(members)} translators needs {len(members)} names, got {len(names)}")
        first = members[0]
        for name, m in zip(names[1:], members[1:], strict=True):
            if (m.codec.mode, m.lower) != (first.codec.mode, first.lower):
                raise ValueError(f"{name} reads text as {m.codec.mode} tokens (lowercased: {m.lower}), {names[0]} as "
                                 f"{first.codec.mode} (lowercased: {first.lower}): an ensemble's members write the "
                                 "same tokens")  # fmt: skip
            if m.source_lang and first.source_lang and m.source_lang != first.source_lang:
                raise ValueError(f"{name} translates from {m.source_lang!r}, {names[0]} from {first.source_lang!r}")
            foreign = first.tgt_vocab.unknown(m.tgt_vocab.itos)
            if foreign:
                shown = ", ".join(repr(t) for t in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
                raise ValueError(f"{name} can write {len(foreign)} target token(s) that {names[0]}'s vocabulary "
                                 f"lacks ({shown}): the model with the largest target vocabulary goes "
                                 "first")  # fmt: skip
        self.members = members
        # member k's id of each first-vocabulary token (its unknown id where it lacks it): (V_first,) each
        self.fed = [torch.tensor(m.tgt_vocab.encode(first.tgt_vocab.itos, eos=False)) for m in members[1:]]
        # where member k's probabilities go in the first's vocabulary: (V_k,) each (every token is there: checked)
        self.placed = [torch.tensor(first.tgt_vocab.encode(m.tgt_vocab.itos, eos=False)) for m in members[1:]]
        self.source_constant_state = tuple(
            f"{k}.{name}" for k, m in enumerate(members) for name in getattr(m.net, "source_constant_state", ())
        )
        self.one_row_per_source_state = tuple(
            f"{k}.{name}" for k, m in enumerate(members) for name in getattr(m.net, "one_row_per_source_state", ())
        )

    # --- search protocol ---------------------------------------------------------------------------------------------
    def encode(self, toks: list[list[str]], first: tuple[Tensor, Tensor] | None = None) -> dict:
        """The first member's tokens of a batch of sentences -> every member's initial state (entries ``"k.name"``).
        Another member reads each sentence's text (the first's tokens joined again) with its own tokens, so a word
        the first spells from other pieces is spelled as that member learned it. ``first``: the first member's
        (src, lens) of ``toks`` where already made."""
        state = {}
        text = self.members[0].codec.decode
        for k, m in enumerate(self.members):
            own = toks if k == 0 else [m.codec.encode(text(t), "source") for t in toks]
            for t in own:
                if error := m.length_error(len(t)):
                    raise ValueError(f"member {k}: {error}")
            src, lens = first if k == 0 and first is not None else m._source_batch(own)
            state.update({f"{k}.{name}": v for name, v in m.net.encode(src, lens).items()})
        return state

    def step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor | None, dict]:
        """tokens (N,) of the first's vocabulary -> log of the members' mean probabilities (N, V_first), the first
        member's attention, the new state."""
        shares, attention, new = [], None, {}
        for k, m in enumerate(self.members):
            prefix = f"{k}."
            own = {name.removeprefix(prefix): v for name, v in state.items() if name.startswith(prefix)}
            fed = tokens if k == 0 else self.fed[k - 1].to(tokens.device)[tokens]
            log_probs, attn, after = m.net.step(fed, own)  # (N, V_k)
            if k == 0:
                attention, share = attn, log_probs
            else:  # onto the first's vocabulary (in its dtype): a token this member cannot write gets log 0 = -inf
                share = shares[0].new_full((log_probs.size(0), len(self.members[0].tgt_vocab)), -math.inf)
                share[:, self.placed[k - 1].to(tokens.device)] = log_probs.to(share.dtype)
            shares.append(share)
            new.update({prefix + name: v for name, v in after.items()})
        # log((1/K) Σ_k exp(lp_k)), stably: (K, N, V) -> (N, V)
        return torch.logsumexp(torch.stack(shares), dim=0) - math.log(len(shares)), attention, new


class EnsembleTranslator(Translator):
    """The first member as a Translator (its vocabularies, reading of the input, notes, recorded decoding, network and
    attention), whose searches and readings step all the members together: ``translate``, ``read`` and ``with_probs``
    give the ensemble's words and probabilities. What drives each word (``explain``) is not measured for an
    ensemble."""

    def __init__(self, members: list[Translator], names: list[str] | None = None):
        self.ensemble = TranslationEnsemble(members, names)  # the checks first (names: as TranslationEnsemble's)
        first = self.ensemble.members[0]  # as it read them: a generator given is read once ("not subscriptable")
        self.__dict__.update(first.__dict__)  # the first member's state, its own dict copied below
        self.info = dict(first.info)

    @property
    def members(self) -> list[Translator]:
        return self.ensemble.members

    @property
    def stepped(self) -> TranslationEnsemble:
        return self.ensemble

    def _encoded(self, toks: list[list[str]], src: Tensor, lens: Tensor) -> dict:
        return self.ensemble.encode(toks, (src, lens))

    def _evaluating(self) -> contextlib.AbstractContextManager:
        stack = contextlib.ExitStack()
        for m in self.members:
            stack.enter_context(evaluating(m.net))
        return stack

    @property
    def position_limit(self) -> int | None:
        """The fewest rows of a member's learned position table (None: no member has one): every output cap
        (:meth:`default_steps`) stays within it."""
        limits = [m.position_limit for m in self.members if m.position_limit is not None]
        return min(limits, default=None)

    def length_error(self, n_tokens: int | None = None, max_len: int | None = None, given: int | None = None):
        """The first member's words for what its positions cannot hold, else another member's (learned positions)."""
        return next(filter(None, (m.length_error(n_tokens, max_len, given) for m in self.members)), None)

    def search_bytes(self, n_tokens: int, beam_size: int = 1, max_len: int | None = None) -> int:
        """Every member keeps its own search state: the sum of theirs."""
        return sum(m.search_bytes(n_tokens, beam_size, max_len) for m in self.members)

    def to(self, device: str | torch.device) -> EnsembleTranslator:
        for m in self.members:
            m.to(device)
        return self

    def explain(self, translation: Any, **decoding: Any):
        """Not for an ensemble: ValueError (what drives each word is measured for one model; explain with a member,
        ``.members``)."""
        raise ValueError("what drives each word (evidence) is measured for one model, not an ensemble: explain with "
                         "one of its members")  # fmt: skip

    def save(self, path: Any, half: bool = False):
        """Not for an ensemble: TypeError (it is no one model file; save each of ``.members``)."""
        raise TypeError("an ensemble is not one model file: save each member (its members: .members)")

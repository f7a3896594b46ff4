"""TranslationEnsemble: K translators of one language pair decoded as one model.

Each member reads the sentence its own way (its own casing fixes, tokens and source vocabulary) and keeps its own
decoder state; a step's next-token distribution is the mean of the members' probabilities, p(y) = (1/K) Σ_k p_k(y),
over the first member's target vocabulary. The members may differ in kind (a Transformer and a GRU) and in vocabulary,
as long as every target token of each is one of the first's: the search then writes the first's tokens, each member
is fed the same token by its own id, and a token a member cannot write has probability 0 in that member's share.
The bundled Transformer and GRU qualify (the GRU's 4,149 target pieces are all among the Transformer's 7,549); on
Multi30k together they translate at +1.0 sacreBLEU over the Transformer alone on val and +0.8 on test
(``benchmarks/translate_ensemble.py``, docs/results.md).

It speaks the search protocol (``step``, ``source_constant_state``, ``one_row_per_source_state``) with a flat state,
``"k.name"`` for member k's entry ``name``, as captioning.model.ensemble.DecoderEnsemble does for decoders. It
decodes; it does not train (each member trains on its own). The attention a step returns is the first member's, over
the first member's source tokens (the members' source tokens need not line up).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
from torch import Tensor

from text_attn.core.decoding import evaluating, search
from text_attn.translation.translator import Translator, never_written


class TranslationEnsemble:
    def __init__(self, members: list[Translator]):
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 translators, got {len(members)}")
        first = members[0]
        for k, m in enumerate(members[1:], start=1):
            if (m.codec.mode, m.lower) != (first.codec.mode, first.lower):
                raise ValueError(f"member {k} reads text as {m.codec.mode} tokens (lowercased: {m.lower}), the first "
                                 f"as {first.codec.mode} (lowercased: {first.lower}): an ensemble's members write the "
                                 "same tokens")  # fmt: skip
            if m.source_lang and first.source_lang and m.source_lang != first.source_lang:
                raise ValueError(f"member {k} translates from {m.source_lang!r}, the first from {first.source_lang!r}")
            foreign = first.tgt_vocab.unknown(m.tgt_vocab.itos)
            if foreign:
                shown = ", ".join(repr(t) for t in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
                raise ValueError(f"member {k} can write {len(foreign)} target token(s) the first member's "
                                 f"vocabulary lacks ({shown}): put the member with the largest target vocabulary "
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
    def encode(self, sentences: list[str]) -> tuple[dict, list[list[str]]]:
        """Each member's initial state for the sentences, read as that member reads them (its entries named
        ``"k.name"``), and the first member's tokens of each (its output caps are the ensemble's)."""
        state, first_tokens = {}, []
        for k, m in enumerate(self.members):
            _, toks = m._inputs(sentences)
            for t in toks:
                if error := m.length_error(len(t)):
                    raise ValueError(f"member {k}: {error}")
            src, lens = m._source_batch(toks)
            state.update({f"{k}.{name}": v for name, v in m.net.encode(src, lens).items()})
            first_tokens = first_tokens or toks
        return state, first_tokens

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
            else:  # onto the first's vocabulary: a token this member cannot write gets log 0 = -inf
                share = log_probs.new_full((log_probs.size(0), len(self.members[0].tgt_vocab)), -math.inf)
                share[:, self.placed[k - 1].to(tokens.device)] = log_probs
            shares.append(share)
            new.update({prefix + name: v for name, v in after.items()})
        # log((1/K) Σ_k exp(lp_k)), stably: (K, N, V) -> (N, V)
        return torch.logsumexp(torch.stack(shares), dim=0) - math.log(len(shares)), attention, new

    # --- translating -------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def translate(
        self,
        sentences: list[str],
        beam_size: int | None = None,
        length_penalty: float | None = None,
        max_len: int | None = None,
        batch_size: int = 64,
    ) -> list[str]:
        """The ensemble's translation of each sentence, at the first member's recorded decoding unless given. Each
        sentence's output cap is the first member's (:meth:`Translator.default_steps`), so a translation does not
        depend on the sentences beside it in a batch."""
        first = self.members[0]
        d = first.decoding(beam_size=beam_size, length_penalty=length_penalty)
        out: list[str] = []
        with contextlib.ExitStack() as stack:
            for m in self.members:  # no dropout, whatever mode a network is in; restored after
                stack.enter_context(evaluating(m.net))
            for at in range(0, len(sentences), batch_size):
                part = sentences[at : at + batch_size]
                state, toks = self.encode(part)
                options: dict[str, Any] = {"banned": never_written(first.tgt_vocab, first.codec)}
                if d["no_repeat_ngram"]:
                    options["no_repeat_ngram"] = d["no_repeat_ngram"]
                if max_len:
                    options["end_step"] = True  # a cap given counts tokens, as translate's --max-len does
                else:
                    options["row_max_len"] = torch.tensor([first.default_steps(len(t)) for t in toks])
                steps = max_len or int(options["row_max_len"].max())
                vocab = first.tgt_vocab
                found = search(self, state, len(part), vocab.bos_id, vocab.eos_id, steps, d["beam_size"],
                               d["length_penalty"], vocab.pad_id, **options)  # fmt: skip
                out += [first.codec.decode(vocab.decode(ids)) for ids in found.token_lists()]
        return out

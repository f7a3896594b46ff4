"""The two ``LitAPI``s LitServe's inference workers run, with dynamic batching: requests that arrive within
``batch_timeout`` of each other, up to ``max_batch_size``, are one batch (one encoder pass over all the photos; one
search per group of requests that asked for the same decoding).

Everything a worker receives was checked by the HTTP process (front.py), so decoding a request cannot fail: LitServe
answers a whole batch with the error of any one item. A worker ignores Ctrl-C (the terminal sends it to every
process) and a SIGTERM sent to the whole process group (a service manager's stop; worker_start.worker_sigterm): the
main process stops it after the requests in flight are answered.
"""

from __future__ import annotations

import base64
import logging
import os
import signal
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import litserve as ls
import numpy as np

from attention_serve.cores import CoreShare
from attention_serve.idle_loop import IdleWaitingLoop, SkippingBatchedLoop, SkippingSingleLoop
from attention_serve.limits import TRANSLATE_OPTIONS
from attention_serve.worker_start import worker_sigterm
from text_attn.core.errors import one_line
from text_attn.core.json_numbers import json_score
from text_attn.core.unsure import CAPTION_UNSURE, UNSURE, probability_fields, unsure_pairs
from text_attn.translation.records import (
    empty_record,
    evidence_fields,
    n_best_fields,
    rounded,
    translation_record,
    unsure_fields,
)
from text_attn.translation.sentences import MARKS_NOTE, item_marks, marks_alone, put_marks

# photos per encoder call while the cores are lent: 4 chunks of 4 cost the bundled encoder 4% more than one of 16, and
# bound how long a pass keeps the thread count it started with to ~0.15 s (one core)
ENCODER_CHUNK = 4


def _options_key(options: dict[str, Any]) -> tuple:
    return tuple(sorted(options.items()))


def _caption_unsure(caption: Any) -> dict[str, Any]:
    """A read caption's words the model was unsure of (under text_attn.core.unsure.CAPTION_UNSURE: each [word, p],
    and ``unsure_words``, their indices in ``words``); {} unread."""
    if getattr(caption, "probs", None) is None:
        return {}
    return {"unsure": unsure_pairs(caption, CAPTION_UNSURE),
            "unsure_words": [t for t, p in enumerate(caption.probs) if p < CAPTION_UNSURE]}  # fmt: skip


def _groups(items: list[dict[str, Any]]) -> dict[tuple, list[int]]:
    """Request indices by the decoding they asked for (one search each)."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        groups[_options_key(it["options"])].append(i)
    return groups


QUEUE_TIMEOUT = "waiting in the queue for too long"  # LitServe's own line for a request timed out in its queue


class LinesWithout(logging.Filter):
    """Drops a library's log lines that hold ``text``: lines the server says in its own words, or that name what it
    switched off (LitServe's, uvicorn's)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in str(record.getMessage())


class _ModelAPI(ls.LitAPI):
    """What both APIs share: their model file, the name clients see, torch threads (``threads``, or None: the cores
    lent by demand, cores.py), batching by LitServe, and a worker that ignores Ctrl-C (the main process stops it once
    the requests in flight are answered)."""

    route = "/"

    def __init__(self, path: Path, name: str, threads: int | None, max_batch_size: int, batch_timeout: float,
                 idle_wait: bool = True):  # fmt: skip
        # an idle worker waits for its next request instead of polling LitServe's queue (idle_loop.py; off with
        # --no-idle-wait); with batch 1 LitServe's own loop already waits. Each passes over abandoned requests
        if max_batch_size == 1:
            loop = SkippingSingleLoop()
        else:
            loop = IdleWaitingLoop() if idle_wait else SkippingBatchedLoop()
        with warnings.catch_warnings():  # LitServe reads max_batch_size 1 as not set (--max-batch-size 1 sets it)
            warnings.filterwarnings("ignore", "The LitServer has both batch and unbatch methods", UserWarning)
            super().__init__(max_batch_size=max_batch_size, batch_timeout=batch_timeout, api_path=self.route,
                             loop=loop)  # fmt: skip
        self.path, self.name, self.threads = str(path), name, threads

    slot_base = 0  # set by workers.SupervisedServer: this model's first worker's index among all workers
    cores: CoreShare | None = None  # set by workers.SupervisedServer where threads is None (shared with every worker)
    stage: Any = None  # set by workers.SupervisedServer: the server's stage in shared memory (worker_start.RUNNING)
    abandoned: Any = None  # set by workers.SupervisedServer: the ids of requests whose client went away (abandoned.py)

    def setup(self, device) -> None:
        """Load the model. The worker loop then tags each request it takes with this worker's index among all the
        server's workers (LitServe reads LITSERVE_WORKER_ID after setup; its own id restarts at 0 for each model), so
        the HTTP process knows which requests a dead worker held. A model that cannot load is one line and exit 1
        (no traceback); the supervisor counts it as a death."""
        import torch

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if self.stage is not None:
            worker_sigterm(self.stage)
        # a request timed out in the queue: the HTTP process's own line says so (504 ... --timeout); LitServe's second
        # one, in its own format, advised a LitServe argument the server sets from --timeout
        logging.getLogger("litserve.loops.simple_loops").addFilter(LinesWithout(QUEUE_TIMEOUT))
        slot = self.slot_base + int(os.environ.get("LITSERVE_WORKER_ID", "0"))
        os.environ["LITSERVE_WORKER_ID"] = str(slot)
        share = self.cores
        if self.threads is not None or share is None:
            torch.set_num_threads(self.threads or 1)
        else:  # the fixed share while loading; on a GPU always (the model's work is not on these cores)
            torch.set_num_threads(max(1, share.cores // len(share.busy)))
            if str(device).startswith("cpu"):
                share.join(slot)
        try:
            self.load(device)
        except Exception as err:  # noqa: BLE001 - whatever stops the model loading: the line says what
            print(f"attention-serve: a {self.route[1:]} worker cannot load its model: {one_line(err)}", file=sys.stderr,
                  flush=True)  # fmt: skip
            os._exit(1)

    def load(self, device) -> None:
        raise NotImplementedError

    def predict(self, items: Any) -> Any:
        """One batch (a list) or, with max_batch_size 1, one request: computed on this worker's threads (cores.py)."""
        if self.cores is None or self.cores.slot is None:
            return self.compute(items)
        with self.cores.working():
            return self.compute(items)

    def compute(self, items: Any) -> Any:
        raise NotImplementedError

    def decode_request(self, request):  # unannotated: LitServe then passes the JSON body front.py wrote
        self._touch()
        return self.decode(request)

    def decode(self, request: dict[str, Any]) -> Any:
        return request

    def batch(self, inputs: list) -> list:
        return inputs

    def unbatch(self, output: list) -> list:
        return output

    def encode_response(self, output: dict[str, Any]) -> dict[str, Any]:
        self._touch()
        return output

    def _touch(self) -> None:
        """Reading a request and writing an answer use this worker's cores too (cores.py: CoreShare.touch)."""
        if self.cores is not None:
            self.cores.touch()


class CaptionAPI(_ModelAPI):
    """POST /caption: a prepared photo (front.prepare_photo) -> its caption, words and attention."""

    route = "/caption"

    def load(self, device) -> None:
        from captioning.model.captioner import Captioner

        self.captioner = Captioner.load(self.path).to(device)

    def decode(self, request: dict[str, Any]) -> dict[str, Any]:
        pixels = np.frombuffer(bytearray(base64.b64decode(request["pixels"])), dtype=np.uint8).reshape(request["shape"])
        return {**request, "pixels": self.captioner.preprocess.normalise(pixels)}  # (3, S, S)

    def compute(self, items: Any) -> Any:
        import torch

        single = isinstance(items, dict)  # max_batch_size 1: LitServe passes the request itself
        items = [items] if single else items
        cap = self.captioner
        with torch.no_grad():
            pixels = torch.stack([it["pixels"] for it in items])  # (B, 3, S, S)
            # the encoder's pass is one ONNX Runtime call at the thread count it starts with: with the cores lent
            # (cores.py) it runs ENCODER_CHUNK photos at a time, so a pass that began with the other model idle does
            # not hold both cores for a whole batch's pass (~0.6 s for 16 photos on one core) once it is busy again
            chunk = ENCODER_CHUNK if self.cores is not None and self.cores.lending else len(items)
            features = torch.cat([cap.encode(part) for part in pixels.split(chunk)])  # (B, L, D)
            far = cap.out_of_domain(features, [tuple(it["stats"]) for it in items]) or [None] * len(items)
            out: list[dict[str, Any] | None] = [None] * len(items)
            for _, index in _groups(items).items():
                o = items[index[0]]["options"]
                extra = {"no_repeat_ngram": o["no_repeat_ngram"]} if o.get("no_repeat_ngram") else {}
                if o.get("n_best", 1) > 1:  # the beam's n best kept (Caption.nbest); 1: the caption itself, listed
                    extra["n_best"] = o["n_best"]
                if o.get("given"):  # the caption given, read (caption --given), not the model's own
                    results = cap.read_features(features[index], o["given"])
                else:
                    # probs: each word's probability, kept by the search (caption --unsure)
                    results = cap.caption_features(features[index], o["beam_size"], o.get("max_len", 30),
                                                   o["length_penalty"], bool(o.get("probs")), **extra)  # fmt: skip
                # the given caption's words the model does not know, read as <unk> (caption --given's note; /translate's
                # "unknown"): else their word_probs read as the model finding a known word unlikely
                unknown = {"unknown": cap.unknown_words(o["given"])} if o.get("given") else {}
                for i, result in zip(index, results, strict=True):
                    out[i] = self._record(items[i], result, far[i]) | probability_fields(result, "word_probs")
                    out[i] |= unknown
                    out[i] |= _caption_unsure(result)
                    if "n_best" in o:
                        out[i]["n_best"] = result.n_best_records()
                    if o.get("evidence"):  # what drives each word (captioning.model.explain)
                        out[i].update(self._evidence(features[i : i + 1], result.words))
        return out[0] if single else out

    def _evidence(self, features: Any, words: list[str]) -> dict[str, Any]:
        from text_attn.core.faithfulness import rounded_evidence, rounded_taus

        found = self.captioner.evidence(features, words)
        return {"evidence": rounded_evidence(found.evidence), "agreement": rounded_taus(found.agreement)}

    def _record(self, item: dict[str, Any], result: Any, far: bool | None) -> dict[str, Any]:
        g = self.captioner.grid
        words, alphas = result.words, result.alphas  # (T, L)
        preview = {"preview": item["preview"]} if "preview" in item else {}  # a HEIC or TIFF upload (front.preview)
        return preview | {
            "caption": " ".join(words),
            "words": words,
            "attention": rounded(alphas),
            "grid": [g, g],
            "size": item["size"],
            "crop_box": [round(v, 3) for v in item["crop_box"]],
            "chosen": self.captioner.chosen_regions(alphas),
            "score": json_score(result.score),
            "truncated": bool(result.truncated),
            "out_of_domain": far,
            # the model's own, as `caption` writes it (a caption given: its scores, not its words, are in doubt)
            "note": self.captioner.note(given=bool(item["options"].get("given"))) if far else None,
            "options": item["options"],
            "notes": item.get("notes", []),  # of the options (limits.search_notes): length_penalty at beam_size 1
            "model": self.name,
        }


class TranslateAPI(_ModelAPI):
    """POST /translate: checked sentences -> translations with their tokens and attention."""

    route = "/translate"

    def __init__(self, *args: Any, ensemble: list[str] | tuple[str, ...] = (), **kwargs: Any):
        """``ensemble``: the other models' files (--text-ensemble), translating with this one as one (text_attn.
        translation.ensemble)."""
        super().__init__(*args, **kwargs)
        self.ensemble = [str(p) for p in ensemble]

    def load(self, device) -> None:
        from text_attn.translation.translator import Translator

        self.translator = Translator.load(self.path)
        if self.ensemble:
            from text_attn.translation.ensemble import EnsembleTranslator

            self.translator = EnsembleTranslator([self.translator, *(Translator.load(p) for p in self.ensemble)])
        self.translator.to(device)  # an ensemble: each of its networks

    def compute(self, items: Any) -> Any:
        single = isinstance(items, dict)
        items = [items] if single else items
        out: list[dict[str, Any] | None] = [None] * len(items)
        for _, index in _groups(items).items():
            o = items[index[0]]["options"]
            sentences = [(i, s) for i in index for s in items[i]["sentences"]]
            done = self._translate([s for _, s in sentences], o)
            for i in index:
                # notes: what the HTTP process noted of the options (limits.search_notes), the same for every sentence
                out[i] = {"translations": [], "model": self.name, "options": items[i]["options"],
                          "notes": items[i].get("notes", [])}  # fmt: skip
            for (i, _), record in zip(sentences, done, strict=True):
                out[i]["translations"].append(record)
        return out[0] if single else out

    def _translate(self, sentences: list[str], o: dict[str, Any]) -> list[dict[str, Any]]:
        tr = self.translator
        keep_case = bool(o.get("keep_case"))  # the request's (Translator.read_as): the worker's own stays as loaded
        given = o.get("given")
        # a text of several sentences: each translated on its own and joined (translate's default); a translation
        # given is read sentence by sentence where it has as many (Translator.read_split)
        tokens = [tr.sentence_tokens(s, keep_case, split=o.get("split") != 0) for s in sentences]  # 0: --no-split
        # a sentence with nothing to translate: an empty record; one of marks alone ("---"), written as typed
        keep = [k for k, t in enumerate(tokens) if t and not marks_alone(sentences[k])]
        extra = {"no_repeat_ngram": o["no_repeat_ngram"]} if o.get("no_repeat_ngram") else {}
        if o.get("n_best", 1) > 1:  # each sentence's n best kept (Translation.nbest)
            extra["n_best"] = o["n_best"]
        if given and any(len(tokens[k]) > 1 for k in keep):  # the translation given, read (translate --given)
            done = tr.read_split([tokens[k] for k in keep], [given] * len(keep))
        elif given:  # every sentence one: encoded once for the text
            done = tr.read_tokens([tokens[k][0] for k in keep], given)
        else:
            # the default cap (2 x source + 10) no longer than what a client may ask for: a 1,000-character line
            # searched 2,010 steps at beam 8, minutes of the worker every other request waited on
            longest = int(TRANSLATE_OPTIONS["max_len"].high)
            # probs: each token's and word's probability, kept by the search (translate --unsure)
            done = tr.translate_lines([tokens[k] for k in keep], o["beam_size"], o["length_penalty"],
                                      o.get("max_len"), longest, probs=bool(o.get("probs")), **extra)  # fmt: skip
            if o.get("split") != 0:  # a list item's marker, not translated, put back: "- A dog" (sentences.put_marks)
                done = [put_marks(t, item_marks(sentences[k])) for k, t in zip(keep, done, strict=True)]
        # a sentence with nothing to translate lists no translation
        records: list[dict[str, Any]] = [empty_record(s) | ({"n_best": []} if "n_best" in o else {}) for s in sentences]
        for k, s in enumerate(sentences):
            if marks_alone(s) and s.strip():  # as translate writes it
                records[k] |= {"translation": " ".join(s.split()), "laid_out": " ".join(s.split()),
                               "note": MARKS_NOTE}  # fmt: skip
        for k, t in zip(keep, done, strict=True):
            records[k] = translation_record(tr, sentences[k], t, keep_case) | probability_fields(t, "token_probs")
            records[k] |= unsure_fields(t, UNSURE)
            if "n_best" in o:
                records[k] |= n_best_fields(t)
            if o.get("evidence") and t.attention is not None and t.tokens:
                from text_attn.translation.explain import evidence_of

                records[k] |= evidence_fields(evidence_of(tr, t))
        return records

"""The OpenAPI description of /caption and /translate as clients call them (LitServe registers the routes with the
body the HTTP process hands its workers, which no client sends): request bodies, options, answers and errors."""

from __future__ import annotations

from typing import Any

from attention_serve.limits import CAPTION_OPTIONS, GIVEN_HELP, TRANSLATE_OPTIONS, Option

ERROR = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "what is wrong, in one line"},
        "status": {"type": "integer"},
    },
}


def _option_schema(spec: Option) -> dict[str, Any]:
    kind = "integer" if spec.kind is int else "number"
    return {"type": kind, "minimum": spec.low, "maximum": spec.high, "description": spec.help}


def _errors(codes: dict[int, str]) -> dict[str, Any]:
    return {
        str(code): {"description": why, "content": {"application/json": {"schema": ERROR}}}
        for code, why in codes.items()
    }


def _n_best_item(text: str) -> dict[str, Any]:
    """One of an answer's ``n_best`` (``text``: "caption" or "translation")."""
    return {
        "type": "object",
        "properties": {
            text: {"type": "string"},
            "score": {"type": ["number", "null"], "description": "the search's score, as the answer's score"},
            "truncated": {"type": "boolean", "description": "max_len cut it off"},
        },
    }


# both answers' notes (limits.search_notes)
NOTES_ANSWER = {
    "type": "array",
    "items": {"type": "string"},
    "description": "what the request's options do not do (a length_penalty at beam_size 1 changes no output, only the "
    "score), as translate and caption note it; empty where there is nothing to say",
}

CAPTION_ANSWER = {
    "type": "object",
    "properties": {
        "caption": {"type": "string"},
        "words": {"type": "array", "items": {"type": "string"}},
        "attention": {
            "type": "array",
            "description": "per word, its weights over the grid's regions (row-major; each row sums to 1)",
            "items": {"type": "array", "items": {"type": "number"}},
        },  # fmt: skip
        "grid": {"type": "array", "items": {"type": "integer"}, "description": "regions down and across"},
        "size": {"type": "array", "items": {"type": "integer"}, "description": "the photo's width and height"},
        "crop_box": {"type": "array", "items": {"type": "number"}, "description": "x0, y0, x1, y1: what the model saw"},
        "preview": {
            "type": "string",
            "description": "only for a photo in a format browsers do not draw (HEIC, TIFF, "
            "PPM): a JPEG of it, upright, at most 480 pixels a side, base64",
        },
        "chosen": {"type": ["array", "null"], "description": "hard attention: the region each word looked at"},
        "evidence": {
            "type": "array",
            "description": "with evidence=1: per word, how much replacing each region at its step lowers its "
            "probability (leave-one-out)",
            "items": {"type": "array", "items": {"type": "number"}},
        },
        "agreement": {
            "type": "array",
            "description": "with evidence=1: per word, Kendall's tau of its attention "
            "against its evidence (null: a flat ranking)",
            "items": {"type": ["number", "null"]},
        },
        "score": {"type": ["number", "null"], "description": "the search's score (null: none was found)"},
        "word_probs": {
            "type": "array",
            "items": {"type": "number"},
            "description": "with given or probs=1: each word's probability after the words before it",
        },
        "end_prob": {"type": "number", "description": "with given or probs=1: the probability that it ends there"},
        "unsure": {
            "type": "array",
            "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
            "description": "with given or probs=1: the words the model gave a probability under 0.2, each [word, p]",
        },
        "unsure_words": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "with given or probs=1: the indices in words of the unsure words",
        },
        "unknown": {
            "type": "array",
            "items": {"type": "string"},
            "description": "with given: its words the model does not know, read as <unk>",
        },
        "truncated": {"type": "boolean", "description": "the caption reached max_len"},
        "n_best": {
            "type": "array",
            "items": _n_best_item("caption"),
            "description": "with n_best: the beam's n best captions, best first (the first is caption)",
        },
        "out_of_domain": {"type": ["boolean", "null"], "description": "the photo looks unlike the training photos"},
        "note": {"type": ["string", "null"]},
        "options": {"type": "object", "description": "the decoding used"},
        "notes": NOTES_ANSWER,
        "model": {"type": "string"},
    },
}
TRANSLATE_ANSWER = {
    "type": "object",
    "properties": {
        "translations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "source": {"type": "string"},
                    "translation": {"type": "string"},
                    "laid_out": {
                        "type": "string",
                        "description": "the translation with the text's line breaks: each sentence that started a "
                        "line there (a heading, a list item) starts one, a blank line between paragraphs; the "
                        "translation itself for a text of one line",
                    },
                    "source_tokens": {"type": "array", "items": {"type": "string"}, "description": "ends with <eos>"},
                    "tokens": {"type": "array", "items": {"type": "string"}},
                    "attention": {
                        "type": ["array", "null"],
                        "description": "per output token, weights over source_tokens (a Transformer: its "
                        "penultimate decoder layer's, which aligns best, heads averaged)",
                    },
                    "heads": {"type": ["array", "null"], "description": "a Transformer: the same per head (H, T, S)"},
                    "score": {
                        "type": ["number", "null"],
                        "description": "the search's score: log-probability divided by length**length_penalty "
                        "(null: none was found)",
                    },
                    "token_probs": {
                        "type": "array",
                        "items": {"type": "number"},
                        "description": "with given or probs=1: each output token's probability after the tokens "
                        "before it",
                    },
                    "words": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "with given or probs=1: the space-separated words word_probs are of",
                    },
                    "word_probs": {
                        "type": "array",
                        "items": {"type": "number"},
                        "description": "with given or probs=1: each space-separated word's probability after the "
                        "words before it (the product of its tokens')",
                    },
                    "end_prob": {"type": "number", "description": "with given or probs=1: the end's probability"},
                    "unsure": {
                        "type": "array",
                        "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
                        "description": "with given or probs=1: the words the model gave a probability under 0.1, "
                        "each [word, p], in order",
                    },
                    "unsure_tokens": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "description": "with given or probs=1: the indices in tokens of the unsure words' pieces",
                    },
                    "truncated": {"type": "boolean", "description": "the translation reached max_len: cut off"},
                    "n_best": {
                        "type": "array",
                        "items": _n_best_item("translation"),
                        "description": "with n_best: the beam's n best translations, best first (the first is "
                        "translation)",
                    },
                    "sentence_count": {
                        "type": "integer",
                        "description": "the sentences found in the text, each translated on its own and the "
                        "translations joined (1: translated whole; 0: nothing to translate)",
                    },
                    "unknown": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "source tokens the vocabulary does not know",
                    },
                    "unknown_words": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "the words of the sentence, as typed, that hold a token the vocabulary does "
                        "not know (read as <unk>: an emoji's byte pieces, a character never learned)",
                    },
                    "evidence": {
                        "type": "array",
                        "description": "with evidence=1: per output token, how much "
                        "masking each source token at its step lowers its probability",
                    },
                    "agreement": {
                        "type": "array",
                        "description": "with evidence=1: per output token, Kendall's "
                        "tau of its attention (mean of heads and layers) against its evidence",
                    },
                    "unlike_source": {"type": ["boolean", "null"]},
                    "read_as": {
                        "type": ["string", "null"],
                        "description": "the sentence as the model read it, where that differs: typed without "
                        "capitals, read with those of the text the model learned from",
                    },
                    "lost_addresses": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "web and e-mail addresses typed in the sentence that the translation lacks "
                        "(the bundled models learned from text without any): put them back by hand",
                    },
                    "unseen_words": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "words of the sentence that the text the model learned from never has: "
                        "translated from their pieces, a guess (empty for a word model: see unknown)",
                    },
                    "note": {"type": ["string", "null"]},
                },
            },
        },  # fmt: skip
        "model": {"type": "string"},
        "options": {"type": "object"},
        "notes": NOTES_ANSWER,
    },
}


def versions() -> dict[str, str | None]:
    """What /info and the OpenAPI description report: this package's version (from its installed metadata; None where
    it is run from a checkout that was never installed), torch's and LitServe's."""
    from importlib.metadata import PackageNotFoundError, version

    import litserve
    import torch

    try:
        package = version("attention-toolkit")
    except PackageNotFoundError:
        package = None
    return {"attention-serve": package, "torch": torch.__version__, "litserve": litserve.__version__}


# the API key's two ways (front.Front._authorized), declared where the server has a key
SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer KEY (--api-key)"},
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "X-API-Key: KEY (--api-key)"},
}


def describe(app, api_key: bool = False) -> None:
    """Set the two routes' OpenAPI description on the FastAPI ``app`` (LitServe's own routes), and the document's
    title and version (FastAPI's defaults were "FastAPI" and "0.1.0"); with ``api_key``, the key's security schemes
    on the routes that need it (/caption, /translate, /info)."""
    app.title = "attention-serve"
    app.version = versions()["attention-serve"] or "unknown"
    app.description = "The captioner and the translator, with their attention: docs/serve.md"
    given = {"given": {"type": "string", "description": GIVEN_HELP}}
    caption_options = {**{name: _option_schema(spec) for name, spec in CAPTION_OPTIONS.items()}, **given}
    translate_options = {**{name: _option_schema(spec) for name, spec in TRANSLATE_OPTIONS.items()}, **given}
    docs = {
        "/caption": {
            "summary": "Caption a photo: its words and where the model looked for each",
            "requestBody": {
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["image"],
                            "properties": {"image": {"type": "string", "format": "binary"}, **caption_options},
                        }
                    },
                    "image/*": {  # a Media Type Object has no description of its own (OpenAPI 3.1): its schema's
                        "schema": {
                            "type": "string",
                            "format": "binary",
                            "description": "raw bytes; options in the query string",
                        },
                    },
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["image"],
                            "properties": {
                                "image": {"type": "string", "format": "byte", "description": "the file, base64"},
                                **caption_options,
                            },
                        }
                    },
                },
            },  # fmt: skip
            "responses": {
                "200": {"description": "the caption", "content": {"application/json": {"schema": CAPTION_ANSWER}}},
                **_errors(
                    {  # fmt: skip
                        401: "no or a wrong API key",
                        404: "the caption model is not served (--caption-model none)",
                        408: "the body stopped arriving for --read-timeout seconds, or took more than 10 x that",
                        413: "over --max-upload-mb, too many pixels (a decompression bomb) or JPEG scans (a scan "
                        "bomb), evidence over --max-evidence, a given caption over 100 words",
                        415: "not an image, or an unknown Content-Type",
                        422: "damaged image, empty body, unknown option or value out of range",
                        503: "the queue is full, or the model's worker stopped and a new one is starting: retry "
                        "after Retry-After seconds",
                        504: "no answer within --timeout seconds",
                    }
                ),
            },  # fmt: skip
        },
        "/translate": {
            "summary": "Translate sentences: the translations, their tokens and attention",
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "text": {"type": "string", "description": "one sentence"},
                                "sentences": {"type": "array", "items": {"type": "string"}},
                                **translate_options,
                            },
                        }
                    }
                },
            },  # fmt: skip
            "responses": {
                "200": {
                    "description": "the translations",
                    "content": {"application/json": {"schema": TRANSLATE_ANSWER}},
                },
                **_errors(
                    {  # fmt: skip
                        401: "no or a wrong API key",
                        404: "the text model is not served (--text-model none)",
                        408: "the body stopped arriving for --read-timeout seconds, or took more than 10 x that",
                        413: "too many sentences, a sentence too long, a decoding over --max-search steps or "
                        "evidence over --max-evidence, a given text over 512 tokens or --max-chars characters",
                        415: "not JSON",
                        422: "malformed JSON, an empty sentence, unknown option or value out of range",
                        503: "the queue is full, or the model's worker stopped and a new one is starting: retry "
                        "after Retry-After seconds",
                        504: "no answer within --timeout seconds",
                    }
                ),
            },  # fmt: skip
        },
    }
    # every option may come in the query string too (a raw photo's upload has nowhere else to carry them)
    queries = {"/caption": caption_options, "/translate": translate_options}
    for route in app.routes:
        path = getattr(route, "path", None)
        doc = docs.get(path)
        if doc is not None and "POST" in getattr(route, "methods", ()):
            route.summary = doc["summary"]
            parameters = [{"name": name, "in": "query", "required": False, "schema": schema,
                           "description": schema.get("description", "")}
                          for name, schema in queries[path].items()]  # fmt: skip
            route.openapi_extra = {"requestBody": doc["requestBody"], "responses": doc["responses"],
                                   "parameters": parameters}  # fmt: skip
            route.dependant.query_params.clear()  # the handler's `request` is not a query parameter
    generate = app.openapi

    def openapi() -> dict[str, Any]:  # the GET routes as the front answers them (LitServe's own say JSON, 200 only)
        if app.openapi_schema is None:
            schema = generate()
            _get_routes(schema)
            if api_key:
                _secured(schema)
        return app.openapi_schema

    app.openapi = openapi
    app.openapi_schema = None


def _get_routes(schema: dict[str, Any]) -> None:
    """``GET /`` is the page (HTML); ``/health`` also answers 503; ``/info`` needs the key (401)."""
    paths = schema.get("paths", {})
    if "get" in paths.get("/", {}):
        paths["/"]["get"].update(summary="The live attention page", responses={"200": {
            "description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}}})  # fmt: skip
    if "get" in paths.get("/health", {}):
        paths["/health"]["get"]["responses"].update(_errors({
            503: "a served model's worker is starting or was replaced: retry after Retry-After seconds"}))  # fmt: skip
    if "get" in paths.get("/info", {}):
        paths["/info"]["get"]["responses"].update(_errors({401: "no or a wrong API key"}))


def _secured(schema: dict[str, Any]) -> None:
    """The API key's schemes, either one required on /caption, /translate and /info (/health and the page: open)."""
    schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    either = [{name: []} for name in SECURITY_SCHEMES]
    for path, methods in schema.get("paths", {}).items():
        if path in ("/caption", "/translate", "/info"):
            for operation in methods.values():
                operation["security"] = either

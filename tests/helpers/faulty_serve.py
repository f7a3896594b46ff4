"""``attention-serve`` with its model workers changed by environment variables, for the server tests:

- ``SERVE_FAIL_LOAD=caption`` (or ``translate``): that model's workers cannot load their model, as on a GPU the
  machine does not have (apis._ModelAPI.setup then says so in one line and the worker ends);
- ``SERVE_SLOW=S``: every batch takes S seconds longer, so requests stay in flight for as long as a test needs;
- ``SERVE_COMPUTED=FILE``: each batch a worker computes appends a line to FILE: its requests' repr.

A script, not ``python -c``: each worker forked from the template runs this file again (as ``__mp_main__``), so the
workers are changed too; the main process never loads a model through the APIs."""

from __future__ import annotations

import os
import time

from attention_serve import apis
from attention_serve.cli import main

_FAIL = os.environ.get("SERVE_FAIL_LOAD")
_SLOW = float(os.environ.get("SERVE_SLOW", "0"))
_COMPUTED = os.environ.get("SERVE_COMPUTED")

if _FAIL:
    _load = {"caption": apis.CaptionAPI, "translate": apis.TranslateAPI}[_FAIL]

    def _cannot_load(self, device) -> None:
        raise RuntimeError(f"a test's model that cannot load on {device}")

    _load.load = _cannot_load

if _SLOW or _COMPUTED:
    _compute = apis._ModelAPI.predict

    def _slow_predict(self, items):
        if _COMPUTED:
            with open(_COMPUTED, "a") as said:
                said.write(repr(items).replace("\n", " ") + "\n")
        time.sleep(_SLOW)
        return _compute(self, items)

    apis._ModelAPI.predict = _slow_predict

if __name__ == "__main__":
    main()

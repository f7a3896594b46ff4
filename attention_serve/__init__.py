"""``attention-serve``: the bundled captioner and translator behind a JSON API and a live attention page, on LitServe.

It sits above both model families (it imports ``captioning`` and ``text_attn``; they never import it):

- ``cli.py``      the console script: options, the models, the LitServer, a clean stop on SIGTERM / Ctrl-C;
- ``models.py``   which model files to serve and what the front needs of them (preprocessing, decoding defaults, info);
- ``limits.py``   what a client may send: option specs, limits, the JSON errors (``ClientError``);
- ``front.py``    the ASGI middleware in the HTTP process: API key, queue limit, upload size, parsing and checking every
                  request, decoding and preparing photos; only valid work reaches the model workers;
- ``apis.py``     the two ``LitAPI``s run by LitServe's inference workers: batched captioning and translation;
- ``page.py``     the page at ``/`` (the ``--html`` reports' drawing code, live).
"""

"""text_attn: the attention library every model family shares (``text_attn.core``) and the text models
(``text_attn.translation``: RNN encoder-decoder, Transformer, their data, training and ``translate``).

Importing this package, or ``text_attn.core``, builds nothing and imports no Lightning. The text family's public
face: ``from text_attn import Translator`` and the names in ``__all__``, each loaded on first use (no torch on
``import text_attn``).
"""

from text_attn.core import startup_gc

startup_gc.quiet_start()  # a console script's Ctrl-C while it imports: one line, not a traceback (first: no import yet)

from text_attn.core.lazy import lazy_exports  # noqa: E402 - after quiet_start
from text_attn.core.mpl_home import point_matplotlib_home  # noqa: E402 - after quiet_start

point_matplotlib_home()  # before Lightning imports Matplotlib: no MPLCONFIGDIR warning where HOME is read-only

_PUBLIC = {  # name -> the module that defines it
    "BrokenLinesWarning": "text_attn.translation.translator",
    "Seq2Seq": "text_attn.translation.seq2seq",
    "Seq2SeqConfig": "text_attn.translation.seq2seq",
    "TranslationDataModule": "text_attn.translation.data",
    "Translation": "text_attn.translation.translator",
    "EnsembleTranslator": "text_attn.translation.ensemble",
    "Translations": "text_attn.translation.translator",
    "Translator": "text_attn.translation.translator",
    "make_dates": "text_attn.translation.tasks",
    "plot_alignment_heads": "text_attn.translation.plots",
    "plot_bleu_by_length": "text_attn.translation.plots",
    "report_attention": "text_attn.translation.alignment_page",
    "text_train_cli": "text_attn.translation.train_cli",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(globals(), _PUBLIC)

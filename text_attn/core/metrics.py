"""Evaluation metrics: corpus BLEU, BLEU by source-length bucket, and coco-caption metrics.

- `corpus_bleu` returns cumulative BLEU-1..4 in [0, 1] from one pass over the corpus.
- `sacre_scores`: the field's standard for translation, sacreBLEU (13a tokenization of detokenized, cased text) and
  chrF, with their signatures (what makes a reported number reproducible); `scored_form`: the text as they score it
  (NFC), for sentence scores too.
- `bleu_by_length` splits a test set by source length (Bahdanau et al.'s Figure 2) and scores
  each bucket.
- `alignment_error`: word alignments against gold ones (AER, precision, recall; Och & Ney 2003).
- `coco_metrics` wraps pycocoevalcap (BLEU, METEOR, ROUGE-L, CIDEr) on already-tokenized strings; `coco_scores`
  also gives each item's BLEU-4 and CIDEr. `text_scores`: a translation's sacreBLEU, chrF and BLEU (tok.).
  pycocoevalcap's PTBTokenizer (Java and Stanford CoreNLP) runs only when asked (``ptb=True``, as coco-caption's
  own evaluation does); otherwise lowercasing and our own tokenizer upstream are enough. METEOR needs Java: without
  it, METEOR is skipped with one notice. METEOR scores English: `reads_as_english` tells whether references are.

CIDEr is corpus-dependent: its n-gram IDF weights are computed from the references being evaluated,
so scores are only comparable on the same reference set, and a corpus of a single image gets CIDEr 0
(every n-gram then occurs in "all" documents and has IDF log(1/1) = 0).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from text_attn.core.rewards import clip_counts, ngram_orders

if TYPE_CHECKING:  # the alignment metric takes tensors; the module itself needs no torch
    import torch

# method1 (Chen & Cherry 2014, nltk's SmoothingFunction().method1): an n-gram order with *zero* matches gets
# epsilon (0.1) matches and every other precision is left as it is, so on any realistic corpus the score equals plain
# BLEU exactly; it only keeps a tiny corpus (or one of very short sentences) from collapsing to 0 when, say, no
# 4-gram matches. Methods 2+ add +1 counts to every order and would bias corpus-level scores upward.
_SMOOTHING_EPSILON = 0.1


def corpus_bleu(references: list[list[list[str]]], hypotheses: list[list[str]]) -> dict[str, float]:
    """Cumulative corpus BLEU-1..4 in [0, 1] (Papineni et al. 2002).

    `references[i]` is the list of reference token lists for sentence i, `hypotheses[i]` its tokens.
    Counts are pooled over the corpus (not averaged over sentences): each order's clipped matches over the
    hypotheses' n-grams of that order; the brevity penalty uses, per sentence, the reference length closest to the
    hypothesis length (the shorter on a tie). An empty or short hypothesis adds no n-grams of the orders it has
    none of (nltk's corpus_bleu counted one for each, scoring a corpus with empty outputs below sacreBLEU's
    BLEU of the same tokens); an order without a match is smoothed by ``_SMOOTHING_EPSILON`` (method1). No unigram
    matched, or no output as long as n words: 0 (for BLEU-n and above), as sacreBLEU.
    """
    if len(references) == 0 or len(hypotheses) == 0:
        raise ValueError("corpus_bleu: empty corpus (no references or no hypotheses)")
    if len(references) != len(hypotheses):
        raise ValueError(f"corpus_bleu: {len(references)} references but {len(hypotheses)} hypotheses")
    for i, refs in enumerate(references):
        if len(refs) == 0:
            raise ValueError(f"corpus_bleu: sentence {i} has no reference")
    matches, totals = [0] * 4, [0] * 4
    hyp_len = ref_len = 0
    for refs, hyp in zip(references, hypotheses, strict=True):
        hyp_len += len(hyp)
        ref_len += min((len(r) for r in refs), key=lambda n: (abs(n - len(hyp)), n))
        # counted and clipped as sentence BLEU (the SCST reward) counts them: one way to clip
        for n, (counts, most) in enumerate(zip(ngram_orders(hyp, 4), clip_counts(refs, 4), strict=True)):
            matches[n] += sum(min(c, most[g]) for g, c in counts.items())
            totals[n] += sum(counts.values())
    if hyp_len == 0 or matches[0] == 0:  # nothing written, or no word of any reference: 0, as nltk and sacreBLEU say
        return {f"bleu{n}": 0.0 for n in range(1, 5)}
    penalty = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    out, logs = {}, 0.0
    for n, (m, t) in enumerate(zip(matches, totals, strict=True), start=1):
        if t == 0:  # no output has n words: no n-gram to match, BLEU-n and above 0 (sacreBLEU's; smoothing this
            out.update({f"bleu{k}": 0.0 for k in range(n, 5)})  # made BLEU-n rise with n)
            break
        logs += math.log(m / t if m else _SMOOTHING_EPSILON / t)
        out[f"bleu{n}"] = penalty * math.exp(logs / n)
    return out


DEFAULT_BUCKETS = [(5, 10), (10, 20), (20, 30), (30, 40), (40, 50), (50, 60)]
# Real sentences (Multi30k: ~13 words, up to ~40), by source words: 1-10, 11-15, 16-20, 21-30, 31+ (half-open pairs;
# the last reaches any length). REAL_BUCKET_LABELS names them inclusively.
REAL_BUCKETS = [(1, 11), (11, 16), (16, 21), (21, 31), (31, 10_000)]
REAL_BUCKET_LABELS = ["1-10", "11-15", "16-20", "21-30", "31+"]


def scored_form(text: str) -> str:
    """A translation or reference as sacreBLEU and chrF score it, corpus and sentence alike: in Unicode's composed form
    (NFC). A reference typed with its accents apart (NFD) scored identical Czech at chrF 31.9, not 100."""
    return unicodedata.normalize("NFC", text)


def sacre_prepared(
    references: Sequence[str], hypotheses: Sequence[str], tokenize: str, lowercase: bool, caller: str
) -> tuple:
    """(sacreBLEU's BLEU, its CHRF, the references, the hypotheses) as sacre_scores scores them: the two metrics with
    ``tokenize`` and ``lowercase``, the texts in NFC (refs: one stream, ``[[ref, ...]]``); ``caller`` names the
    refusal of lists of unequal length or empty."""
    from sacrebleu.metrics import BLEU, CHRF

    _sentences(references, "references", caller)
    _sentences(hypotheses, "hypotheses", caller)
    if not references and not hypotheses:  # "0 references but 0 hypotheses" named no fault
        raise ValueError(f"{caller}: empty corpus (no references and no hypotheses)")
    if len(references) != len(hypotheses):
        raise ValueError(f"{caller}: {len(references)} references but {len(hypotheses)} hypotheses")
    bleu, chrf = BLEU(tokenize=tokenize, lowercase=lowercase), CHRF(lowercase=lowercase)
    return bleu, chrf, [[scored_form(r) for r in references]], [scored_form(h) for h in hypotheses]


def _sentences(texts: Sequence[str], what: str, caller: str) -> None:
    """TypeError where ``texts`` is not a list of strings, one a sentence: one string was scored a character a
    sentence (two strings scored chrF 100 and BLEU 0, silently)."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{caller}: {what} must be a list of strings, one a sentence, got one {type(texts).__name__}: "
                        f"give [{texts!r}]")  # fmt: skip
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{caller}: {what}[{i}] must be a str, got {type(text).__name__}")


def sacre_scores(
    references: Sequence[str], hypotheses: Sequence[str], tokenize: str = "13a", lowercase: bool = False,
    caller: str = "sacre_scores",
) -> dict:  # fmt: skip
    """sacreBLEU and chrF (0-100) of detokenized hypotheses against one reference each (both as written: cased,
    punctuation attached; in Unicode's composed form, NFC), and the two signatures. ``tokenize``: sacreBLEU's
    tokenizer (score_options.BLEU_TOKENIZERS; zh for Chinese, ja-mecab for Japanese: 13a reads an unspaced
    sentence as one word). ``lowercase``: both case-insensitive (signatures "case:lc"), for a model that writes
    lowercase: its every capitalised word would count as wrong. ``caller``: the function the refusals name."""
    bleu, chrf, refs, hyps = sacre_prepared(references, hypotheses, tokenize, lowercase, caller)
    return {
        "sacrebleu": bleu.corpus_score(hyps, refs).score,
        "chrf": chrf.corpus_score(hyps, refs).score,
        "signature": f"BLEU {bleu.get_signature()}; chrF {chrf.get_signature()}",
    }


def text_scores(
    references: Sequence[str], hypotheses: Sequence[str], tokenize: str = "13a", lowercase: bool = False
) -> dict:
    """A translation's scores x 100 against one reference a sentence: sacreBLEU and chrF (sacre_scores, with their
    signature; ``tokenize``: sacreBLEU's tokenizer; ``lowercase``: case-insensitive) and BLEU (tok.), the lowercased,
    tokenized BLEU-4 the PyTorch seq2seq tutorials report."""
    from text_attn.core.vocab import tokenize as words

    _sentences(references, "references", "text_scores")  # named as this call, before sacre_scores checks them
    _sentences(hypotheses, "hypotheses", "text_scores")
    sacre = sacre_scores(references, hypotheses, tokenize, lowercase, "text_scores")
    bleu = corpus_bleu([[words(r, lower=True)] for r in references], [words(h, lower=True) for h in hypotheses])
    return {"bleu_tok": 100 * bleu["bleu4"], **sacre}


def bucket_label(lo: int, hi: int) -> str:
    """Label of a length bucket, e.g. "5-10"."""
    return f"{lo}-{hi}"


def bleu_by_length(
    source_lengths: list[int],
    references: list[list[list[str]]],
    hypotheses: list[list[str]],
    buckets: Sequence[tuple[int, int]] = DEFAULT_BUCKETS,
    n: int = 4,
) -> dict[str, dict]:
    """Corpus BLEU-n per source-length bucket: label -> {"bleu": float, "count": int}.

    Buckets are half-open [lo, hi), except the last, which also includes hi (so a 60-word sentence
    falls in "50-60"). Lengths outside every bucket are ignored; empty buckets get bleu = nan.
    """
    if not 1 <= n <= 4:
        raise ValueError(f"bleu_by_length: n must be in 1..4, got {n}")
    if not len(source_lengths) == len(references) == len(hypotheses):
        raise ValueError(
            "bleu_by_length: source_lengths, references and hypotheses differ in length "
            f"({len(source_lengths)}, {len(references)}, {len(hypotheses)})"
        )
    if len(buckets) == 0:
        raise ValueError("bleu_by_length: no buckets given")
    last = len(buckets) - 1
    out: dict[str, dict] = {}
    for b, (lo, hi) in enumerate(buckets):
        members = [i for i, length in enumerate(source_lengths) if lo <= length < hi or (b == last and length == hi)]
        if members:
            scores = corpus_bleu([references[i] for i in members], [hypotheses[i] for i in members])
            bleu = scores[f"bleu{n}"]
        else:
            bleu = math.nan
        out[bucket_label(lo, hi)] = {"bleu": bleu, "count": len(members)}
    return out


# ----------------------------------------------------------------------------------------------
# coco-caption metrics

# A METEOR run longer than this is killed and METEOR skipped (a guard against a hung JVM).
METEOR_TIMEOUT_S = 600.0

# Kinds of notice already printed in this process ("no-java", "meteor-failed").
_notices_shown: set[str] = set()


def _notice(kind: str, message: str) -> None:
    """Print one notice line to stderr, at most once per process for each kind."""
    if kind not in _notices_shown:
        print(message, file=sys.stderr)
        _notices_shown.add(kind)


@functools.lru_cache(maxsize=1)
def java_available() -> bool:
    """True when `java` is on PATH and `java -version` succeeds (cached per process)."""
    java = shutil.which("java")
    if java is None:
        return False
    try:
        done = subprocess.run([java, "-version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _clean(text: str) -> str:
    # Single spaces only: ROUGE-L splits on " ", so double spaces would create empty tokens, and a
    # newline would break METEOR's line protocol.
    return " ".join(text.split())


def _meteor_score(gts: dict[Hashable, list[str]], res: dict[Hashable, list[str]]) -> float:
    """Corpus METEOR through pycocoevalcap's meteor-1.5.jar, in a JVM that is always shut down.

    We drive the jar ourselves rather than through pycocoevalcap's Meteor class because that class
    keeps stderr on an unread pipe (a chatty JVM can fill it and hang) and only stops the process in
    __del__. The line protocol is the jar's: "SCORE ||| ref ||| ... ||| hyp" returns a statistics
    line per segment, then "EVAL ||| stats ||| ..." returns one score per segment and the corpus
    score.
    """
    from pycocoevalcap.meteor import meteor as _meteor_mod

    jar_dir = Path(_meteor_mod.__file__).resolve().parent
    cmd = ["java", "-Dfile.encoding=UTF-8", "-Xmx2G", "-jar", _meteor_mod.METEOR_JAR]
    cmd += ["-", "-", "-stdio", "-l", "en", "-norm"]
    proc = subprocess.Popen(
        cmd,
        cwd=jar_dir,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    # If the JVM hangs, killing it makes the pending readline return b"" and float() fail -> skip.
    watchdog = threading.Timer(METEOR_TIMEOUT_S, proc.kill)
    watchdog.daemon = True
    watchdog.start()
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> None:
        proc.stdin.write((line + "\n").encode("utf-8"))
        proc.stdin.flush()

    try:
        stats = []
        for key in gts:
            hyp = res[key][0].replace("|||", " ")
            refs = [r.replace("|||", " ") for r in gts[key]]
            ask(" ||| ".join(["SCORE", *refs, hyp]))
            stats.append(proc.stdout.readline().decode("utf-8").strip())
        ask(" ||| ".join(["EVAL", *stats]))
        for _ in stats:  # per-segment scores, not needed
            float(proc.stdout.readline().strip())
        return float(proc.stdout.readline().strip())
    finally:
        watchdog.cancel()
        with contextlib.suppress(OSError):
            proc.stdin.close()
        proc.kill()
        proc.wait()
        proc.stdout.close()


def _ptb_tokenize(sentences: dict[Hashable, list[str]]) -> dict[Hashable, list[str]]:
    """pycocoevalcap's PTBTokenizer (Stanford CoreNLP, in Java) over {id: [sentence, ...]}; its chatter off stdout."""
    if not java_available():
        raise RuntimeError("coco_metrics: the PTB tokenizer was requested but Java is not available")
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    keys = list(sentences)  # its id round trip goes through strings: keep our own keys
    wrapped = {str(i): [{"caption": c} for c in sentences[k]] for i, k in enumerate(keys)}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), _quiet_fd(2):
        out = PTBTokenizer().tokenize(wrapped)
    return {k: out[str(i)] for i, k in enumerate(keys)}


@contextlib.contextmanager
def _quiet_fd(fd: int):
    """File descriptor ``fd`` pointed at /dev/null for the block: the PTB tokenizer's JVM inherits the process's
    stderr and prints its progress there ("PTBTokenizer tokenized 579 tokens ..."), below Python's sys.stderr."""
    try:
        saved = os.dup(fd)
    except OSError:  # no such descriptor: nothing to quiet
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)
        os.close(null)


# the commonest short words of captions in English and in the other languages people caption in (Multi30k's German,
# French and Czech): whichever set the references use more says their language. Over each Flickr8k photo's five
# references: English 8,194 of 8,195 photos; German, French and Czech, five lines at a time: none of 5,800 read as
# English. (A share of English words alone, over 20%, missed 91 Flickr8k photos: short captions of nouns.)
ENGLISH_WORDS = frozenset("the an of is are and with to at his her while for by from on".split())
OTHER_WORDS = (
    frozenset("ein eine einer einem einen der die das und mit auf im ist sind zu von den dem des vor".split()),
    frozenset("un une le la les des du et avec sur dans est sont au aux devant".split()),
    frozenset("je na se ve v s z k muž žena jsou do před u při".split()),
)


def reads_as_english(texts) -> bool:
    """Whether captions are English, so that METEOR (which scores English) may score them: their words hold at least
    as many of English's commonest as of German's, French's or Czech's (none of either: English). A model's capitals no
    longer tell (a captioner trained on your own English captions written with capitals learns them)."""
    words = [w for t in texts for w in re.findall(r"[^\W\d_]+", t.lower())]
    english = sum(w in ENGLISH_WORDS for w in words)
    return english >= max(sum(w in other for w in words) for other in OTHER_WORDS)


# coco-caption's names -> the names this project reports, on 0-100 (CIDEr here is CIDEr-D: pycocoevalcap's Cider)
COCO_NAMES = {"Bleu_1": "BLEU-1", "Bleu_2": "BLEU-2", "Bleu_3": "BLEU-3", "Bleu_4": "BLEU-4", "METEOR": "METEOR",
              "ROUGE_L": "ROUGE-L", "CIDEr": "CIDEr-D"}  # fmt: skip


def reported(scores: dict[str, float]) -> str:
    """coco-caption's corpus scores (fractions, as the training commands log them) as the project reports them:
    ``BLEU-4 23.57, CIDEr-D 59.41, ...`` on 0-100."""
    return ", ".join(f"{COCO_NAMES.get(k, k)} {100 * v:.2f}" for k, v in scores.items())


def coco_metrics(
    references: dict[Hashable, list[str]],
    hypotheses: dict[Hashable, str],
    meteor: bool | None = None,
    ptb: bool = False,
) -> dict[str, float]:
    """coco-caption's corpus scores (coco_scores without the per-item ones)."""
    return coco_scores(references, hypotheses, meteor, ptb)[0]


def coco_prepared(
    references: dict[Hashable, list[str]], hypotheses: dict[Hashable, str], ptb: bool = False
) -> tuple[dict[Hashable, list[str]], dict[Hashable, list[str]]]:
    """The texts as coco-caption's scorers read them (coco_scores' arguments checked): single-spaced, and with ``ptb``
    passed through its PTB tokenizer; ``(gts, res)``: id -> references, id -> [hypothesis], in ``references``' order."""
    if len(references) == 0:
        raise ValueError("coco_metrics: empty corpus (no references)")
    missing = [k for k in references if k not in hypotheses]
    extra = [k for k in hypotheses if k not in references]
    if missing or extra:
        raise ValueError(
            f"coco_metrics: hypothesis ids do not match reference ids "
            f"({len(missing)} missing, e.g. {missing[:3]}; {len(extra)} extra, e.g. {extra[:3]})"
        )
    gts: dict[Hashable, list[str]] = {}
    res: dict[Hashable, list[str]] = {}
    for key, refs in references.items():
        if isinstance(refs, str) or len(refs) == 0:
            raise ValueError(f"coco_metrics: references[{key!r}] must be a non-empty list of str")
        # a hypothesis in a list, a reference tokenized: AttributeError ("'list' object has no attribute 'split'")
        if not all(isinstance(r, str) for r in refs):
            wrong = next(type(r).__name__ for r in refs if not isinstance(r, str))
            raise TypeError(f"coco_metrics: references[{key!r}] must be a non-empty list of str, one of them is "
                            f"{wrong}")  # fmt: skip
        if not isinstance(hypotheses[key], str):
            raise TypeError(f"coco_metrics: hypotheses[{key!r}] must be one caption (a str), got "
                            f"{type(hypotheses[key]).__name__}")  # fmt: skip
        gts[key] = [_clean(r) for r in refs]
        res[key] = [_clean(hypotheses[key])]

    if ptb:
        gts, res = _ptb_tokenize(gts), _ptb_tokenize(res)
    return gts, res


def coco_scores(
    references: dict[Hashable, list[str]],
    hypotheses: dict[Hashable, str],
    meteor: bool | None = None,
    ptb: bool = False,
) -> tuple[dict[str, float], dict[Hashable, dict[str, float]]]:
    """coco-caption scores: Bleu_1..Bleu_4, METEOR (Java only), ROUGE_L, CIDEr, of the corpus; and per item its
    Bleu_4 and CIDEr (the item's share of the corpus CIDEr, whose weights come from all the references).

    `references[id]` is a list of reference sentences and `hypotheses[id]` one sentence, each
    already tokenized and joined by spaces; `ptb`: first pass both through pycocoevalcap's PTB tokenizer (Java;
    lowercases, splits clitics, drops punctuation), as coco-caption's own evaluation does: benchmarks use it to
    compare with published numbers. `meteor`: None = run METEOR when Java is available
    (otherwise skip it with one stderr notice per process), False = never, True = required
    (RuntimeError without Java). A METEOR failure at run time degrades to skipping it with one notice.
    CIDEr's IDF comes from these references, so it depends on the evaluated corpus (see module doc).
    """
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts, res = coco_prepared(references, hypotheses, ptb)
    if meteor is True and not java_available():
        raise RuntimeError("coco_metrics: METEOR was requested but Java is not available")
    run_meteor = meteor is not False and java_available()
    if meteor is None and not run_meteor:
        _notice("no-java", "coco_metrics: Java not found, skipping METEOR (install a JRE to get it)")

    out: dict[str, float] = {}
    # The BLEU scorer prints its n-gram statistics; keep that chatter out of our stdout.
    with contextlib.redirect_stdout(io.StringIO()):
        bleu, per_bleu = Bleu(4).compute_score(gts, res, verbose=0)
    for n, s in enumerate(bleu, start=1):
        out[f"Bleu_{n}"] = float(s)
    if run_meteor:
        try:
            out["METEOR"] = _meteor_score(gts, res)
        except Exception as err:  # noqa: BLE001 - any JVM/protocol failure just means "no METEOR"
            _notice(
                "meteor-failed",
                f"coco_metrics: METEOR failed ({type(err).__name__}: {err}), skipping it",
            )
    with contextlib.redirect_stdout(io.StringIO()):
        out["ROUGE_L"] = float(Rouge().compute_score(gts, res)[0])
        out["CIDEr"], per_cider = Cider().compute_score(gts, res)
    out["CIDEr"] = float(out["CIDEr"])
    # both scorers walk gts in its key order (a dict's: as given)
    per = {k: {"Bleu_4": float(b), "CIDEr": float(c)} for k, b, c in zip(gts, per_bleu[3], per_cider, strict=True)}
    return out, per


def alignment_hits(attention: torch.Tensor, alignment: list[int], n_tokens: int) -> tuple[int, int]:
    """How many of the first ``n_tokens`` target words put their arg-max attention on the true source word.

    attention (T, S) for one sentence, or (T, H, S) per head (the Transformer): then the mean over heads;
    alignment[j] = source index of target word j.
    """
    if attention.dim() == 3:
        attention = attention.mean(1)  # (T, S)
    n = min(n_tokens, len(alignment), attention.size(0))
    if n == 0:
        return 0, 0
    pred = attention[:n].argmax(-1).tolist()
    return sum(int(p == a) for p, a in zip(pred, alignment[:n], strict=True)), n


def alignment_error(
    predicted: Sequence[set[tuple[int, int]]],
    sure: Sequence[set[tuple[int, int]]],
    possible: Sequence[set[tuple[int, int]]],
) -> dict[str, float]:
    """Word alignments against gold ones, over a corpus (Och & Ney 2003): per sentence pair sets of (source word,
    target word) links A, the gold's sure links S and possible ones P (S counts as possible too: P | S is used).
    precision = |A & P| / |A|, recall = |A & S| / |S|, AER = 1 - (|A & S| + |A & P|) / (|A| + |S|): 0 when A holds
    every sure link and nothing outside P; lower is better. Totals are summed over the corpus, then divided."""
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError(f"{len(predicted)} predicted, {len(sure)} sure and {len(possible)} possible link sets")
    a = s = a_s = a_p = 0
    for links, gold_sure, gold_possible in zip(predicted, sure, possible, strict=True):
        a, s = a + len(links), s + len(gold_sure)
        a_s += len(links & gold_sure)
        a_p += len(links & (gold_possible | gold_sure))
    if a + s == 0:  # AER 0.0, "perfect", beside precision and recall 0.0 of nothing scored
        raise ValueError("alignment_error: no links to score (none predicted and no sure gold link)")
    return {
        "aer": 1.0 - (a_s + a_p) / (a + s),
        "precision": a_p / a if a else 0.0,
        "recall": a_s / s if s else 0.0,
    }

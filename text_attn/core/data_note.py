"""A data folder's note on itself: ``data-note.txt``, one line a model trained on the folder records beside its training
data (``data_note`` in the model file's facts, printed by ``--model-info``; its own key, so that a benchmark's
``--info`` that restates the training data keeps it). A folder in a known dataset's layout whose
train text is not the dataset's own (benchmarks/caption_distil_data.py and benchmarks/distil_data.py write a
teacher's captions or translations there) says so here, so that a student's model file does not claim the
annotators' captions it never saw."""

from __future__ import annotations

from pathlib import Path

DATA_NOTE = "data-note.txt"
NOTE_CHARS = 400  # one line of facts: a longer file is not a note (cut, with "...")


def read_data_note(root: str | Path | None) -> str | None:
    """The note of the folder ``root`` (its file's lines joined by spaces, at most NOTE_CHARS characters); None where
    there is no folder, no note, or it cannot be read as UTF-8 text."""
    if not root:
        return None
    path = Path(root) / DATA_NOTE
    try:
        with path.open("rb") as f:
            raw = f.read(4 * NOTE_CHARS)  # enough for NOTE_CHARS characters of any script
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            if len(raw) < 4 * NOTE_CHARS or e.start < len(raw) - 3:
                raise  # not text; only a character cut by the read at the end is forgiven
            text = raw[: e.start].decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    text = " ".join(text.split())
    if len(text) > NOTE_CHARS:
        text = text[: NOTE_CHARS - 3].rstrip() + "..."
    return text or None


def note_facts(root: str | Path | None) -> dict[str, str]:
    """The facts a model trained on the folder ``root`` records of its note: ``{"data_note": note}``, or {}."""
    note = read_data_note(root)
    return {"data_note": note} if note else {}


def write_data_note(root: Path, note: str) -> None:
    """Write ``note`` (one line) as the folder's note, replacing any before it."""
    from text_attn.core.safe_files import write_bytes

    write_bytes(root / DATA_NOTE, (" ".join(note.split()) + "\n").encode("utf-8"))

"""LitData's ``StreamingDataset`` with a damaged chunk reported in one line naming its file (LitData raises a
``struct.error``, a timeout or a decoder's error from deep inside). Its own module: importing LitData costs almost a
second, paid only by runs that stream (text_attn.core.streaming imports it when it opens a chunk folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litdata import StreamingDataset


class DamagedChunk(ValueError):
    """One line: the chunk file (or folder) and the sample that cannot be read."""


class NamedStreamingDataset(StreamingDataset):
    def __getitem__(self, index: Any) -> Any:
        try:
            return super().__getitem__(index)
        except Exception as err:  # noqa: BLE001 - a torn or altered chunk fails in many ways
            where = self._where(index)
            raise DamagedChunk(f"{where}: cannot be read: a damaged chunk ({type(err).__name__})") from None

    def __iter__(self) -> Any:
        try:
            return super().__iter__()
        except Exception as err:  # noqa: BLE001 - LitData maps its first chunks when an epoch starts
            where = Path(self.input_dir.path or "")
            raise DamagedChunk(f"{where}: a chunk cannot be read: a damaged chunk ({type(err).__name__})") from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except (StopIteration, DamagedChunk):
            raise
        except Exception as err:  # noqa: BLE001 - opening a torn chunk fails before any sample is read
            where = Path(self.input_dir.path or "")
            raise DamagedChunk(f"{where}: a chunk cannot be read: a damaged chunk ({type(err).__name__})") from None

    def _where(self, index: Any) -> str:
        folder = Path(self.input_dir.path or "")
        chunk = getattr(index, "chunk_index", None)
        sample = getattr(index, "index", index)
        try:
            if chunk is None:
                chunk = self.cache._reader.config._get_chunk_index_from_index(int(sample))[0]
            name = self.cache._reader.config._chunks[chunk]["filename"]
            return f"{folder / name} (sample {sample})"
        except Exception:  # noqa: BLE001 - no chunk known (an index read before any chunk was opened)
            return f"{folder} (sample {sample})"

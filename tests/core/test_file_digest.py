"""sha256_of reads a file in pieces and gives hashlib's digest of its whole bytes (Python 3.10 has no
hashlib.file_digest, which the feature cache used: caption-train on 3.10 stopped in an AttributeError)."""

from __future__ import annotations

import hashlib
import os

import pytest

from text_attn.core.file_digest import sha256_of


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) * 2 + 7])
def test_the_digest_of_a_file_read_in_pieces_is_hashlibs_of_its_bytes(tmp_path, size):
    data = os.urandom(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert sha256_of(path) == hashlib.sha256(data).hexdigest()


def test_a_missing_file_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        sha256_of(tmp_path / "nothing")

"""Run a command's entry point on input it must refuse: exit code 2 and exactly one line on stderr (returned)."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def refused(main: Callable[[list[str]], int], capsys, *args) -> str:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    return err[0]

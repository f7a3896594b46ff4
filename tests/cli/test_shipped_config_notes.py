"""A shipped text config, run as it is, gets no "options that change nothing" note: every option it sets is read
(the aligned and distilled configs set data.tokenizer beside model.init_from, whose start reads text its own way, and
each run began with a note about the config's own line)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from text_attn.translation.unread import unread_options

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "text").glob("*.yaml"))


def _keys(block: dict | None, prefix: str) -> set[str]:
    found = set()
    for key, value in (block or {}).items():
        found.add(f"{prefix}{key}")
        if isinstance(value, dict):
            found |= _keys(value, f"{prefix}{key}.")
    return found


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_a_shipped_text_config_sets_no_option_its_settings_leave_unread(config):
    parsed = yaml.safe_load(config.read_text(encoding="utf-8"))
    given = _keys(parsed.get("model"), "model.") | _keys(parsed.get("data"), "data.")
    unread = [u.line() for u in unread_options(parsed) if any(name in given for name in u.options)]
    assert unread == []


def test_the_configs_are_found():
    assert len(CONFIGS) >= 15

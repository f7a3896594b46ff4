"""What text_attn.core.modelfile says of a model file it cannot use, in one line naming it: a file it may not read
(its reason, not "not a model file"), a version written wrongly or by a newer toolkit, a URL given to an export
command (as typed), a file to average whose weights are not all tensors. (The families' own checks: tests/text,
tests/captioning.)"""

from __future__ import annotations

import pytest
import torch

from text_attn.core.modelfile import (
    ModelFileError,
    export_command,
    load_model_file,
    mean_weights,
    read_export_source,
    save_model_file,
)

KIND = "test-model"


@pytest.mark.parametrize(
    ("version", "said"),
    [
        ("1", "test-model file version '1' is a str, not a version number (need 1): damaged"),  # was "version 1 ..."
        (True, "test-model file version True is a bool, not a version number (need 1)"),
        (None, "test-model file has no version (need 1)"),
        (2, "test-model file version 2 is not supported: newer than this toolkit reads (1); upgrade attention-toolkit"),
        (0, "test-model file version 0 is not supported (need 1)"),
    ],
)
def test_a_version_that_is_not_this_toolkits_is_shown_as_written(tmp_path, version, said):
    path = tmp_path / "m.pt"
    torch.save({"format": f"attention-toolkit/{KIND}", "version": version, "state_dict": {}}, path)
    with pytest.raises(ModelFileError) as err:
        load_model_file(path, KIND)
    assert str(err.value).startswith(f"{path}: {said}"), err.value
    save_model_file(path, KIND, {"state_dict": {}})
    assert load_model_file(path, KIND)["version"] == 1


def test_a_file_that_cannot_be_read_says_why(tmp_path, monkeypatch):
    """Tests run as root, who reads any file: torch.load is made to fail as it does for a file without permission."""
    path = tmp_path / "m.pt"
    save_model_file(path, KIND, {"state_dict": {}})

    def denied(file, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr(torch, "load", denied)
    for read in (lambda: load_model_file(path, KIND), lambda: read_export_source(path)):
        with pytest.raises(ModelFileError) as err:
            read()
        assert str(err.value) == f"{path}: cannot read it (permission denied)"  # was "not a model file (...Error)"


class _Code:
    def __reduce__(self):  # what a planted file runs when unpickled: weights_only never does
        return (print, ("ran",))


def test_a_file_holding_code_or_no_pickle_at_all_is_said_as_what_it_is(tmp_path):
    """Both were "not a model file (UnpicklingError)": the exception's name, not what the file is."""
    code, text, config = tmp_path / "code.pt", tmp_path / "pairs.tsv", tmp_path / "c.yaml"
    torch.save({"format": f"attention-toolkit/{KIND}", "version": 1, "x": _Code()}, code)
    text.write_text("Ein Hund.\tA dog.\n")
    config.write_text("checkpoint: x\n")  # "c": pickle's GLOBAL, so torch says "Unsupported global": still no pickle
    for path, said in ((code, "refused: it holds more than tensors and plain values (pickled objects or code)"),
                       (text, "not a model file: 17 bytes that torch cannot read as one"),
                       (config, "not a model file: 14 bytes that torch cannot read as one")):  # fmt: skip
        with pytest.raises(ModelFileError) as err:
            load_model_file(path, KIND)
        assert str(err.value).startswith(f"{path}: {said}"), err.value


def test_an_export_command_names_a_url_as_typed(tmp_path, capsys):
    """``named`` (a bundled model's name to its file) made a Path of it: ``https:/host/m.pt: no such file``."""
    from pathlib import Path

    def convert(*args, **kwargs) -> str:
        raise AssertionError("not reached")

    with pytest.raises(SystemExit) as stop:
        export_command("x-export", "", "", "", convert, ["https://host/m.pt", str(tmp_path / "o.pt")],
                       named=lambda name: str(Path(name)))  # fmt: skip
    assert stop.value.code == 2
    said = "https://host/m.pt: a URL: only local files are read; download it first"
    assert capsys.readouterr().err == f"x-export: error: {said}\n"


def test_mean_weights_names_a_file_whose_weights_are_not_all_tensors():
    good = {"w": torch.ones(2)}
    with pytest.raises(ModelFileError, match="^b.pt: its weights are not all tensors: damaged, cannot average$"):
        mean_weights([good, {"w": "x"}], ["a.pt", "b.pt"])
    with pytest.raises(ModelFileError, match="^a.pt: its weights are not all tensors"):
        mean_weights([{"w": [1.0, 2.0]}, good], ["a.pt", "b.pt"])
    assert torch.equal(mean_weights([good, {"w": torch.zeros(2)}], ["a.pt", "b.pt"])["w"], torch.full((2,), 0.5))


def test_mean_weights_weighs_each_state_by_its_share_and_fills_grown_rows_from_those_that_have_them():
    a = {"emb": torch.tensor([[1.0, 1.0], [2.0, 2.0], [9.0, 9.0]]), "b": torch.tensor(4.0), "n": torch.tensor([7])}
    b = {"emb": torch.tensor([[3.0, 3.0], [6.0, 6.0]]), "b": torch.tensor(0.0), "n": torch.tensor([1])}
    mean = mean_weights([a, b], ["a.pt", "b.pt"], shares=[1, 3], grown=True)
    # rows both have: (1*a + 3*b) / 4; the third row only a has: a's; the integer buffer: the first's
    assert torch.equal(mean["emb"], torch.tensor([[2.5, 2.5], [5.0, 5.0], [9.0, 9.0]]))
    assert torch.equal(mean["b"], torch.tensor(1.0)) and torch.equal(mean["n"], torch.tensor([7]))
    with pytest.raises(ModelFileError, match="^b.pt: its weights differ in names or shapes from a.pt's"):
        mean_weights([a, b], ["a.pt", "b.pt"])  # rows fewer only where the caller says a vocabulary grew
    with pytest.raises(ModelFileError, match="^a.pt: its weights differ"):
        mean_weights([b, a], ["b.pt", "a.pt"], grown=True)  # more rows than the first's: never


def test_an_empty_model_path_is_said_so(tmp_path, monkeypatch):
    """Path("") is the current folder: an empty name was ".: a folder, not a model file", as if a folder were given."""
    monkeypatch.chdir(tmp_path)
    for typed in ({}, {"typed": ""}):
        with pytest.raises(ModelFileError, match="^an empty file name: model file not found$"):
            load_model_file("", KIND, **typed)

"""``caption --evidence`` (issue 73): each word's attention and what drives it (leave-one-out over the regions at its
step), in the records and below the overlay; the Python call gives the same maps; refusals in one line."""

import json
from pathlib import Path

import pytest
import torch
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.commands.caption import caption_main
from captioning.model.captioner import Captioner
from captioning.views.overlay import grid_layout

IMAGES = Path(__file__).parent.parent / "fixtures" / "images"
PHOTO = str(IMAGES / "coffee.png")

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tiny_model_file(tmp_path_factory.mktemp("model") / "tiny.pt")
    cap = Captioner.load(path)
    with torch.no_grad():  # sharper than at init: words and attention a removal can move
        for p in cap.model.decoder.parameters():
            p.mul_(4.0)
    cap.save(path)
    return path


def test_records_and_overlay_carry_both_maps(capsys, tmp_path, model_file):
    code = caption_main([PHOTO, "--model", str(model_file), "--json", "--max-len", "5", "--evidence",
                         "--overlay", str(tmp_path)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    (rec,) = json.loads(out)
    words, grid = rec["words"], rec["grid"][0]
    assert len(rec["evidence"]) == len(rec["agreement"]) == len(words) > 0
    assert all(len(row) == grid * grid for row in rec["evidence"])
    # the same maps from Python: one call on the photo
    found = Captioner.load(model_file).explain(PHOTO, beam_size=3, max_len=5)
    assert found.words == words
    torch.testing.assert_close(torch.tensor(rec["evidence"]), found.evidence.float(), atol=2e-6, rtol=0)
    # evidence[t, i] = p(word t) - p(word t with region i replaced): its own definition, checked for one region
    from captioning.model import explain

    cap = Captioner.load(model_file)
    feats = cap.encode(torch.stack([cap.preprocess(Image.open(PHOTO).convert("RGB"))]))
    steps = explain.step_through(cap.model, feats, [cap.vocab.stoi[w] for w in words], cap.vocab.bos_id)
    removed = torch.zeros(1, grid * grid, dtype=torch.bool)
    removed[0, 5] = True
    p = explain.removal_prob(cap.model, steps, 0, removed, explain.photo_fill(cap.model, feats))
    assert rec["evidence"][0][5] == pytest.approx(float(steps.probs[0] - p[0]), abs=2e-6)
    # the overlay: a second section of panels (what drives each word) under the attention
    size = Image.open(PHOTO).size
    assert Image.open(rec["overlay"]).size == grid_layout(size, words, sections=2).size
    assert grid_layout(size, words, sections=2).size[1] > grid_layout(size, words).size[1]


@pytest.mark.parametrize(
    ("args", "why"),
    [([], "--evidence is drawn with --overlay DIR or --html FILE, or written with --json"),
     (["--json", "--sample"], "--sample draws them at random")],
)  # fmt: skip
def test_refusals_in_one_line(capsys, model_file, args, why):
    with pytest.raises(SystemExit) as exc:
        caption_main([PHOTO, "--model", str(model_file), "--evidence", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0]

"""The domain check (captioning.photos.domain): novelty as the cosine distance to the nearest prototype of the training
images' mean region features, its threshold calibrated so that at most 2% of held-out images are flagged. Hand-made
features with known answers; the model-file side (older centre-and-radius files, damaged checks) and the note."""

from __future__ import annotations

import math

import pytest
import torch

from captioning.photos.domain import (
    FLAGGED,
    MIN_HELD_OUT,
    domain_check,
    far_from_domain,
    novelty,
    prototypes,
    summaries,
    valid_check,
)


def _features(directions: torch.Tensor, regions: int = 4, noise: float = 0.0, seed: int = 0) -> torch.Tensor:
    """Per direction (N, D) an image of ``regions`` region features whose mean points that way (N, L, D)."""
    g = torch.Generator().manual_seed(seed)
    jitter = noise * torch.randn(len(directions), regions, directions.shape[1], generator=g)
    return directions[:, None, :] * 3.0 + jitter - jitter.mean(dim=1, keepdim=True)  # the mean is exactly 3 x dir


def test_an_image_summary_is_its_mean_region_at_unit_length():
    feats = torch.tensor([[[3.0, 0.0], [1.0, 4.0]]])  # one image, two regions: mean (2, 2)
    assert summaries(feats)[0].tolist() == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)])


def test_novelty_is_the_cosine_distance_to_the_nearest_prototype_by_hand():
    check = {"prototypes": torch.tensor([[1.0, 0.0], [0.0, 1.0]]), "threshold": 0.1}
    feats = _features(torch.tensor([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0], [0.0, -2.0]]))
    # on a prototype: 0; halfway between both: 1 - cos 45 degrees; opposite one and at right angles to the other: 1
    assert novelty(check, feats).tolist() == pytest.approx([0.0, 1 - math.sqrt(0.5), 1.0, 1.0], abs=1e-6)
    assert far_from_domain(check, feats) == [False, True, True, True]


def test_spherical_k_means_finds_the_clusters_and_is_seeded():
    g = torch.Generator().manual_seed(1)
    centres = torch.nn.functional.normalize(torch.randn(3, 8, generator=g), dim=-1)
    points = torch.nn.functional.normalize(centres.repeat(30, 1) + 0.05 * torch.randn(90, 8, generator=g), dim=-1)
    found = prototypes(points, k=3)
    assert found.shape == (3, 8) and torch.allclose(found.norm(dim=-1), torch.ones(3))
    assert (centres @ found.T).max(dim=1).values.min() > 0.99  # every true centre has a prototype on it
    assert torch.equal(found, prototypes(points, k=3)) and prototypes(points[:2], k=5).shape == (2, 8)


def test_the_threshold_flags_at_most_two_percent_of_the_held_out_images_and_far_ones_all():
    g = torch.Generator().manual_seed(0)
    world = torch.nn.functional.normalize(torch.randn(5, 16, generator=g), dim=-1)  # five kinds of scene

    def scenes(n: int, seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        picks = world[torch.randint(0, 5, (n,), generator=gen)]
        return _features(picks + 0.3 * torch.randn(n, 16, generator=gen) / 4, noise=0.5, seed=seed)

    check = domain_check(scenes(400, 1), scenes(250, 2), k=16)
    assert check["prototypes"].shape == (16, 16) and check["prototypes"].dtype == torch.float16
    assert sum(far_from_domain(check, scenes(250, 2))) <= int(250 * FLAGGED)  # 5 of the 250 held out
    assert sum(far_from_domain(check, scenes(1000, 3))) <= 0.05 * 1000  # new scenes of the same world
    elsewhere = _features(torch.nn.functional.normalize(torch.randn(50, 16, generator=g), dim=-1))
    assert sum(far_from_domain(check, elsewhere)) >= 45  # directions the world never takes
    # without held-out images, every tenth training image is held out of the prototypes to set the threshold
    alone = domain_check(scenes(400, 1), k=16)
    assert sum(far_from_domain(alone, scenes(400, 1)[9::10])) <= int(40 * FLAGGED) + 1
    # two val images set no threshold worth the name (the more novel of two flagged a third of new scenes like
    # them): a tenth of train is held out beside them
    few = domain_check(scenes(400, 1), scenes(2, 2), k=16)
    assert sum(far_from_domain(few, scenes(1000, 3))) <= 0.05 * 1000
    # a few dozen photos in all: fewer than MIN_HELD_OUT to set one with, so no check (the model says nothing)
    assert domain_check(scenes(30, 1), scenes(2, 2), k=8) is None and MIN_HELD_OUT == 20


def test_a_photo_model_also_flags_what_is_not_a_photograph_by_its_pixels():
    check = {"prototypes": torch.tensor([[1.0, 0.0]]), "threshold": 0.5, "photos": True}
    feats = _features(torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    photo, blank = (0.1, 0.0, 0.3), (1.0, 1.0, 0.0)  # photo_stats: (flat share, grey share, roughness)
    assert far_from_domain(check, feats) == [False, False]
    assert far_from_domain(check, feats, [photo, blank]) == [False, True]


def test_an_older_centre_and_radius_check_is_still_applied_and_damaged_checks_are_refused():
    old = {"centre": [3.0, 0.0], "radius": 1.0}
    assert valid_check(old) and far_from_domain(old, _features(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))) == [False, True]
    good = {"prototypes": torch.zeros(2, 3), "threshold": 0.4}
    assert valid_check(good)
    for bad in ({"prototypes": [[1.0]], "threshold": 0.4}, {"prototypes": torch.zeros(3), "threshold": 0.4},
                {**good, "threshold": "far"}, {"centre": "x", "radius": 1}, [good], None):  # fmt: skip
        assert not valid_check(bad), bad


def test_a_check_made_on_another_encoders_features_is_refused_when_the_model_loads(tmp_path):
    """Prototypes of another width passed valid_check, and every photo's novelty then failed as a matrix product of
    mismatched shapes in the middle of a caption run: the width is checked against the encoder's when the file loads;
    a domain that is not a text (printed as "trained on: 5") is refused there too."""
    from captioning.model.captioner import Captioner
    from captioning.photos.domain import check_fault
    from tests.helpers.tiny_captioner import tiny_model_file
    from text_attn.core.modelfile import ModelFileError

    good = {"prototypes": torch.zeros(2, 3), "threshold": 0.4}
    assert check_fault(good) is None and check_fault(good, 3) is None and valid_check(good, 3)
    assert check_fault(good, 5) == "its domain check was made on features 3 wide, its encoder's are 5: another " \
                                   "encoder's check"  # fmt: skip
    assert "features 2 wide" in check_fault({"centre": [3.0, 0.0], "radius": 1.0}, 5)
    path = tiny_model_file(tmp_path / "m.pt")
    data = torch.load(path, weights_only=True)
    width = Captioner.load(path).model.encoder.out_dim
    for changed, says in (({"domain_check": good}, f"made on features 3 wide, its encoder's are {width}"),
                          ({"domain": 5}, "its domain (what it was trained on) must be a text, got int")):  # fmt: skip
        torch.save({**data, **changed}, tmp_path / "bad.pt")
        with pytest.raises(ModelFileError, match="broken caption model file") as exc:
            Captioner.load(tmp_path / "bad.pt")
        assert says in str(exc.value) and "\n" not in str(exc.value)
    fits = {"prototypes": torch.eye(width)[:2].half(), "threshold": 0.4}
    torch.save({**data, "domain_check": fits}, tmp_path / "fits.pt")
    assert Captioner.load(tmp_path / "fits.pt").domain_check["prototypes"].shape == (2, width)


def test_the_pixel_rules_hold_without_a_feature_check(tmp_path):
    """A photo model with no feature check (too few photos to set a threshold; a fine-tuned encoder's frozen maps, not
    features, cached) still flags a blank frame and noise: the pixel rules were lost with the feature check."""
    import numpy as np
    from PIL import Image

    from captioning.model.captioner import Captioner
    from captioning.photos.domain import PIXELS_ONLY
    from captioning.training.data import CaptionDataModule
    from tests.helpers.tiny_captioner import tiny_model_file

    g = torch.Generator().manual_seed(0)
    few = _features(torch.nn.functional.normalize(torch.randn(12, 4, generator=g), dim=-1))
    assert domain_check(few, photos=True) == PIXELS_ONLY and domain_check(few) is None  # shapes: no pixel rules
    dm = CaptionDataModule(source="folder")
    dm.features["train"] = torch.zeros(30, 8, 2, 2)  # frozen maps (N, C, h, w)
    assert dm.domain_check == PIXELS_ONLY
    cap = Captioner.load(tiny_model_file(tmp_path / "m.pt"))
    cap.domain, cap.domain_check = "my photos", dm.domain_check
    cap.save(tmp_path / "m.pt")
    rng = np.random.default_rng(0)
    photo = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).resize((96, 96), Image.Resampling.BICUBIC)
    noise = Image.fromarray(rng.integers(0, 256, (96, 96, 3), dtype=np.uint8))
    said = Captioner.load(tmp_path / "m.pt").caption_images([Image.new("RGB", (96, 96), "white"), noise, photo])
    assert [c.unfamiliar for c in said] == [True, True, False]
    assert said[0].note.startswith("this photo looks unlike the my photos the model learned from")
    for domain, known in [("beach", "the beach photos"), ("My_Images", 'the photos in "My_Images"'),
                          ("photos", "the photos"), ("holiday pics", "the holiday pics"),
                          ("photoshoot", "the photoshoot photos"), ("topics", "the topics photos"),
                          ("beach-2019", 'the photos in "beach-2019"'),
                          ("my_photos", 'the photos in "my_photos"')]:  # fmt: skip
        cap.domain = domain
        assert cap.known() == f"{known} the model learned from", domain

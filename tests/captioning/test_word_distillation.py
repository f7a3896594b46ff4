"""Word-level distillation (captioning.training.distillation, ``model.objective.distil_from``): the teacher's
distribution is its search's (an ensemble's mean, step by step), read at the words both vocabularies spell alike;
the loss is KL(teacher || student) by hand, mixed with the cross-entropy at weight α; a fit lowers it, and the model
file says whose probabilities it learned; a teacher that cannot teach this student is refused in one line."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from captioning.commands.train import caption_train_cli
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from captioning.model.ensemble import DecoderEnsemble
from captioning.training.distillation import (
    Teacher,
    TeacherCache,
    attention_distillation_loss,
    distillation_loss,
    shared_words,
)
from captioning.training.objective import CaptionObjective, ObjectiveConfig
from text_attn.core.vocab import Vocabulary

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")
CFG = dict(vocab_size=9, feature_dim=12, embed_dim=8, hidden_dim=16, attn_dim=10)


def _members(n: int) -> list[ShowAttendTellDecoder]:
    torch.manual_seed(3)
    return [ShowAttendTellDecoder(DecoderConfig(**CFG)).eval() for _ in range(n)]


def _teacher(members, teacher_ids, student_ids, to_teacher) -> Teacher:
    return Teacher(members, torch.tensor(teacher_ids), torch.tensor(student_ids), torch.tensor(to_teacher))


def test_the_teachers_distribution_is_its_ensembles_step_by_step():
    members = _members(2)
    every = list(range(9))
    teacher = _teacher(members, every, every, every)
    feats = torch.randn(3, 5, 12)
    captions_in = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0], [1, 8, 4, 2]])
    got, alphas = teacher.targets(feats, captions_in)  # (3, 4, 9), (3, 4, 5)
    ens = DecoderEnsemble(members).eval()
    state = ens.init_state(feats)
    with torch.no_grad():
        for t in range(captions_in.size(1)):
            step_lp, step_alpha, state = ens.step(captions_in[:, t], state)
            torch.testing.assert_close(got[:, t], step_lp, rtol=0, atol=1e-5)
            torch.testing.assert_close(alphas[:, t], step_alpha, rtol=0, atol=1e-6)  # what the ensemble draws
    torch.testing.assert_close(got.exp().sum(-1), torch.ones(3, 4))


def test_words_are_matched_by_spelling_and_the_rest_renormalised():
    teacher_vocab = Vocabulary(["<pad>", "<bos>", "<eos>", "<unk>", "a", "dog", "cat", "runs", "sits"])
    student_vocab = Vocabulary(["<pad>", "<bos>", "<eos>", "<unk>", "cat", "a", "bird"])  # no dog, runs, sits
    teacher_ids, student_ids = shared_words(teacher_vocab, student_vocab)
    assert (teacher_ids, student_ids) == ([0, 1, 2, 3, 6, 4], [0, 1, 2, 3, 4, 5])
    (member,) = _members(1)
    teacher = _teacher([member], teacher_ids, student_ids, [0, 1, 2, 3, 6, 4, 3])  # bird: the teacher's <unk>
    feats = torch.randn(2, 5, 12)
    captions_in = torch.tensor([[1, 4, 6], [1, 5, 4]])  # "cat bird" read as "cat <unk>"; "a cat"
    got, _ = teacher.targets(feats, captions_in)  # (2, 3, 6)
    with torch.no_grad():
        full = F.log_softmax(member(feats, torch.tensor([[1, 6, 3], [1, 4, 6]])).logits, dim=-1)  # teacher's ids
    kept = full[..., teacher_ids]
    torch.testing.assert_close(got, kept - kept.logsumexp(-1, keepdim=True), rtol=0, atol=1e-6)


def test_the_loss_is_the_kl_by_hand_over_the_real_words():
    teacher_lp = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.2, 0.3, 0.5]]]))  # (1, 2, 3); the second is padding
    logits = torch.tensor([[[0.0, 1.0, 2.0, 5.0], [1.0, 1.0, 1.0, 1.0]]])  # (1, 2, 4): word 3 is the student's own
    student_ids = torch.tensor([0, 1, 2])
    q = [math.exp(x) / sum(math.exp(y) for y in (0.0, 1.0, 2.0, 5.0)) for x in (0.0, 1.0, 2.0)]
    by_hand = sum(p * (math.log(p) - math.log(qi)) for p, qi in zip((0.5, 0.25, 0.25), q, strict=True))
    got = distillation_loss(logits, teacher_lp, student_ids, torch.tensor([[5, 0]]), pad_id=0)
    assert got.item() == pytest.approx(by_hand, rel=1e-6)
    same = torch.log(torch.tensor([[[0.1, 0.2, 0.7]]]))  # the student exactly the teacher: nothing to learn
    assert distillation_loss(same, same, student_ids, torch.tensor([[4]]), pad_id=0).item() == pytest.approx(
        0, abs=1e-6
    )


def test_the_attention_loss_is_the_kl_by_hand_over_the_real_words():
    teacher = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], [[0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]])  # (2, 2, 3)
    student = torch.tensor([[[0.25, 0.25, 0.5], [0.9, 0.05, 0.05]], [[0.2, 0.2, 0.6], [0.6, 0.2, 0.2]]])
    targets = torch.tensor([[7, 0], [7, 2]])  # the first caption's second word is padding: its KL is not counted

    def kl(p, q):
        return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True) if pi > 0)

    by_hand = (kl(teacher[0, 0].tolist(), student[0, 0].tolist()) + kl(teacher[1, 0].tolist(), student[1, 0].tolist())
               + kl(teacher[1, 1].tolist(), student[1, 1].tolist())) / 3  # fmt: skip
    got = attention_distillation_loss(student, teacher, targets, pad_id=0)
    assert got.item() == pytest.approx(by_hand, abs=1e-6)
    assert attention_distillation_loss(teacher, teacher, targets, pad_id=0).item() == pytest.approx(0, abs=1e-6)


def test_alpha_trades_the_cross_entropy_for_the_teachers_loss():
    torch.manual_seed(0)
    from captioning.model.network import CaptionModel

    members = _members(1)
    batch = {"captions_in": torch.tensor([[1, 4, 5], [1, 6, 0]]), "targets": torch.tensor([[4, 5, 2], [6, 2, 0]])}
    feats = torch.randn(2, 5, 12)
    student = ShowAttendTellDecoder(DecoderConfig(**CFG)).train()
    student.dropout.p = 0.0  # the same forward each call
    model = CaptionModel.__new__(CaptionModel)
    torch.nn.Module.__init__(model)
    model.decoder = student
    every = list(range(9))
    losses = {}
    for alpha in (0.0, 0.3, 1.0):
        objective = CaptionObjective(ObjectiveConfig(ds_lambda=0.0, distil_from="t", distil_weight=alpha), hard=False)
        objective.use_teacher(_teacher(members, every, every, every))
        losses[alpha], parts = objective.teacher_forced(model, feats, batch, pad_id=0)
        assert set(parts) == {"ce", "ds", "kd"}
    ce, kd = parts["ce"].item(), parts["kd"].item()
    assert losses[0.0].item() == pytest.approx(ce, rel=1e-6) and losses[1.0].item() == pytest.approx(kd, rel=1e-6)
    assert losses[0.3].item() == pytest.approx(0.7 * ce + 0.3 * kd, rel=1e-6)
    assert "train_kd" in objective.training_logs() and "train_kd_attn" not in objective.training_logs()
    # β adds the attention's KL on top, at its weight
    objective = CaptionObjective(ObjectiveConfig(ds_lambda=0.0, distil_from="t", distil_weight=0.3,
                                                 distil_attention=2.0), hard=False)  # fmt: skip
    objective.use_teacher(_teacher(members, every, every, every))
    loss, parts = objective.teacher_forced(model, feats, batch, pad_id=0)
    assert set(parts) == {"ce", "ds", "kd", "kd_attn"} and parts["kd_attn"].item() > 0
    assert loss.item() == pytest.approx(0.7 * ce + 0.3 * kd + 2.0 * parts["kd_attn"].item(), rel=1e-6)
    assert "train_kd_attn" in objective.training_logs()


def _pairs():
    """Six training pairs: features (6, 5, 12), captions_in and targets (6, 4) of 1-4 real tokens (pad 0)."""
    torch.manual_seed(5)
    feats = torch.randn(6, 5, 12)
    words = [[4, 5, 6], [7], [8, 4], [5, 5, 6], [6, 8], [4]]
    captions_in = torch.tensor([[1, *w] + [0] * (3 - len(w)) for w in words])
    targets = torch.tensor([[*w, 2] + [0] * (3 - len(w)) for w in words])
    return feats, captions_in, targets


def test_kept_targets_are_the_teachers_own_for_any_batch_they_come_back_in():
    every = list(range(9))
    teacher, cache = _teacher(_members(2), every, every, every), TeacherCache(budget=10**9)
    feats, captions_in, targets = _pairs()
    lengths = (targets != 0).sum(1)
    student_logits, student_alphas = torch.randn(6, 4, 9), torch.rand(6, 4, 5).softmax(-1)
    # the first pass (all made), a mix (pair 3 new, 0 and 2 kept: the batch's T longer than the kept rows),
    # all kept in another order, and the kept ones of a shorter batch
    for rows in ([0, 1, 2], [2, 3, 0], [3, 1, 0, 2], [1, 5]):
        at = torch.tensor(rows)
        steps = int(lengths[at].max())
        args = feats[at], captions_in[at, :steps]
        got_lp, got_alphas = cache.targets(
            teacher, *args, lengths[at], TeacherCache.keys(*args[1:], lengths[at], at, at)
        )
        want_lp, want_alphas = teacher.targets(*args)
        real = (targets[at, :steps] != 0)[..., None]  # (b, T, 1)
        torch.testing.assert_close(got_lp * real, want_lp * real, rtol=0, atol=1e-6)
        torch.testing.assert_close(got_alphas * real, want_alphas * real, rtol=0, atol=1e-6)
        # so the losses the student is trained with are the same
        kd = [distillation_loss(student_logits[at, :steps], lp, teacher.student_ids, targets[at, :steps], 0)
              for lp in (got_lp, want_lp)]  # fmt: skip
        assert kd[0].item() == pytest.approx(kd[1].item(), abs=1e-6)
        kd_attn = [attention_distillation_loss(student_alphas[at, :steps], a, targets[at, :steps], 0)
                   for a in (got_alphas, want_alphas)]  # fmt: skip
        assert kd_attn[0].item() == pytest.approx(kd_attn[1].item(), abs=1e-6)
    assert (cache.computed, cache.served) == (3 + 1 + 0 + 1, 0 + 2 + 4 + 1)
    assert sorted(key[0] for key in cache.rows) == [0, 1, 2, 3, 5]
    assert cache.rows[(1, 1, (1, 7))][0].shape == (2, 9)  # its words and end only
    assert cache.used == sum(len(key[2]) * (9 + 5) * 4 for key in cache.rows)


def test_a_pair_number_reused_for_another_caption_gets_its_own_targets():
    every = list(range(9))
    teacher, cache = _teacher(_members(1), every, every, every), TeacherCache(budget=10**9)
    feats, captions_in, targets = _pairs()
    lengths = (targets != 0).sum(1)
    for rows in ([0, 1], [0, 3]):  # pair 3 comes back numbered 1, as a streamed folder may number its samples
        at = torch.tensor(rows)
        keys = TeacherCache.keys(captions_in[at], lengths[at], torch.tensor([0, 1]), None)
        got, _ = cache.targets(teacher, feats[at], captions_in[at], lengths[at], keys)
        real = (targets[at] != 0)[..., None]
        torch.testing.assert_close(got * real, teacher.targets(feats[at], captions_in[at])[0] * real, rtol=0, atol=1e-6)
    assert (cache.computed, cache.served) == (3, 1)


def test_the_budget_keeps_what_fits_and_the_rest_is_made_each_time():
    every = list(range(9))
    teacher = _teacher(_members(1), every, every, every)
    feats, captions_in, targets = _pairs()
    lengths = (targets != 0).sum(1)
    cache = TeacherCache(budget=(4 + 2) * (9 + 5) * 4)  # pairs 0 (4 tokens) and 1 (2): 3's 4 do not fit
    at = torch.tensor([0, 1, 3])
    keys = TeacherCache.keys(captions_in[at], lengths[at], at, None)
    for _ in range(2):
        got, _ = cache.targets(teacher, feats[at], captions_in[at], lengths[at], keys)
        torch.testing.assert_close(got[2], teacher.targets(feats[at], captions_in[at])[0][2], rtol=0, atol=1e-6)
    assert sorted(key[0] for key in cache.rows) == [0, 1] and (cache.computed, cache.served) == (3 + 1, 2)


def test_the_objective_keeps_the_targets_unless_told_not_to():
    every = list(range(9))
    for gb, kept in ((2.0, True), (0.0, False)):
        objective = CaptionObjective(ObjectiveConfig(distil_from="t", distil_cache_gb=gb), hard=False)
        objective.use_teacher(_teacher(_members(1), every, every, every))
        assert (objective.teacher_cache is not None) == kept
        if kept:
            assert objective.teacher_cache.budget == 2 * 10**9
            objective.teacher_cache.rows[0] = (torch.zeros(1), torch.zeros(1))
            objective.forget_teacher_targets()
            assert not objective.teacher_cache.rows and objective.teacher_cache.budget == 2 * 10**9


def test_the_budget_is_at_most_half_the_memory_free():
    every = list(range(9))
    for gb, room, budget, noted in ((2.0, 10**9, 5 * 10**8, True), (2.0, 10**10, 2 * 10**9, False),
                                    (2.0, None, 2 * 10**9, False), (0.5, 10**9, 5 * 10**8, False)):  # fmt: skip
        objective = CaptionObjective(ObjectiveConfig(distil_from="t", distil_cache_gb=gb), hard=False)
        note = objective.use_teacher(_teacher(_members(1), every, every, every), room)
        assert objective.teacher_cache.budget == budget and (note is not None) == noted
    assert note is None and "distil_cache_gb 2 kept to 0.50 GB: half the 1.00 GB of memory free" in (
        CaptionObjective(ObjectiveConfig(distil_from="t"), hard=False).use_teacher(
            _teacher(_members(1), every, every, every), 10**9
        )
    )
    objective = CaptionObjective(ObjectiveConfig(distil_from="t", distil_cache_gb=0.0), hard=False)
    assert objective.use_teacher(_teacher(_members(1), every, every, every), 10**9) is None
    assert objective.teacher_cache is None


@pytest.mark.parametrize(
    "options, message",
    [
        ({"distil_weight": 1.5}, "distil_weight must be between 0 and 1, got 1.5"),
        ({"distil_attention": -1.0}, "distil_attention"),
        ({"distil_cache_gb": -1.0}, "distil_cache_gb"),
        ({"distil_from": "flickr8k", "scst": True, "ds_lambda": 0.0}, "distil_from is for cross-entropy training"),
    ],
)
def test_bad_options_are_one_line(options, message):
    with pytest.raises(ValueError, match=message):
        ObjectiveConfig(**options)


def _fit(tmp_path: Path, name: str, *more: str):
    return caption_train_cli([
        "fit", "--config", CONFIG, "--trainer.max_steps", "40", "--trainer.limit_val_batches", "0",
        "--trainer.log_every_n_steps", "1", "--trainer.logger", "pytorch_lightning.loggers.CSVLogger",
        "--trainer.logger.save_dir", str(tmp_path / name), "--model.export_path", str(tmp_path / name / "model.pt"),
        "--trainer.default_root_dir", str(tmp_path / name),  # its feature cache there, not in the checkout
        *more,
    ])  # fmt: skip


@pytest.mark.long  # two tiny fits (~10 s)
def test_a_fit_lowers_the_teachers_loss_and_the_file_says_so(tmp_path, capsys, monkeypatch):
    _fit(tmp_path, "teacher")
    teacher = tmp_path / "teacher" / "model.pt"
    cli = _fit(tmp_path, "student", "--model.objective.distil_from", str(teacher),
               "--model.objective.distil_weight", "1.0", "--model.objective.distil_attention", "1.0",
               "--model.lr", "0.003")  # fmt: skip
    err = capsys.readouterr().err
    assert f"model.objective.distil_from {teacher} (one decoder): the student learns its next-word" in err
    rows = list(csv.DictReader(open(Path(cli.trainer.logger.log_dir) / "metrics.csv")))
    kd = [float(r["train_kd"]) for r in rows if r.get("train_kd")]
    assert len(kd) >= 30 and sum(kd[-5:]) < 0.5 * sum(kd[:5]), kd
    kd_attn = [float(r["train_kd_attn"]) for r in rows if r.get("train_kd_attn")]
    assert len(kd_attn) >= 30 and sum(kd_attn[-5:]) < 0.5 * sum(kd_attn[:5]), kd_attn
    info = Captioner.load(tmp_path / "student" / "model.pt").info
    assert info["distilled_from"] == "model.pt, its next-word probabilities at weight 1 and its attention at weight 1"
    # the teacher's targets kept from their first pass train the student as the teacher run at every step does
    (line,) = [x for x in err.splitlines() if x.startswith("caption-train: the teacher's targets: ")]
    served, made = re.search(r"targets: ([\d,]+) pairs read from its cache, ([\d,]+) made", line).groups()
    # 40 steps: every epoch after the first reads them
    assert int(served.replace(",", "")) > 3 * int(made.replace(",", "")) > 0, line
    uncached = _fit(tmp_path, "student_uncached", "--model.objective.distil_from", str(teacher),
                    "--model.objective.distil_weight", "1.0", "--model.objective.distil_attention", "1.0",
                    "--model.lr", "0.003", "--model.objective.distil_cache_gb", "0")  # fmt: skip
    assert "the teacher's targets" not in capsys.readouterr().err
    rows = list(csv.DictReader(open(Path(uncached.trainer.logger.log_dir) / "metrics.csv")))
    assert [float(r["train_kd"]) for r in rows if r.get("train_kd")] == pytest.approx(kd, rel=1e-3, abs=1e-5)
    # a container with little memory free keeps what half of it holds, and says so; the rest is made at every step
    kept = int(re.search(r"\(([\d,]+) pairs kept", line).group(1).replace(",", ""))
    monkeypatch.setattr("text_attn.core.memory_room.memory_room", lambda: 40_000)
    _fit(tmp_path, "student_small", "--model.objective.distil_from", str(teacher),
         "--model.objective.distil_weight", "1.0", "--model.lr", "0.003")  # fmt: skip
    err = capsys.readouterr().err
    assert "note: model.objective.distil_cache_gb 2 kept to 0.00 GB: half the 0.00 GB of memory free" in err
    (small,) = [x for x in err.splitlines() if x.startswith("caption-train: the teacher's targets: ")]
    few = int(re.search(r"\(([\d,]+) pairs kept", small).group(1).replace(",", ""))
    assert 0 < few < kept, (small, line)


@pytest.mark.long
def test_a_teacher_that_sees_other_features_is_refused(tmp_path, capsys):
    _fit(tmp_path, "teacher", "--seed_everything", "1")  # another random encoder
    teacher = str(tmp_path / "teacher" / "model.pt")
    for more, message in [
        ((), "encoder gives other features than the student's: the teacher reads the student's (cached) features"),
        (("--model.encoder.fine_tune", "last"), "reads the student's features: set model.encoder.fine_tune: none"),
        (("--model.decoder.attention", "hard"), "teaches a soft-attention student; this one is hard"),
    ]:  # fmt: skip
        capsys.readouterr()
        with pytest.raises(SystemExit):
            _fit(tmp_path, "student", "--model.objective.distil_from", teacher, *more)
        (line,) = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
        assert line.startswith("caption-train: error: model.objective.distil_from: ") and message in line, line
    with pytest.raises(SystemExit):
        _fit(tmp_path, "student", "--model.objective.distil_from", str(tmp_path / "none.pt"))
    assert f"model.objective.distil_from: {tmp_path / 'none.pt'}: model file not found" in capsys.readouterr().err

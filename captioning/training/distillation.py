"""Word-level knowledge distillation (Hinton et al. 2015; Kim & Rush 2016's word-level form): at every word of a
training caption the student also learns the teacher's whole next-word distribution, not only the written word.
``model.objective.distil_from`` names the teacher (a model file or a bundled name; an ensemble's distribution is the
mean of its decoders' probabilities, as it captions) and ``distil_weight`` α mixes the two losses:
(1 - α) · cross-entropy + α · KL(p_teacher ‖ p_student), per word, over the non-pad words. ``distil_attention`` β
adds β · KL(α_teacher ‖ α_student) per word: where the student looks is taught too (the teacher's attention is its
decoders' mean, as the ensemble draws it); without it a distilled student's attention grew about half as sharp as the
teacher's (docs/bundled_captioner.md).

The teacher reads the student's own region features (the cached features of a frozen encoder), so its encoder must
give the same features as the student's: checked once on a probe image at fit's start. Its words are matched to the
student's by spelling: a word only the student knows gets no probability from the teacher, and the teacher's
probability of a word the student lacks is left out (the rest renormalised).

The teacher is frozen and its input fixed (the features of a frozen encoder, the pair's caption), so a training pair's
targets are the same at every epoch: :class:`TeacherCache` keeps them from their first pass (up to
``model.objective.distil_cache_gb``), and later epochs read them instead of running the teacher's decoders again."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from captioning.model.decoder import ShowAttendTellDecoder
from captioning.model.ensemble import mean_of_probabilities
from text_attn.core.attention import attention_entropy
from text_attn.core.attention_supervision import attention_supervision_loss
from text_attn.core.precision import widened
from text_attn.core.vocab import Vocabulary, is_word

FEATURES_ATOL = 1e-3  # the probe's features, teacher's against student's: float32 round-off of one network is far less


@dataclass
class Teacher:
    """The teacher's decoders (eval mode, never trained: not a submodule of the student, so no checkpoint holds
    them) and the words both vocabularies have: ``teacher_ids`` and ``student_ids`` (S,) at the same positions;
    ``to_teacher`` (V_student,) each student id's teacher id (<unk>'s where the teacher lacks the word)."""

    decoders: list[ShowAttendTellDecoder]
    teacher_ids: Tensor  # (S,) long
    student_ids: Tensor  # (S,) long
    to_teacher: Tensor  # (V_student,) long

    def to(self, device: torch.device) -> Teacher:
        if self.teacher_ids.device != device:
            for d in self.decoders:
                d.to(device)
            self.teacher_ids, self.student_ids = self.teacher_ids.to(device), self.student_ids.to(device)
            self.to_teacher = self.to_teacher.to(device)
        return self

    @torch.no_grad()
    def targets(self, features: Tensor, captions_in: Tensor) -> tuple[Tensor, Tensor]:
        """features (B, L, D), captions_in (B, T) in the student's ids -> (the teacher's log-probabilities of the
        shared words (B, T, S), renormalised over them; its attention (B, T, L), its members' mean, as the ensemble
        draws it). The captions are read in the teacher's ids (a word only the student knows as its <unk>)."""
        self.to(features.device)
        read = self.to_teacher[captions_in]  # (B, T)
        outs = [d(features, read) for d in self.decoders]
        per_member = [F.log_softmax(widened(o.logits), dim=-1) for o in outs]  # each (B, T, V_t)
        mean = mean_of_probabilities(per_member)  # (B, T, V_t): as DecoderEnsemble.step combines its members
        shared = mean.index_select(-1, self.teacher_ids)  # (B, T, S)
        alphas = torch.stack([widened(o.alphas) for o in outs]).mean(0)  # (B, T, L)
        return shared - torch.logsumexp(shared, dim=-1, keepdim=True), alphas


@dataclass
class TeacherCache:
    """The teacher's targets of training pairs, kept from their first pass, keyed by what the teacher reads: the
    batch's ``pair_index`` (which (image, caption) pair each row is), ``image_index`` where the batch has it, and the
    caption's tokens (a streamed folder numbers its samples its own way: a key that names the caption itself cannot
    give one caption's targets to another). Each pair keeps its real words only: the log-probabilities (n, S) and the
    attention (n, L), n its words and end, as the teacher made them (float32 at least, on their device). Once
    ``budget`` bytes are held, pairs not kept are computed at every pass as without a cache."""

    budget: int  # bytes
    rows: dict[tuple, tuple[Tensor, Tensor]] = field(default_factory=dict)
    used: int = 0  # bytes held
    served: int = 0  # pairs read from the cache
    computed: int = 0  # pairs the teacher ran for

    def targets(self, teacher: Teacher, features: Tensor, captions_in: Tensor, lengths: Tensor, keys: list[tuple]):
        """:meth:`Teacher.targets` of the batch (features (B, L, D), captions_in (B, T); lengths (B,): each caption's
        real words and end; keys: each row's pair (:meth:`keys`)), the kept pairs read, the others computed (and kept
        while there is room). Past a pair's words the rows are 0 where read (the losses mask them)."""
        sizes = lengths.tolist()  # once: the rows below read them one by one
        missing = [b for b, key in enumerate(keys) if key not in self.rows]
        self.served, self.computed = self.served + len(keys) - len(missing), self.computed + len(missing)
        if len(missing) == len(keys):  # none kept (the first epoch): the whole batch, as without a cache
            lp, alphas = teacher.targets(features, captions_in)
            self._keep([(key, lp[b], alphas[b], sizes[b]) for b, key in enumerate(keys)])
            return lp, alphas
        made = {}
        if missing:
            at = torch.tensor(missing, device=captions_in.device)
            n = max(sizes[b] for b in missing)  # the teacher reads each caption's words only: its later rows are causal
            lp, alphas = teacher.targets(features[at], captions_in[at, :n])  # (M, n, S), (M, n, L)
            made = {keys[b]: (lp[j], alphas[j]) for j, b in enumerate(missing)}
            self._keep([(keys[b], lp[j], alphas[j], sizes[b]) for j, b in enumerate(missing)])
        first = made[keys[missing[0]]] if missing else self.rows[keys[0]]
        (batch, steps), (shared, regions) = captions_in.shape, (first[0].size(-1), first[1].size(-1))
        out_lp = first[0].new_zeros(batch, steps, shared)  # (B, T, S)
        out_alphas = first[1].new_zeros(batch, steps, regions)  # (B, T, L)
        for b, key in enumerate(keys):
            lp, alphas = made.get(key) or self.rows[key]  # a kept row holds exactly its caption's sizes[b] rows
            out_lp[b, : sizes[b]], out_alphas[b, : sizes[b]] = lp[: sizes[b]], alphas[: sizes[b]]
        return out_lp, out_alphas

    @staticmethod
    def keys(captions_in: Tensor, lengths: Tensor, pair_index: Tensor, image_index: Tensor | None) -> list[tuple]:
        """Each row's key: (pair index, image index or None, its tokens read by the teacher (bos and words))."""
        images = image_index.tolist() if image_index is not None else [None] * len(pair_index)
        rows = zip(pair_index.tolist(), images, captions_in.tolist(), lengths.tolist(), strict=True)
        return [(pair, image, tuple(tokens[:n])) for pair, image, tokens, n in rows]

    def _keep(self, made: list[tuple[tuple, Tensor, Tensor, int]]) -> None:
        """Keep each (pair, log-probabilities (T, S), attention (T, L), words) while the budget has room (copies of
        the real rows: a view would hold the whole batch's tensor)."""
        for key, lp, alphas, n in made:
            cost = n * (lp.size(-1) * lp.element_size() + alphas.size(-1) * alphas.element_size())
            if self.used + cost > self.budget:
                return
            self.rows[key] = (lp[:n].clone(), alphas[:n].clone())
            self.used += cost


def shared_words(teacher: Vocabulary, student: Vocabulary) -> tuple[list[int], list[int]]:
    """(teacher ids, student ids) of the words both spell alike, in the student's order."""
    pairs = [(teacher.stoi[w], i) for i, w in enumerate(student.itos) if w in teacher.stoi]
    return [t for t, _ in pairs], [s for _, s in pairs]


def distillation_loss(student_logits: Tensor, teacher_lp: Tensor, student_ids: Tensor, targets: Tensor, pad_id: int):
    """KL(p_teacher ‖ p_student) per non-pad word, averaged over them: student_logits (B, T, V), teacher_lp (B, T, S)
    over the shared words ``student_ids`` (S,), targets (B, T) (where pad says which words are padding). The
    student's distribution is its full softmax read at the shared words (mass it gives to others is a cost too)."""
    student_lp = F.log_softmax(widened(student_logits), dim=-1).index_select(-1, student_ids)  # (B, T, S)
    per_word = (teacher_lp.exp() * (teacher_lp - student_lp)).sum(-1)  # (B, T)
    real = targets != pad_id
    return (per_word * real).sum() / real.sum().clamp(min=1)


def attention_distillation_loss(student_alphas: Tensor, teacher_alphas: Tensor, targets: Tensor, pad_id: int):
    """KL(α_teacher ‖ α_student) per non-pad word, averaged over them: both (B, T, L), the regions' weights at each
    word, targets (B, T). The cross-entropy of attention supervision (the same gradient) less the teacher's entropy,
    so a student that looks where the teacher looks scores 0."""
    real = targets != pad_id  # (B, T)
    cross = attention_supervision_loss(student_alphas, teacher_alphas, real)
    entropy = attention_entropy(teacher_alphas)  # (B, T)
    return cross - (entropy * real).sum() / real.sum().clamp(min=1)


def load_teacher(name: str, student: Vocabulary, encode, image_size: int) -> tuple[Teacher, str]:
    """The teacher ``name`` (a model file or a bundled name) for a student of vocabulary ``student`` whose encoder is
    ``encode`` ((B, 3, H, W) -> (B, L, D)) at ``image_size`` px; and the line fit prints of it. A teacher whose
    features differ from the student's, or that shares no word with it: ValueError, one line naming the option."""
    from captioning.model.captioner import Captioner
    from text_attn.core.modelfile import ModelFileError

    opt = "model.objective.distil_from"
    try:
        loaded = Captioner.load(name)
    except ModelFileError as err:
        raise ValueError(f"{opt}: {err}") from None
    size = loaded.model.encoder.preprocess.image_size
    if size != image_size:
        raise ValueError(f"{opt}: {name} reads photos at {size} px, the student at {image_size}: it needs the "
                         "student's features (the same encoder, frozen)")  # fmt: skip
    probe = torch.Generator().manual_seed(0)
    image = torch.rand(2, 3, image_size, image_size, generator=probe)
    with torch.no_grad():
        theirs, ours = loaded.model.encoder.eval()(image), encode(image)
    if theirs.shape != ours.shape or not torch.allclose(theirs, ours.to(theirs.device), atol=FEATURES_ATOL):
        raise ValueError(
            f"{opt}: {name}'s encoder gives other features than the student's: the teacher reads the student's "
            "(cached) features, so both need the same encoder (weights and settings)"
        )
    teacher_ids, student_ids = shared_words(loaded.vocab, student)
    if not any(is_word(student.itos[i]) for i in student_ids):
        raise ValueError(f"{opt}: {name} shares no word with the student's vocabulary")
    to_teacher = torch.full((len(student),), Vocabulary.unk_id, dtype=torch.long)
    to_teacher[student_ids] = torch.tensor(teacher_ids)
    decoders = [d.eval().requires_grad_(False) for d in loaded.decoders]
    teacher = Teacher(decoders, torch.tensor(teacher_ids), torch.tensor(student_ids), to_teacher)
    kind = f"an ensemble of {len(decoders)} decoders" if len(decoders) > 1 else "one decoder"
    line = (f"{opt} {name} ({kind}): the student learns its next-word probabilities over the {len(teacher_ids):,} "
            f"words both know (of its {len(loaded.vocab):,}; the student's {len(student):,})")  # fmt: skip
    return teacher, line

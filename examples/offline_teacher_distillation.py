"""Offline distillation: train a student on stored teacher probabilities (spec §10.1).

A teacher we no longer run left an export: one ``nnx.teacher-record/1`` JSONL line
per sample, with its probabilities over the candidate ids ("cat", "dog", "fox") —
no logits. This script writes such an export (each record lists the candidates in
its own order, as exports do), reads it back strictly, joins it to the inputs by
sample id, aligns every distribution to the student's output order by candidate
id, trains with ``objective=dataset.objective(alpha=0.7)`` and reports the three
things offline evaluation keeps apart: teacher agreement and imitation loss over
every record, labelled quality over the labelled records only.

    uv run python examples/offline_teacher_distillation.py
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import torch

from nnx import NNModel, NNOptimParams, NNParams, NNTrainParams, set_seed
from nnx.metrics import MetricSpec
from nnx.monitors import MonitorSpec
from nnx.paradigms.offline_distillation import (
    TeacherDataset,
    TeacherRecord,
    evaluate_offline,
    read_teacher_records,
    write_teacher_records,
)

CANDIDATES = ("cat", "dog", "fox")
DIGEST = "animals-v1"  # the question schema's digest, shared by the export and the dataset


def export(path: Path, n: int, offset: int, seed: int) -> tuple[dict[str, torch.Tensor],
                                                                dict[str, str | None]]:
    """Write a teacher export of n samples; return their inputs and (some) labels."""
    g = torch.Generator().manual_seed(seed)
    shuffle = random.Random(seed)
    centres = torch.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    inputs, labels, records = {}, {}, []
    for i in range(n):
        sid = f"s{offset + i}"
        label = i % 3
        x = centres[label] + 0.9 * torch.randn(2, generator=g)
        probs = torch.softmax(-((x - centres) ** 2).sum(1), 0).double()  # the old teacher
        probs = (probs / probs.sum()).tolist()
        order = list(range(3))
        shuffle.shuffle(order)
        records.append(TeacherRecord(
            sample_id=sid, question_id="which-animal",
            candidates=tuple(CANDIDATES[j] for j in order),
            probabilities=tuple(probs[j] for j in order), teacher="animal-teacher", revision="r7",
            schema_digest=DIGEST, semantics="predictive",
            provenance={"source": "export-2026-01", "training_rights": "internal-research"}))
        inputs[sid] = x
        labels[sid] = CANDIDATES[label]
    write_teacher_records(path, records)
    return inputs, labels


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        train_in, train_labels = export(root / "train.jsonl", 240, 0, seed=0)
        held_in, held_labels = export(root / "held_out.jsonl", 60, 1000, seed=1)
        # Only half of the held-out samples were ever labelled by hand.
        held_labels = {s: (v if int(s[1:]) % 2 == 0 else None) for s, v in held_labels.items()}

        train = TeacherDataset(read_teacher_records(root / "train.jsonl"), train_in,
                               candidates=CANDIDATES, schema_digest=DIGEST, labels=train_labels)
        held_out = TeacherDataset(read_teacher_records(root / "held_out.jsonl"), held_in,
                                  candidates=CANDIDATES, schema_digest=DIGEST, labels=held_labels)

        set_seed(0)
        student = NNModel(net_params=NNParams(input_dim=2, output_dim=3, hidden_dims=(16,)))
        before = evaluate_offline(student, held_out)
        objective = train.objective(alpha=0.7)
        run = student.train(
            NNTrainParams(n_epochs=15, train_loader=train.loader(32, shuffle=True, seed=0),
                          val_loader=held_out.loader(64), seed=0,
                          optim=NNOptimParams.builder().adamw(max_lr=2e-2).build(),
                          metrics=(MetricSpec("label_accuracy"), MetricSpec("label_nll")),
                          monitor=MonitorSpec(metric="label_accuracy")),
            objective=objective, eval_step_fn=held_out.eval_step(), verbose=False,
            root=root / "runs")
        after = evaluate_offline(student, held_out)

        print(f"objective identity: {objective.identity()}")
        print(f"run {run.id[:8]}: {len(run.epoch_records())} epochs, BEST selected on "
              f"val label_accuracy")
        print("before training:\n" + before.text())
        print("after training:\n" + after.text())
        assert after.imitation.loss < before.imitation.loss
        assert after.agreement.agreement >= 0.85, after.agreement
        assert after.labelled.records == 30 and after.agreement.records == 60
        assert after.labelled.accuracy is not None and after.labelled.accuracy >= 0.75


if __name__ == "__main__":
    main()

"""Typed decisions from a trained classifier (spec §17): FixedHeadProvider end to end.

A tiny classifier is trained on three animal classes; FixedHeadProvider then answers a
typed Choice over its exact label space (and, through a bijection, a question with
other ids), refuses a question its head does not justify before any forward, and its
validated answers go through an abstention policy (§19) and into nnx.teacher-record/1
records (§10.1). Offline and seeded.

    uv run python examples/decision_fixed_head.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

from nnx import Devices, NNModel, NNModelParams, NNParams, NNTrainParams
from nnx.abstention import AbstentionPolicy
from nnx.decisions import (
    Choice,
    FixedHeadProvider,
    UnsupportedCapability,
    decide_result,
    save_teacher_records,
    teacher_records,
)
from nnx.result import Ok

LABELS = ("cat", "dog", "fox")


def data(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (240,), generator=g)
    x = torch.randn(240, 4, generator=g) * 0.7
    x[torch.arange(240), y] += 3.0  # class k lights feature k
    return x, y


def main() -> None:
    x, y = data(0)
    torch.manual_seed(0)
    model = NNModel(NNParams(input_dim=4, output_dim=3, hidden_dims=(16,)),
                    NNModelParams(device=Devices.CPU))
    with tempfile.TemporaryDirectory() as root:
        model.train(NNTrainParams(n_epochs=25, seed=0).with_train_loader(
            [(x[i:i + 40], y[i:i + 40]) for i in range(0, 240, 40)]), verbose=False,
            root=root)

    animal = Choice("Which animal is it?", [("fox", "A fox"), ("cat", "A cat"),
                                            ("dog", "A dog")])
    provider = FixedHeadProvider(model, labels=LABELS)
    test_x, test_y = data(1)
    results = provider.decide(animal, test_x[:60])
    accuracy = sum(r.choice == LABELS[int(t)] for r, t in zip(results, test_y[:60],
                                                              strict=True)) / 60
    print(f"first answer: {results[0].choice} {results[0].distribution}")
    print(f"accuracy on 60 held-out rows: {accuracy:.2f}")
    assert results[0].ids == ("fox", "cat", "dog")  # the question's order, not the head's
    assert accuracy > 0.8

    # Other ids through a bijection onto the head's labels.
    letters = Choice("Which letter?", [("a", "first"), ("b", "second"), ("c", "third")])
    mapped = FixedHeadProvider(model, labels=LABELS, mapping={"a": "cat", "b": "dog",
                                                              "c": "fox"})
    same = mapped.decide(letters, test_x[:1])[0]
    assert same.probabilities[0] == provider.decide(animal, test_x[:1])[0].probability("cat")

    # A question the head does not justify: refused before any forward.
    try:
        provider.decide(Choice("Cat or dog?", [("cat", "A cat"), ("dog", "A dog")]), test_x)
    except UnsupportedCapability as exc:
        print(f"refused: {exc}")

    # An abstention policy over the typed decisions: abstaining is a success.
    policy = AbstentionPolicy("margin", 0.5, labels=animal.ids, model_id="animals:BEST")
    outcome = decide_result(provider, animal, test_x[:60], policy=policy,
                            model_id="animals:BEST")
    assert isinstance(outcome, Ok)
    abstained = [d for d in outcome.value if d.abstained]
    print(f"accepted {60 - len(abstained)} of 60 at margin >= 0.5; "
          f"{len(abstained)} abstained ({abstained[0].reason if abstained else '-'})")
    # an abstention keeps the provider's result unchanged
    assert all(d.result == r for d, r in zip(outcome.value, results, strict=True))

    # The answers as offline teacher records (nnx-paradigms' read_teacher_records reads them).
    records = teacher_records({f"row-{i}": r for i, r in enumerate(results)},
                              question_id="animal", teacher="animals-classifier",
                              revision="animals:BEST", source="examples/decision_fixed_head.py",
                              training_rights="synthetic data, internal use")
    with tempfile.TemporaryDirectory() as out:
        path = Path(out) / "teacher.jsonl"
        save_teacher_records(path, records)
        first = json.loads(path.read_text().splitlines()[0])
    print(f"teacher record: {first['sample_id']} {first['candidates']} "
          f"digest {first['schema_digest'][:12]}")
    assert first["schema_digest"] == animal.digest()


if __name__ == "__main__":
    main()

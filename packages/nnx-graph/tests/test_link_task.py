"""LinkTask end to end (spec §26 "Training negatives", "Checks", "Batch roles",
"Checkpoints"; §4.2 set_epoch): per-epoch negatives from (seed, epoch), every batch checked
before any update, the default paths refused, component state "link.task"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from _link_tiny import N, StopAfterTwo, a_split, graph, model, plan, same, weights

from nnx import Callback, NNRun
from nnx.components import ComponentRestoreError
from nnx.extend import Task
from nnx.link_tasks import LinkBatchError, LinkTask, split_links


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()} if root.exists() else {}


def candidates(batches: list[Any]) -> list[tuple[torch.Tensor, ...]]:
    return [(b.edge_label_index, b.edge_label, b.candidate_id) for b in batches]


def equal(a: list[tuple[torch.Tensor, ...]], b: list[tuple[torch.Tensor, ...]]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for p, q in zip(a, b, strict=True)
                                    for x, y in zip(p, q, strict=True))


def test_the_task_answers_the_protocol_and_its_identity_names_the_split() -> None:
    split, _, _ = a_split()
    task = LinkTask(split)
    assert isinstance(task, Task)
    assert task.identity() == {"kind": "link.task", "split": split.digest}
    assert LinkTask(split, seed=9).identity()["seed"] == 9


def test_training_negatives_are_a_function_of_seed_and_epoch_alone() -> None:
    split, _, x = a_split()
    loader = LinkTask(split).loader("train", x, 16)
    loader.set_epoch(1)
    first = candidates(list(loader))
    assert equal(candidates(list(loader)), first)  # an extra iteration changes nothing
    again = LinkTask(split).loader("train", x, 16)
    again.set_epoch(1)
    assert equal(candidates(list(again)), first)  # a fresh loader at epoch 1 draws the same
    loader.set_epoch(2)
    assert not equal(candidates(list(loader)), first)  # another epoch draws again
    assert len(loader) == len(first)
    positives = torch.cat(list(split.positives.values()), dim=1)
    taken = {(int(u), int(v)) for u, v in torch.cat([positives, *split.fixed_negatives.values()],
                                                    dim=1).t()}
    ids = torch.cat([b.candidate_id for b in loader])
    pairs = torch.cat([b.edge_label_index for b in loader], dim=1)
    drawn = pairs[:, ids >= split.fixed_count]
    assert drawn.shape[1] == split.positives["train"].shape[1]  # one per positive
    assert not {(int(u), int(v)) for u, v in drawn.t()} & taken
    for batch in loader:
        assert torch.equal(batch.edge_index, split.message_edge_index())


def test_validation_and_test_loaders_list_their_fixed_candidates_in_id_order() -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    for role in ("val", "test"):
        batches = list(task.loader(role, x, 7))
        ids = torch.cat([b.candidate_id for b in batches])
        assert torch.equal(ids, split.candidate_ids(role))
        assert {b.link_role for b in batches} == {role}
        labels = torch.cat([b.edge_label for b in batches])
        assert int(labels.sum()) == split.positives[role].shape[1]


def bad_batches(split: Any, x: torch.Tensor) -> dict[str, tuple[Any, str]]:
    """One training batch spoilt in each way §26 "Checks" names, with the refusal's words."""
    task = LinkTask(split)
    good = next(iter(task.loader("train", x, 8)))
    val_pair = split.positives["val"][:, :1]
    fixed = split.fixed_count

    def spoilt(**fields: Any) -> Any:
        out = good.clone()
        for key, value in fields.items():
            setattr(out, key, value)
        return out

    first_id = int(good.candidate_id[0])
    pairs, targets, _ = split.candidates()
    negative = split.fixed_negatives["val"][:, :1]
    return {
        "leaked": (spoilt(edge_index=torch.cat([good.edge_index, val_pair], 1)),
                   "held-out validation positive"),
        "leaked reverse": (spoilt(edge_index=torch.cat([good.edge_index, val_pair.flip(0)], 1)),
                           "held-out validation positive"),
        "non-edge": (spoilt(edge_index=torch.cat([good.edge_index, negative], 1)),
                     "outside the training topology"),
        "role": (spoilt(link_role="val"), "bound to their role"),
        "target": (spoilt(edge_label=1 - good.edge_label), "with target"),
        "id": (spoilt(candidate_id=good.candidate_id.roll(1)), "with target|training negative"),
        "other split": (spoilt(candidate_id=split.candidate_ids("val")[:8],
                               edge_label_index=pairs[:, split.candidate_ids("val")[:8]],
                               edge_label=targets[split.candidate_ids("val")[:8]]),
                        "outside the training split"),
        "self-loop": (spoilt(candidate_id=torch.tensor([fixed + 100]),
                             edge_label_index=torch.tensor([[3], [3]]),
                             edge_label=torch.tensor([0])), "self-loop"),
        "fixed negative": (spoilt(candidate_id=torch.tensor([fixed + 100]),
                                  edge_label_index=negative, edge_label=torch.tensor([0])),
                           "fixed validation / test negative"),
        "positive as negative": (spoilt(candidate_id=torch.tensor([fixed + 100]),
                                        edge_label_index=val_pair,
                                        edge_label=torch.tensor([0])),
                                 "a positive of the split"),
        "missing field": ({"x": x}, "needs 'link_role'"),
        "first id kept": (spoilt(candidate_id=torch.full_like(good.candidate_id, first_id)),
                          "listed twice"),
    }


def test_every_bad_batch_is_refused_before_any_update(tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    for what, (batch, match) in bad_batches(split, x).items():
        m = model(task)
        before = weights(m)
        root = tmp_path / what.replace(" ", "_")
        params = plan(task, x)
        good = list(task.loader("train", x, 8))
        with pytest.raises(LinkBatchError, match=match):  # the bad batch last: scanned first
            m.train(params.with_train_loader([*good, batch]), root=root, verbose=False)
        assert same(weights(m), before) and files(root) == {}, what
        with pytest.raises(LinkBatchError, match=match):  # the objective checks it as well
            task.checker.parse(batch, "train")


def test_the_default_paths_and_a_wrong_output_shape_are_refused(tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    m = model(task)
    with pytest.raises(LinkBatchError, match="default predict"):
        m.predict(x)
    with pytest.raises(LinkBatchError, match="default evaluate"):
        m.evaluate(list(task.loader("val", x, 8)))
    wide = model(task, categories=3)
    before = weights(wide)
    with pytest.raises(LinkBatchError, match="logits of shape"):
        wide.train(plan(task, x), root=tmp_path, verbose=False)
    assert same(weights(wide), before)


def test_a_resumed_run_draws_the_same_negatives_and_ends_bit_for_bit(tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    straight = model(task)
    straight_run = straight.train(plan(task, x, n_epochs=3), root=tmp_path / "a",
                                  verbose=False)
    first = model(task)  # planned for 3 epochs, stopped after 2
    run = first.train(plan(task, x, n_epochs=3), callbacks=[StopAfterTwo()],
                      root=tmp_path / "b", verbose=False)
    assert len(NNRun.load(run.id, root=tmp_path / "b").epoch_records()) == 2
    resumed = model(task, seed=5)  # other weights: the checkpoint must replace them
    again = resumed.train(plan(task, x, n_epochs=3, resume_from_run_id=run.id,
                               resume_mode="stateful", resume_epochs="planned"),
                          root=tmp_path / "b", verbose=False)
    assert "link.task" in again.resume_status.restored_components
    seen = first.net.seen + resumed.net.seen
    assert len(seen) == len(straight.net.seen)
    per_epoch = len(seen) // 3
    assert not torch.equal(seen[0], seen[2 * per_epoch])  # epochs 0 and 2 draw apart
    assert all(torch.equal(a, b) for a, b in zip(seen, straight.net.seen, strict=True))
    assert same(weights(resumed), weights(straight))
    joined = [*NNRun.load(run.id, root=tmp_path / "b").epoch_records(),
              *NNRun.load(again.id, root=tmp_path / "b").epoch_records()]
    whole = NNRun.load(straight_run.id, root=tmp_path / "a").epoch_records()
    assert [r.train_edp.loss for r in joined] == [r.train_edp.loss for r in whole]


def test_a_resume_with_another_split_or_seed_is_refused_but_a_warm_start_is_not(
        tmp_path) -> None:
    split, edge_index, x = a_split()
    task = LinkTask(split)
    run = model(task).train(plan(task, x), root=tmp_path, verbose=False)
    other_split = LinkTask(split_links(edge_index, N, val=0.15, test=0.15, seed=8))
    for other, match in ((other_split, "split manifest"),
                         (LinkTask(split, seed=3), "negatives' seed")):
        m = model(other, seed=1)
        before, disk = weights(m), files(tmp_path)
        with pytest.raises(ComponentRestoreError, match=match):
            m.train(plan(other, x, resume_from_run_id=run.id, resume_mode="stateful"),
                    root=tmp_path, verbose=False)
        assert same(weights(m), before) and files(tmp_path) == disk
    warm = model(other_split, seed=1)
    warm.train(plan(other_split, x, resume_from_run_id=run.id, resume_mode="weights_only"),
               root=tmp_path, verbose=False)


def test_an_edge_label_split_trains_on_categories_without_negatives(tmp_path) -> None:
    edge_index, x = graph(2)
    labels = (edge_index.min(0).values + edge_index.max(0).values) % 3
    split = split_links(edge_index, N, categories=("a", "b", "c"), labels=labels,
                        label_existence="visible")
    task = LinkTask(split)
    batches = list(task.loader("train", x, 16))
    assert all(int(b.candidate_id.max()) < split.fixed_count for b in batches)
    m = model(task, categories=3)
    run = m.train(plan(task, x, n_epochs=2), root=tmp_path, verbose=False)
    losses = [r.train_edp.loss for r in run.epoch_records()]
    assert all(loss > 0 for loss in losses)


def test_a_training_loader_built_with_another_seed_is_refused(tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    m = model(task)
    before = weights(m)
    stranger = LinkTask(split, seed=7).loader("train", x, 32)
    with pytest.raises(LinkBatchError, match="negatives' seed"):
        m.train(plan(task, x).with_train_loader(stranger), root=tmp_path, verbose=False)
    assert same(weights(m), before) and files(tmp_path) == {}


class ScoreTheTrainingLoader(Callback):
    """Iterates the training loader at every epoch end, as a callback scoring it would."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.passes = 0

    def on_epoch_end(self, ctx: Any) -> None:
        self.passes += len(list(self.loader))


def test_an_extra_iteration_of_the_training_loader_changes_nothing(tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    plain = model(task)
    plain.train(plan(task, x, n_epochs=2), root=tmp_path / "a", verbose=False)
    scored = model(task)
    params = plan(task, x, n_epochs=2)
    spy = ScoreTheTrainingLoader(params.train_loader)
    scored.train(params, callbacks=[spy], root=tmp_path / "b", verbose=False)
    assert spy.passes > 0
    assert all(torch.equal(a, b) for a, b in zip(plain.net.seen, scored.net.seen, strict=True))
    assert same(weights(scored), weights(plain))

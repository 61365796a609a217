"""Runs with a parent (spec §23): followed parents, named checkpoints, unknown lineages
and the refusals (a cycle, more than 64 ancestors, an unreadable ancestor)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from _runs import loaders, train

from nnx import (
    Callback,
    Devices,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainerParams,
    Trainer,
    supervised_objective,
)
from nnx.comparison import MAX_ANCESTORS, LineageError, observations_from_runs, summarize
from nnx.provenance import ExperimentManifest, begin_attempt


def _resume(root: Path, parent: str, *, seed: int, provenance: bool = True, **params: Any):
    return train(root, seed=seed, epochs=1, provenance=provenance,
                 params={"resume_from_run_id": parent, **params})


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """Two identically configured parents (seeds 0, 1), each continued once."""
    root = tmp_path_factory.mktemp("family") / "runs"
    parents = [train(root, seed=s).id for s in (0, 1)]
    children = [_resume(root, p, seed=s).id for s, p in zip((0, 1), parents, strict=True)]
    return root, parents, children


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("reading a lineage unpickled something")


def _configs(root: Path, ids: list[str]) -> list[str | None]:
    """The configuration identities, read with pickle and torch.load refused."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("load", "loads", "Unpickler"):
            patch.setattr(pickle, name, _refuse)
        patch.setattr(torch, "load", _refuse)
        return [o.config for o in observations_from_runs(ids, metric="loss", root=root)]


def test_continuations_of_identical_parents_pool_and_never_with_fresh_runs(family):
    root, parents, children = family
    fresh = train(root, seed=2, epochs=1).id
    configs = _configs(root, [*children, *parents, fresh])
    assert configs[0] == configs[1] is not None  # descended the same way
    assert len(set(configs[1:])) == 3 and configs[2] == configs[3]  # parents pool together
    observations = observations_from_runs([*children, *parents], metric="loss", root=root)
    summary = summarize(observations)
    assert [len(g.observations) for g in summary] == [2, 2] and "config" in summary.differing
    attempt = json.loads((root / children[0] / "attempt.json").read_text())
    assert attempt["parent"]["epoch"] == 1  # the epoch it resumed at, recorded by core


def test_fine_tunes_of_parents_pretrained_on_other_data_never_pool(tmp_path):
    root = tmp_path / "runs"
    parents = [train(root, seed=s, data=d).id
               for s, d in ((0, "pretrain-a"), (1, "pretrain-b"), (2, "pretrain-a"))]
    # Identically configured fine-tunes on the same declared data, one per parent.
    children = [_resume(root, p, seed=5 + i).id for i, p in enumerate(parents)]
    configs = _configs(root, [*children, *parents])
    on_a, on_b, on_a_again = configs[:3]
    assert on_a == on_a_again is not None and on_b not in (on_a, None)
    # The parents themselves keep one configuration; their data is the observation's own.
    assert configs[3] == configs[4] == configs[5]
    observations = observations_from_runs(children, metric="loss", root=root)
    assert observations[0].data == observations[1].data  # the fine-tunes' own data agree
    assert sorted(len(g.observations) for g in summarize(observations)) == [1, 2]


def test_an_unfollowed_parent_is_named_by_the_recorded_checkpoint(family, tmp_path):
    root, parents, children = family
    before = _configs(root, children[:1])[0]
    path = root / parents[0] / "attempt.json"
    original = path.read_text()
    retrained = json.loads(original)
    retrained["attempt_id"] = "f" * 32  # the parent was trained again since
    path.write_text(json.dumps(retrained))
    try:
        [named] = _configs(root, children[:1])
    finally:
        path.write_text(original)
    assert named is not None and named != before  # only siblings of that checkpoint pool
    assert _configs(root, children[:1])[0] == before


def test_only_siblings_of_a_named_checkpoint_pool(tmp_path):
    root = tmp_path / "runs"
    parents = [train(root, seed=s).id for s in (0, 1)]
    siblings = [_resume(root, parents[0], seed=s).id for s in (10, 11)]
    cousin = _resume(root, parents[1], seed=10).id
    followed = _configs(root, [*siblings, cousin])
    assert len(set(followed)) == 1  # followed: identically configured parents
    for parent in parents:  # both parents trained again since: neither is followed
        path = root / parent / "attempt.json"
        path.write_text(path.read_text().replace(
            json.loads(path.read_text())["attempt_id"], "e" * 32))
    named = _configs(root, [*siblings, cousin])
    assert named[0] == named[1] and named[2] != named[0] and named[0] != followed[0]


def test_a_child_without_provenance_has_an_unknown_lineage_that_pools_with_nothing(family):
    root, parents, _ = family
    a = _resume(root, parents[0], seed=5, provenance=False).id
    b = _resume(root, parents[1], seed=5, provenance=False, data_id="x").id
    assert _configs(root, [a, b]) == [None, None]
    observations = observations_from_runs([a, b], metric="loss", root=root)
    assert len(summarize(observations)) == 2


# -- fabricated runs for the limits: run.yaml and provenance files only ------------------

def _fake(root: Path, run_id: str, parent: str | None = None) -> str:
    path = root / run_id
    path.mkdir(parents=True)
    train_block: dict[str, Any] = {"n_epochs": 1, "seed": 0}
    if parent is not None:
        train_block["parent_run_id"] = parent
    (path / "run.yaml").write_text(yaml.safe_dump(
        {"model": {"net": "FEED_FWD", "loss": "CROSS_ENTROPY"}, "train": train_block}))
    (path / "metadata.yaml").write_text(yaml.safe_dump({"resume": {"mode": "stateful"}}))
    link = None
    if parent is not None:
        recorded = json.loads((root / parent / "attempt.json").read_text())["attempt_id"]
        link = {"run_id": parent, "attempt_id": recorded, "checkpoint": "last",
                "generation": 1, "epoch": 0}
    attempt = begin_attempt(path, ExperimentManifest(config={"n": 1}), parent=link)
    attempt.finish("completed")
    return run_id


def _chain(root: Path, length: int) -> list[str]:
    """run-0 (newest) ... run-<length-1> (the first, fresh); each the next one's child."""
    ids = [f"run-{i}" for i in range(length)]
    _fake(root, ids[-1])
    for i in range(length - 2, -1, -1):
        _fake(root, ids[i], parent=ids[i + 1])
    return ids


def test_more_than_64_ancestors_are_refused_whatever_the_order(tmp_path):
    ids = _chain(tmp_path, MAX_ANCESTORS + 2)  # run-0 has 65 ancestors, run-1 64
    assert _configs(tmp_path, [ids[1]])[0] is not None
    with pytest.raises(LineageError, match="more than 64 ancestors"):
        _configs(tmp_path, [ids[0]])
    with pytest.raises(LineageError, match="more than 64 ancestors"):
        _configs(tmp_path, [ids[1], ids[0]])  # a known identity is counted through


def test_a_cycle_of_parents_is_refused(tmp_path):
    _fake(tmp_path, "a")
    _fake(tmp_path, "b", parent="a")
    config = yaml.safe_load((tmp_path / "a" / "run.yaml").read_text())
    config["train"]["parent_run_id"] = "b"
    (tmp_path / "a" / "run.yaml").write_text(yaml.safe_dump(config))
    attempt = json.loads((tmp_path / "a" / "attempt.json").read_text())
    b_attempt = json.loads((tmp_path / "b" / "attempt.json").read_text())["attempt_id"]
    attempt["parent"] = {"run_id": "b", "attempt_id": b_attempt, "checkpoint": "last",
                         "generation": 1, "epoch": 0}
    (tmp_path / "a" / "attempt.json").write_text(json.dumps(attempt))
    with pytest.raises(LineageError, match="cycle"):
        _configs(tmp_path, ["b"])


def test_an_unreadable_ancestor_is_refused_and_a_deleted_one_is_named(tmp_path):
    ids = _chain(tmp_path, 3)
    followed = _configs(tmp_path, [ids[0]])[0]
    (tmp_path / ids[1] / "provenance.json").write_text("{broken")
    with pytest.warns(RuntimeWarning, match="provenance"), pytest.raises(
            LineageError, match="cannot be read"):
        _configs(tmp_path, [ids[0]])
    (tmp_path / ids[1] / "run.yaml").write_text(": : :")
    with pytest.raises(LineageError, match="cannot be read"):
        _configs(tmp_path, [ids[0]])
    for item in (tmp_path / ids[1]).iterdir():
        item.unlink()
    (tmp_path / ids[1]).rmdir()
    named = _configs(tmp_path, [ids[0]])[0]
    assert named is not None and named != followed


def test_a_child_of_an_unfinished_parent_carries_its_start_epoch(tmp_path):
    class Killed(Callback):  # the parent dies in its second epoch, after LAST at epoch 0
        def on_epoch_end(self, ctx):
            if ctx.epoch == 1:
                raise RuntimeError("killed")

    root = tmp_path / "runs"
    finished = train(root, seed=0).id
    unfinished = []
    for seed in (1, 2):
        with pytest.raises(RuntimeError, match="killed"):
            train(root, seed=seed, callbacks=[Killed()])
        unfinished.append(next(p.name for p in root.iterdir() if len(p.name) == 32
                               and p.name not in (finished, *unfinished)))
    children = [_resume(root, parent, seed=7 + i).id
                for i, parent in enumerate([finished, *unfinished])]
    from_finished, *from_unfinished = _configs(root, children)
    # The parents share one identity; the children of the killed ones started at epoch 0,
    # part of their procedure, while the finished parent's last is an outcome.
    assert _configs(root, [finished, *unfinished]).count(_configs(root, [finished])[0]) == 3
    assert from_unfinished[0] == from_unfinished[1] != from_finished


def test_trainer_runs_are_identified_without_their_seed(tmp_path):
    root = tmp_path / "runs"
    ids = []
    for seed in (0, 1):
        train_loader, val_loader = loaders()
        params = (NNTrainerParams.builder().n_epochs(1).seed(seed).train_loader(train_loader)
                  .val_loader(val_loader)
                  .optimizer("main", NNOptimParams.builder().sgd(max_lr=0.1).build()).build())
        model = NNModel(NNParams(input_dim=4, output_dim=2, hidden_dims=(8,)),
                        NNModelParams(device=Devices.CPU))
        ids.append(Trainer(model).train(params, objective=supervised_objective(), root=root,
                                        verbose=False,
                                        provenance=ExperimentManifest.for_model(model)).id)
    first, second = observations_from_runs(ids, metric="loss", root=root)
    assert first.config == second.config and first.run_id != second.run_id
    assert (first.replicate, second.replicate) == ("seed=0", "seed=1")
    assert first.status == "completed" and first.value is not None

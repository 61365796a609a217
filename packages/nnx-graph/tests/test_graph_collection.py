"""GraphCollection (spec §25): every graph checked once, split only by id, batched whole
by a seeded, resumable loader; every malformed batch refused by a specific error."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _graph_families import F, cycle, families

from nnx.graph_tasks import (
    IGNORE,
    BatchVectorError,
    CrossGraphEdgeError,
    EmptyGraphError,
    GraphBatch,
    GraphCollection,
    GraphCollectionError,
    GraphIdError,
    GraphTargetError,
)
from nnx.graph_tasks.batch import check_batch, check_targets

X = torch.ones(3, F)
E = cycle(3)


@pytest.mark.parametrize(("graphs", "ids", "targets", "message"), [
    ([(X, E), (X, E)], [1, 1], [0, 1], "ids must be unique"),
    ([(X, E)], [-1], [0], "non-negative integers"),
    ([(X, E)], [1.0], [0], "non-negative integers"),
    ([(X, E)], [1, 2], [0], "one id per graph"),
    ([(torch.ones(0, F), E[:, :0])], [1], [0], "graph 1 has no node"),
    ([(X, E), (torch.ones(3, F + 1), E)], [1, 2], [0, 1], "graph 2 has 5 features"),
    ([(X, E + 1)], [7], [0], r"graph 7: an edge names a node outside 0\.\.2"),
    ([(X, E), (X, E)], [1, 2], [0, None], "graph 2 needs a non-negative integer target"),
    ([(X, E)], [1], [-3], "graph 1 needs a non-negative integer target"),
])
def test_every_graph_is_checked_once_when_the_collection_is_built(graphs, ids, targets,
                                                                    message) -> None:
    with pytest.raises(GraphCollectionError, match=message):
        GraphCollection(graphs, ids, targets)


def test_an_unlabeled_graph_has_the_ignore_target_and_a_flag_must_name_a_graph() -> None:
    coll = GraphCollection([(X, E), (X, E)], [4, 9], [1, None], unlabeled=[9])
    assert coll.targets.tolist() == [1, IGNORE]
    assert GraphCollection([(X, E)], [4], unlabeled=[4]).targets.tolist() == [IGNORE]
    with pytest.raises(GraphCollectionError, match=r"not in the collection"):
        GraphCollection([(X, E)], [4], [1], unlabeled=[5])
    with pytest.raises(GraphCollectionError, match="flagged unlabeled but has target 1"):
        GraphCollection([(X, E)], [4], [1], unlabeled=[4])


def test_subset_splits_by_graph_id_and_keeps_each_graph_its_target() -> None:
    coll = families(6)
    part = coll.subset([105, 100])
    assert part.ids == (105, 100) and part.targets.tolist() == [1, 0]
    assert part.graph(105)[0] is coll.graph(105)[0]
    assert len(coll) == 6  # the collection never splits itself
    with pytest.raises(GraphCollectionError, match="not in the collection"):
        coll.subset([1])


def test_a_batch_stacks_whole_graphs_with_ptr_batch_vector_and_ids() -> None:
    coll = families(3)
    inputs, y = coll.batch([102, 100])
    sizes = [coll.graph(102)[0].shape[0], coll.graph(100)[0].shape[0]]
    assert inputs.ptr.tolist() == [0, sizes[0], sizes[0] + sizes[1]]
    assert inputs.batch.tolist() == [0] * sizes[0] + [1] * sizes[1]
    assert inputs.graph_id.tolist() == [102, 100] == inputs.sample_ids().tolist()
    assert y.tolist() == [0, 0]
    check_batch(inputs)


def test_the_shuffling_loader_is_seeded_and_its_generator_runs_on() -> None:
    coll = families(10)
    a, b = coll.loader(batch_size=3, shuffle=True, seed=4), coll.loader(batch_size=3,
                                                                         shuffle=True, seed=4)
    first = [batch[0].graph_id.tolist() for batch in a]
    assert first == [batch[0].graph_id.tolist() for batch in b]
    assert [len(ids) for ids in first] == [3, 3, 3, 1]
    drawn = [gid for ids in first for gid in ids]
    assert sorted(drawn) == list(coll.ids)
    assert a.sample_ids().tolist() == drawn
    state = a.generator.get_state()
    second = [batch[0].graph_id.tolist() for batch in a]
    assert second != first  # the next pass draws another order ...
    a.generator.set_state(state)  # ... which a restored generator draws again
    assert [batch[0].graph_id.tolist() for batch in a] == second
    plain = coll.loader(batch_size=4)
    assert next(batch[0].graph_id.tolist() for batch in plain) == [100, 101, 102, 103]


def _good() -> GraphBatch:
    return families(3).batch([100, 101, 102])[0]


@pytest.mark.parametrize(("change", "error", "message"), [
    (lambda b: {"graph_id": torch.tensor([1, 1, 2])}, GraphIdError, "unique"),
    (lambda b: {"graph_id": torch.tensor([1, 2])}, GraphIdError, "every graph needs its id"),
    (lambda b: {"graph_id": torch.tensor([1.0, 2.0, 3.0])}, GraphIdError, "integer"),
    (lambda b: {"ptr": torch.tensor([0, int(b.ptr[1]), int(b.ptr[1]), int(b.ptr[3])])},
     EmptyGraphError, r"graph\(s\) \[101\] have no node"),
    (lambda b: {"ptr": b.ptr + 1}, BatchVectorError, "ptr must run from 0"),
    (lambda b: {"batch": b.batch.flip(0)}, BatchVectorError, "disagrees with ptr"),
    (lambda b: {"edge_index": torch.tensor([[0], [int(b.ptr[1])]])}, CrossGraphEdgeError,
     "joins graph"),
    (lambda b: {"edge_index": torch.tensor([[0], [10_000]])}, CrossGraphEdgeError, "outside"),
])
def test_every_malformed_batch_is_refused_by_its_own_error(change, error, message) -> None:
    good = _good()
    bad = dataclasses.replace(good, **change(good))
    with pytest.raises(error, match=message):
        check_batch(bad)


def test_a_batch_needs_one_integer_target_per_graph() -> None:
    good = _good()
    check_targets(good, torch.tensor([0, 1, 0]))
    with pytest.raises(GraphTargetError, match="3 graph"):
        check_targets(good, torch.tensor([0, 1]))
    with pytest.raises(GraphTargetError, match="integer"):
        check_targets(good, torch.tensor([0.0, 1.0, 0.0]))

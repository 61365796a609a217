"""The edge split (spec §26 "The manifest", "Topology", "Negatives come from the static
complement"): canonicalisation, the leakage guarantees, capacity, replay and the manifest."""

from __future__ import annotations

import pytest
import torch
from _link_tiny import N, a_split, graph

import nnx.link_tasks.derive as derive
import nnx.link_tasks.negatives as negatives
from nnx.link_tasks import (
    LinkCapacityError,
    LinkReplayError,
    LinkSplit,
    LinkSplitError,
    LinkTask,
    plan_link_split,
    split_links,
)


def pair_set(edges: torch.Tensor) -> set[tuple[int, int]]:
    return {(int(u), int(v)) for u, v in edges.t()}


def undirected(edges: torch.Tensor) -> set[tuple[int, int]]:
    return {(min(u, v), max(u, v)) for u, v in pair_set(edges)}


def test_edges_are_canonical_unique_and_in_exactly_one_split() -> None:
    split, edge_index, _ = a_split()
    everything = [pair_set(split.positives[r]) for r in ("train", "val", "test")]
    union = set().union(*everything)
    assert sum(len(s) for s in everything) == len(union)  # no pair in two splits
    assert union == {e for e in undirected(edge_index) if e[0] != e[1]}  # nothing lost
    assert all(u < v for u, v in union)  # (min, max), self-loops barred by default
    request = split.request
    assert request["duplicates_dropped"] + request["self_loops_dropped"] + len(union) == \
        edge_index.shape[1]
    assert split.manifest()["format"] == "nnx.link-split/1"
    assert plan_link_split is split_links


def test_no_held_out_positive_or_its_reverse_ever_passes_messages() -> None:
    for kwargs in ({}, {"directed": True}, {"categories": ("a", "b"), "labels": "per-edge"}):
        edge_index, _ = graph(1)
        if kwargs.get("labels") == "per-edge":
            u, v = edge_index.min(0).values, edge_index.max(0).values
            kwargs["labels"] = (u + v) % 2  # one category per (undirected) edge
        split = split_links(edge_index, N, val=0.2, test=0.2, seed=4, **kwargs)
        message = pair_set(split.message_edge_index())
        for role in ("val", "test"):
            held = pair_set(split.positives[role])
            assert held and not held & message, (kwargs, role)
            if not split.directed:
                assert not {(v, u) for u, v in held} & message
        train = pair_set(split.positives["train"])
        expected = train if split.directed else train | {(v, u) for u, v in train}
        assert message == expected


def test_fractions_are_exact_decimals_rounded_down() -> None:
    edges = torch.stack([torch.zeros(100, dtype=torch.long), torch.arange(1, 101)])
    split = split_links(edges, 101, val=0.29, test=0.07, negatives=0)  # 0.29 * 100 < 29
    assert (split.positives["val"].shape[1], split.positives["test"].shape[1]) == (29, 7)


def test_a_directed_split_keeps_both_directions_apart() -> None:
    edges = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 0, 3, 2, 5, 4]])
    split = split_links(edges, 6, val=0.0, test=0.0, directed=True, negatives=0)
    assert pair_set(split.positives["train"]) == pair_set(edges)
    merged = split_links(edges, 6, val=0.0, test=0.0, negatives=0)
    assert pair_set(merged.positives["train"]) == {(0, 1), (2, 3), (4, 5)}
    assert merged.request["duplicates_dropped"] == 3


def test_visible_labelled_edges_pass_messages_but_hidden_ones_do_not() -> None:
    edges = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]])
    labels = torch.arange(10) % 3
    hidden = split_links(edges, 10, val=0.2, test=0.2, categories=("a", "b", "c"),
                         labels=labels)
    visible = split_links(edges, 10, val=0.2, test=0.2, categories=("a", "b", "c"),
                          labels=labels, label_existence="visible")
    assert hidden.topology == "train" and visible.topology == "train+labelled"
    assert pair_set(visible.message_edge_index()) == undirected(edges) | {
        (v, u) for u, v in undirected(edges)}
    assert not pair_set(hidden.positives["val"]) & pair_set(hidden.message_edge_index())
    assert hidden.fixed_negatives["val"].shape[1] == 0 and hidden.negatives == 0
    with pytest.raises(LinkSplitError, match="two categories"):
        split_links(torch.tensor([[0, 1], [1, 0]]), 3, categories=("a", "b"),
                    labels=[0, 1])
    with pytest.raises(LinkSplitError, match="no negatives"):
        split_links(edges, 10, categories=("a", "b", "c"), labels=labels, negatives=1)


def test_a_negative_is_never_a_positive_a_duplicate_or_a_barred_self_loop() -> None:
    for directed in (False, True):
        split, _, _ = a_split(seed=2, directed=directed, negatives=3)
        positives = set().union(*(pair_set(e) for e in split.positives.values()))
        if not directed:
            positives |= {(v, u) for u, v in positives}
        fixed = [split.fixed_negatives[r] for r in ("val", "test")]
        drawn = torch.cat(fixed, dim=1)
        assert drawn.shape[1] == 3 * (split.positives["val"].shape[1] +
                                      split.positives["test"].shape[1])
        assert len(pair_set(drawn)) == drawn.shape[1]  # no duplicate
        assert not pair_set(drawn) & positives
        assert all(u != v for u, v in pair_set(drawn))
        if not directed:
            assert all(u < v for u, v in pair_set(drawn))


def test_a_request_beyond_the_complement_fails_before_sampling(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(derive, "sample_negatives", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(derive.torch, "randperm", lambda *a, **k: calls.append(a))
    # A 5-node clique missing one edge: 9 positives, 1 pair left in the complement.
    edges = torch.tensor([[u, v] for u in range(5) for v in range(u + 1, 5)][1:]).t()
    with pytest.raises(LinkCapacityError, match="holds only 1 pairs"):
        split_links(edges, 5, val=0.2, test=0.2)
    assert calls == []  # neither the permutation nor any negative was drawn
    with pytest.raises(LinkCapacityError, match="the training negatives"):
        LinkSplit(n=3, train=[[0], [1]], val=[[1], [2]], test=[[], []],
                  val_negatives=[[0], [2]])  # every pair is taken: none left for training


def test_split_links_and_replay_never_read_or_move_the_global_rng() -> None:
    edge_index, _ = graph()
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    a = split_links(edge_index, N, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(999)
    assert split_links(edge_index, N, seed=5) == a
    assert split_links(edge_index, N, seed=6) != a
    # replay re-derives with its own local generator as well (spec §26 "The manifest").
    torch.manual_seed(7)
    state = torch.random.get_rng_state()
    assert a.replay(edge_index) == a
    assert torch.equal(torch.random.get_rng_state(), state)


def test_replay_rederives_the_split_and_refuses_another_graph() -> None:
    split, edge_index, _ = a_split(seed=3)
    shuffled = edge_index[:, torch.randperm(edge_index.shape[1])].flip(0)  # order and
    assert split.replay(shuffled) == split                                  # direction free
    with pytest.raises(LinkReplayError, match="positives"):
        split.replay(edge_index[:, 1:])
    explicit = LinkSplit(n=4, train=[[0], [1]], val=[[1], [2]], test=[[2], [3]])
    with pytest.raises(LinkReplayError, match="explicitly"):
        explicit.replay(torch.tensor([[0, 1, 2], [1, 2, 3]]))


@pytest.mark.parametrize("kwargs, match", [
    ({"train": [[1], [0]]}, r"non-canonical edge \(1, 0\)"),
    ({"train": [[0, 0], [1, 1]]}, r"\(0, 1\) is repeated in the training positives"),
    ({"val": [[0], [1]]}, r"in both the training positives and the validation positives"),
    ({"test": [[2], [2]]}, r"self-loop \(2, 2\)"),
    ({"val_negatives": [[0], [1]]}, r"\(0, 1\) is in both the training positives and the "
                                    "validation negatives"),
    ({"val_negatives": [[3], [3]]}, "self-loop"),
    ({"train": [[0], [7]]}, r"outside \[0, 4\)"),
])
def test_an_explicit_split_refuses_what_breaks_the_manifest(kwargs, match) -> None:
    fields = {"n": 4, "train": [[0], [1]], "val": [[1], [2]], "test": [[2], [3]]}
    with pytest.raises(LinkSplitError, match=match):
        LinkSplit(**{**fields, **kwargs})
    assert LinkSplit(**fields, directed=True, val_negatives=[[1], [0]]).positives["train"] \
        .shape == (2, 1)  # directed: (1, 0) is another pair than (0, 1)
    LinkSplit(**{**fields, "test": [[2], [2]]}, self_loops="allowed")


def test_the_manifest_saves_loads_and_is_checked_again(tmp_path) -> None:
    split, _, _ = a_split(seed=1, directed=True)
    path = tmp_path / "split.json"
    split.save(path)
    again = LinkSplit.load(path)
    assert again == split and again.manifest() == split.manifest()
    assert torch.equal(again.message_edge_index(), split.message_edge_index())
    broken = split.manifest()
    broken["positives"]["val"] = broken["positives"]["train"]
    with pytest.raises(LinkSplitError, match="in both"):
        LinkSplit.from_manifest(broken)
    with pytest.raises(LinkSplitError, match=r"nnx\.link-split/1"):
        LinkSplit.from_manifest({**split.manifest(), "format": "nnx.link-split/2"})


def test_a_large_graph_draws_by_rejection_with_the_same_guarantees(monkeypatch) -> None:
    monkeypatch.setattr(negatives, "ENUMERATE_LIMIT", 0)  # the sparse-graph path
    split, _, _ = a_split(seed=6, negatives=2)
    again, _, _ = a_split(seed=6, negatives=2)
    assert again == split  # still a function of the seed
    drawn = torch.cat(list(split.fixed_negatives.values()), dim=1)
    positives = set().union(*(pair_set(e) for e in split.positives.values()))
    assert len(pair_set(drawn)) == drawn.shape[1] and not pair_set(drawn) & positives
    assert all(u < v for u, v in pair_set(drawn))


def test_an_edge_label_split_keeps_each_edges_category_in_declared_order() -> None:
    # Spec §26 "Edge-label splits": labels index `categories` as declared; with
    # label_existence="visible" the labelled edges pass messages, but no training batch
    # carries a validation / test edge or its category.
    edges = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]])
    labels = torch.tensor([2, 0, 1, 1, 2, 0, 0, 2, 1, 0])
    category = {(min(u, v), max(u, v)): int(c) for (u, v), c in
                zip(edges.t().tolist(), labels.tolist(), strict=True)}
    split = split_links(edges, 10, val=0.2, test=0.2, categories=("c0", "c1", "c2"),
                        labels=labels, label_existence="visible")
    assert split.manifest()["categories"] == ["c0", "c1", "c2"]
    pairs, targets, _ = split.candidates()
    listed = {tuple(e): t for e, t in zip(pairs.t().tolist(), targets.tolist(), strict=True)}
    assert listed == category  # every edge once, with its own category index
    x = torch.zeros(10, 2)
    held = {tuple(e) for r in ("val", "test") for e in split.positives[r].t().tolist()}
    for batch in LinkTask(split).loader("train", x, 4):
        assert not {tuple(e) for e in batch.edge_label_index.t().tolist()} & held
    manifest = split.manifest()
    assert (manifest["directed"], manifest["self_loops"], manifest["seed"],
            manifest["topology"]) == (False, "barred", 0, "train+labelled")

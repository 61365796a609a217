"""TeacherDataset (spec §10.1 "Alignment"): join by sample id, align by candidate id."""

from __future__ import annotations

import pytest
import torch
from _offline_tiny import CANDIDATES, DIGEST, dataset, inputs, labels, record, records

from nnx.paradigms.offline_distillation import (
    TeacherBatch,
    TeacherDataset,
    TeacherDatasetError,
    TeacherLoader,
)


def build(recs=None, ins=None, **kwargs):
    recs = records(3) if recs is None else recs
    return TeacherDataset(recs, inputs(3) if ins is None else ins,
                          candidates=kwargs.pop("candidates", CANDIDATES),
                          schema_digest=kwargs.pop("schema_digest", DIGEST), **kwargs)


def test_distributions_are_aligned_by_candidate_id_never_position():
    listed = record("s0", ("fox", "cat", "dog"), (0.2, 0.5, 0.3))
    data = build([listed, record("s1"), record("s2")])
    assert data.probabilities[0].tolist() == pytest.approx([0.5, 0.3, 0.2])
    assert data.probabilities[1].tolist() == pytest.approx([0.5, 0.3, 0.2])
    other = build([record("s0"), record("s1"), record("s2")], candidates=("dog", "fox", "cat"))
    assert other.probabilities[0].tolist() == pytest.approx([0.3, 0.2, 0.5])


def test_inputs_are_joined_by_sample_id_and_extra_inputs_are_ignored():
    ins = inputs(5)
    data = TeacherDataset([record("s3"), record("s1")], ins, candidates=CANDIDATES,
                          schema_digest=DIGEST)
    assert torch.equal(data.inputs[0], ins["s3"]) and torch.equal(data.inputs[1], ins["s1"])
    assert data.sample_ids == ("s3", "s1")


@pytest.mark.parametrize("recs, match", [
    ([record("s0", ("cat", "dog"), (0.5, 0.5))], r"missing \['fox'\]"),
    ([record("s0", ("cat", "dog", "fox", "owl"), (0.4, 0.3, 0.2, 0.1))], r"unknown \['owl'\]"),
    ([record("s0", schema_digest="schema-2")], "schema 'schema-2', not this dataset's"),
    ([record("s0"), record("s0")], "sample 's0' has more than one record"),
    ([record("s9")], r"have no input: \['s9'\]"),
    ([], "at least one record"),
])
def test_bad_records_are_refused(recs, match):
    with pytest.raises(TeacherDatasetError, match=match):
        build(recs)


def test_a_duplicate_or_empty_candidate_list_is_refused():
    with pytest.raises(TeacherDatasetError, match=r"\['cat'\] more than once"):
        build(candidates=("cat", "dog", "cat"))
    with pytest.raises(TeacherDatasetError, match="non-empty sequence"):
        build(candidates="cat")
    with pytest.raises(TeacherDatasetError, match="schema_digest"):
        build(schema_digest="")


def test_labels_map_sample_ids_to_candidate_ids_or_none():
    data = build(labels={"s0": "fox", "s1": None})
    assert data.labels.tolist() == [2, -1, -1] and data.labelling == "partial"
    assert build(labels={f"s{i}": "cat" for i in range(3)}).labelling == "all"
    assert build().labelling == "none"
    with pytest.raises(TeacherDatasetError, match="'owl', which is not a candidate"):
        build(labels={"s0": "owl"})
    with pytest.raises(TeacherDatasetError, match=r"without a record: \['s7'\]"):
        build(labels={"s7": "cat"})


def test_inputs_must_be_tensors_of_one_shape():
    ins = inputs(3)
    ins["s1"] = torch.randn(5)
    with pytest.raises(TeacherDatasetError, match="the input of 's1' is"):
        build(ins=ins)
    with pytest.raises(TeacherDatasetError, match="not a tensor"):
        build(ins={**inputs(3), "s2": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(TypeError, match="not a TeacherRecord"):
        build([record("s0").to_json()])


def test_the_loader_yields_teacher_batches_carrying_their_candidate_order():
    data = dataset(5)
    loader = data.loader(2)
    assert isinstance(loader, TeacherLoader)
    got = list(loader)
    assert [len(b) for b in got] == [2, 2, 1]
    assert all(isinstance(b, TeacherBatch) and b.candidates == CANDIDATES for b in got)
    assert got[0].sample_ids == ("s0", "s1")
    assert torch.equal(got[0].probabilities, data.probabilities[:2])
    assert got[0].labels.tolist() == [0, 1]


def test_a_shuffled_loader_is_seeded():
    data = dataset(6)
    a = [b.sample_ids for b in data.loader(2, shuffle=True, seed=3)]
    b = [b.sample_ids for b in data.loader(2, shuffle=True, seed=3)]
    assert a == b and sorted(sum(a, ())) == sorted(data.sample_ids)


def test_a_teacher_batch_is_not_an_xy_batch():
    batch = next(iter(dataset(3).loader(3)))
    with pytest.raises(TypeError, match="not an \\(X, Y\\) batch"):
        _x, _y = batch


def test_labels_helper_is_consistent():
    assert labels(4, every=False) == {"s0": "cat", "s1": None, "s2": "fox", "s3": None}

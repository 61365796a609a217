"""SplitManifest (spec §13.3): JSON nnx.split/1, digest, resolve, replay, source identity."""

from __future__ import annotations

import hashlib
import json

import pytest

from nnx.data_splits import SplitError, SplitIndices, SplitManifest, plan_split
from nnx.provenance import ExperimentManifest, declared, hash_bytes

IDS = [f"p{i}" for i in range(12)]
GROUPS = [i // 2 for i in range(12)]
SOURCE = hash_bytes(b"rows.csv contents")


def _plan(**kwargs):
    return plan_split(IDS, strategy="group", groups=GROUPS, proportions=(0.5, 0.25, 0.25),
                      seed=7, **kwargs)


def test_save_and_load_round_trip_equal_with_a_stable_digest(tmp_path):
    plan = _plan(source=SOURCE)
    path = plan.save(tmp_path / "split.json")
    loaded = SplitManifest.load(path)
    assert loaded == plan and loaded.digest() == plan.digest()
    assert SplitManifest.from_json(plan.to_json()) == plan
    assert json.loads(path.read_text())["format"] == "nnx.split/1"
    assert plan.digest() == hashlib.sha256(plan.canonical_bytes()).hexdigest()
    assert [p.name for p in tmp_path.iterdir()] == ["split.json"]  # no temp left behind
    # The digest covers the seed, the parameters and the source.
    assert _plan().digest() != plan.digest()
    other_seed = plan_split(IDS, strategy="group", groups=GROUPS,
                            proportions=(0.5, 0.25, 0.25), seed=8, source=SOURCE)
    assert other_seed.digest() != plan.digest()


def test_the_seeded_order_is_sha256_of_the_seed_and_the_id():
    from nnx.data_splits._ids import order_digest, seeded_order

    assert order_digest(7, "p1") == hashlib.sha256(b'[7,"p1"]').hexdigest()
    ranked = sorted(IDS, key=lambda i: hashlib.sha256(f'[7,"{i}"]'.encode()).hexdigest())
    assert seeded_order(IDS, 7) == ranked


def test_resolve_returns_positions_in_the_sources_row_order():
    plan = _plan()
    reordered = list(reversed(IDS))
    indices = plan.resolve(reordered)
    assert isinstance(indices, SplitIndices)
    assert {reordered[i] for i in indices.train} == set(plan.train)
    assert {reordered[i] for i in indices.val} == set(plan.val)
    assert {reordered[i] for i in indices.test} == set(plan.test)
    # SplitIndices feed torch.utils.data.Subset for any map-style dataset.
    from torch.utils.data import Subset

    assert list(Subset(reordered, indices.val)) == [reordered[i] for i in indices.val]


@pytest.mark.parametrize("ids, match", [
    ([*IDS, "p0"], "repeats the id"),
    (IDS[:-1], "missing from the source"),
    ([*IDS, "p99"], "not in the plan"),
    (list(range(12)), "ints"),
])
def test_resolve_refuses_duplicate_missing_unexpected_and_mistyped_ids(ids, match):
    with pytest.raises(SplitError, match=match):
        _plan().resolve(ids)


def test_a_recorded_source_identity_must_come_back_unchanged():
    plan = _plan(source=SOURCE)
    assert plan.source == SOURCE
    plan.resolve(IDS, source_identity=SOURCE)
    with pytest.raises(SplitError, match="source changed"):
        plan.resolve(IDS, source_identity=hash_bytes(b"edited rows"))
    with pytest.raises(SplitError, match="pass the same identity"):
        plan.resolve(IDS)
    with pytest.raises(SplitError, match="records no source identity"):
        _plan().resolve(IDS, source_identity=SOURCE)
    declared_plan = _plan(source="rows-v1")
    assert declared_plan.source == declared("rows-v1")
    declared_plan.resolve(IDS, source_identity="rows-v1")


def test_a_positional_plan_needs_and_checks_a_source_identity():
    with pytest.raises(SplitError, match="needs a source"):
        plan_split(strategy="group", groups=GROUPS, proportions=(0.5, 0.25, 0.25), seed=7)
    plan = plan_split(strategy="group", groups=GROUPS, proportions=(0.5, 0.25, 0.25), seed=7,
                      source=SOURCE)
    assert plan.id_kind == "position"
    indices = plan.resolve(12, source_identity=SOURCE)
    assert sorted((*indices.train, *indices.val, *indices.test)) == list(range(12))
    with pytest.raises(SplitError, match="covers 12 rows"):
        plan.resolve(11, source_identity=SOURCE)
    with pytest.raises(SplitError, match="source changed"):
        plan.resolve(12, source_identity="other")
    # A positional-only manifest (no identity) raises on replay.
    document = {**plan.document(), "source": None}
    with pytest.raises(SplitError, match="positional plan records no source"):
        SplitManifest(document).resolve(12)


def test_replay_re_plans_into_the_same_manifest_and_refuses_changed_values():
    plan = _plan(source=SOURCE)
    order = [3, 0, 11, 5, 1, 9, 2, 8, 10, 4, 7, 6]
    again = plan.replay([IDS[i] for i in order], source_identity=SOURCE,
                        groups=[GROUPS[i] for i in order])
    assert again == plan and again.digest() == plan.digest()
    regrouped = [*GROUPS[:-1], 0]  # p11 joins group 0: the plan no longer follows
    with pytest.raises(SplitError, match="no longer give"):
        plan.replay(IDS, source_identity=SOURCE, groups=regrouped)


def test_a_chronological_replay_allows_absent_gap_rows():
    times = [1, 2, 3, 3, 4, 5, 5, 6]
    plan = plan_split([f"t{i}" for i in range(8)], strategy="chronological", times=times,
                      cutoffs=(3, 5), gap=1)
    kept = [i for i in range(8) if f"t{i}" not in plan.excluded]
    assert plan.replay([f"t{i}" for i in kept], times=[times[i] for i in kept]) is plan
    indices = plan.resolve([f"t{i}" for i in range(8)])
    assert 1 not in (*indices.train, *indices.val, *indices.test)


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["splits"].update(train=[]), "train split is empty"),
    (lambda d: d["splits"].update(val=[*d["splits"]["val"], d["splits"]["train"][0]]),
     "must be sorted|more than one split"),
    (lambda d: d.update(format="nnx.split/2"), "format"),
    (lambda d: d.update(strategy="random"), "strategy"),
    (lambda d: d.update(extra=1), "exactly the fields"),
    (lambda d: d["splits"].update(test=[5]), "not all strs"),
    (lambda d: d.update(seed=-1), "seed"),
])
def test_an_edited_manifest_is_refused_on_load(tmp_path, edit, match):
    document = _plan().document()
    edit(document)
    path = tmp_path / "split.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SplitError, match=match):
        SplitManifest.load(path)


def test_a_damaged_file_is_a_split_error(tmp_path):
    (tmp_path / "split.json").write_text('{"format": NaN')
    with pytest.raises(SplitError):
        SplitManifest.load(tmp_path / "split.json")


def test_an_explicit_manifest_with_an_empty_train_is_refused_on_replay():
    plan = plan_split(["a", "b"], strategy="explicit", members={"train": ["a"], "val": ["b"]})
    assert plan.replay(["b", "a"]) is plan
    document = plan.document()
    document["splits"] = {"train": [], "val": ["a", "b"], "test": []}
    with pytest.raises(SplitError, match="train split is empty"):
        SplitManifest(document)


def test_the_manifest_is_immutable_and_pickles():
    import pickle

    plan = _plan()
    with pytest.raises(AttributeError):
        plan._bytes = b""  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(plan)) == plan


def test_experiment_manifest_records_the_split_digest_as_verified(tmp_path):
    plan = _plan(source=SOURCE)
    manifest = ExperimentManifest(splits={"main": plan})
    ref = manifest.splits["main"]
    assert dict(ref) == {"identity": "digest", "value": plan.digest()}
    plan.save(tmp_path / "split.json")
    reloaded = SplitManifest.load(tmp_path / "split.json").replay(
        IDS, source_identity=SOURCE, groups=GROUPS)
    assert ExperimentManifest(splits={"main": reloaded}) == manifest

"""Provenance (spec §4.4): fingerprints, identities, attempts, reading and comparing."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
import shutil
from datetime import datetime

import pytest

from nnx import NNModel, NNModelParams, NNOptimParams, NNParams, NNRun, NNTrainParams, TaskSpec
from nnx.provenance import (
    Attempt,
    AttemptRecord,
    Comparison,
    ExperimentManifest,
    IdentityRef,
    RunProvenance,
    begin_attempt,
    compare,
    declared,
    hash_bytes,
    hash_file,
    read_provenance,
)

SPLIT_A = "a" * 64
SPLIT_B = "b" * 64


class SplitPlan:
    """Stands in for a SplitManifest: anything with digest() -> hex."""

    def __init__(self, digest: str) -> None:
        self._digest = digest

    def digest(self) -> str:
        return self._digest


class Fitted:
    """Stands in for a fitted Standardizer: state() and digest()."""

    def state(self) -> dict:
        return {"format": "nnx.preprocessing/1", "mean": [0.5, 1.0], "scale": [2.0, 1.0]}

    def digest(self) -> str:
        return "c" * 64


def small(**changes) -> ExperimentManifest:
    fields = dict(task={"kind": "categorical", "num_outputs": 3}, labels=["a", "b", "c"],
                  data={"train": "train-v1"}, objective={"id": "supervised", "version": 1},
                  config={"lr": 0.01, "epochs_hint": 1})
    fields.update(changes)
    return ExperimentManifest(**fields)


# -- the fingerprint ------------------------------------------------------------------

GOLDEN_BYTES = (
    b'{"config":{"epochs_hint":1,"lr":0.01},'
    b'"data":{"train":{"identity":"declared","value":"train-v1"}},'
    b'"format":"nnx.provenance/1","labels":["a","b","c"],'
    b'"objective":{"id":"supervised","version":1},'
    b'"task":{"kind":"categorical","num_outputs":3}}'
)
GOLDEN_SHA = "f12601c6bf89e55238a5c2e0a9275e349e51916f15c0fe5fdb93d7356e5c2111"


def test_fingerprint_is_the_sha256_of_canonical_bytes_stable_across_key_order_and_process():
    plan = small()
    assert plan.canonical_bytes() == GOLDEN_BYTES
    assert plan.fingerprint == GOLDEN_SHA == hashlib.sha256(GOLDEN_BYTES).hexdigest()
    reordered = ExperimentManifest(
        config={"epochs_hint": 1, "lr": 0.01}, objective={"version": 1, "id": "supervised"},
        data={"train": declared("train-v1")}, labels=("a", "b", "c"),
        task={"num_outputs": 3, "kind": "categorical"})
    assert reordered == plan and hash(reordered) == hash(plan)
    assert reordered.fingerprint == GOLDEN_SHA


@pytest.mark.parametrize("change", [
    {"task": {"kind": "categorical", "num_outputs": 4}},
    {"labels": ["b", "a", "c"]},
    {"objective": {"id": "supervised", "version": 2}},
    {"splits": {"main": SplitPlan(SPLIT_B)}},
    {"config": {"lr": 0.01, "epochs_hint": 1.0}},
])
def test_fingerprint_changes_with_task_labels_objective_split_digest_and_number_type(change):
    base = small(splits={"main": SplitPlan(SPLIT_A)})
    changed = small(**{"splits": {"main": SplitPlan(SPLIT_A)}, **change})
    assert changed.fingerprint != base.fingerprint
    assert changed != base


def test_one_and_one_point_zero_differ_everywhere():
    one, one_f = small(config={"lr": 1}), small(config={"lr": 1.0})
    assert one.fingerprint != one_f.fingerprint
    assert compare(one, one_f).fields["config.lr"] == "different"


@pytest.mark.parametrize("bad, what", [
    (float("nan"), "non-finite"), (float("inf"), "non-finite"), ({1, 2}, "set"),
    (b"raw", "bytes"), (lambda: 1, "function"), (object(), "object"),
])
def test_unserializable_values_are_refused_by_path(bad, what):
    with pytest.raises(ValueError, match=rf"^data\.train: .*{what}"):
        ExperimentManifest(data={"train": bad})
    with pytest.raises(ValueError, match=rf"^config\.optim\.groups\[1\]: .*{what}"):
        ExperimentManifest(config={"optim": {"groups": [1, bad]}})


def test_other_refusals_name_their_field():
    with pytest.raises(ValueError, match=r"^labels: must be a list"):
        ExperimentManifest(labels="abc")
    with pytest.raises(ValueError, match=r"^splits: must be a mapping"):
        ExperimentManifest(splits=["x"])
    with pytest.raises(ValueError, match=r"^splits\.main: .*hex"):
        ExperimentManifest(splits={"main": SplitPlan("not-hex")})
    with pytest.raises(ValueError, match=r"^data\.train: .*digest"):
        ExperimentManifest(data={"train": {"identity": "digest", "value": "zz"}})


def test_manifest_is_an_immutable_copy_and_round_trips_through_json():
    config = {"optim": {"lr": 0.1, "betas": [0.9, 0.99]}}
    plan = ExperimentManifest(config=config, data={"train": hash_bytes(b"rows"), "test": None})
    config["optim"]["lr"] = 5.0
    assert plan.config["optim"]["lr"] == 0.1
    with pytest.raises(TypeError):
        plan.config["optim"]["lr"] = 1.0  # type: ignore[index]
    assert plan.config["optim"]["betas"] == (0.9, 0.99)
    with pytest.raises(AttributeError):
        plan.config = {}  # type: ignore[misc]
    assert plan.data["test"] == {"identity": "unknown", "value": None}
    again = ExperimentManifest.from_json(plan.to_json())
    assert again == plan and again.fingerprint == plan.fingerprint
    assert json.loads(plan.to_json())["format"] == "nnx.provenance/1"
    assert pickle.loads(pickle.dumps(plan)) == plan == copy.deepcopy(plan)
    with pytest.raises(ValueError, match="format"):
        ExperimentManifest.from_json('{"format": "nnx.provenance/0"}')


# -- for_model --------------------------------------------------------------------------

def model(task: TaskSpec | None = None) -> NNModel:
    return NNModel(net_params=NNParams(input_dim=5, output_dim=3, hidden_dims=(8,)),
                   params=NNModelParams(task=task))


def test_for_model_records_the_plan_without_the_attempt_fields():
    net = model(TaskSpec.categorical(3))
    plan = NNTrainParams(n_epochs=4, seed=0,
                         optim=NNOptimParams.builder().adam(max_lr=1e-2).build())
    first = ExperimentManifest.for_model(net, train=plan, labels=["x", "y", "z"])
    assert first.task == TaskSpec.categorical(3).state()
    assert "task" not in first.model["params"]
    assert first.model["net"]["input_dim"] == 5
    assert "n_epochs" not in first.config and first.config["seed"] == 0
    resumed = NNTrainParams(n_epochs=9, seed=0, resume_epochs="planned",
                            parent_run_id="f" * 32, parent_checkpoint="last",
                            optim=NNOptimParams.builder().adam(max_lr=1e-2).build())
    assert ExperimentManifest.for_model(net, train=resumed, labels=["x", "y", "z"]) == first
    other_lr = NNTrainParams(n_epochs=4, seed=0,
                             optim=NNOptimParams.builder().adam(max_lr=2e-2).build())
    assert ExperimentManifest.for_model(net, train=other_lr, labels=["x", "y", "z"]) != first
    untasked = ExperimentManifest.for_model(model(), train=plan, labels=["x", "y", "z"])
    assert untasked.task is None and untasked.fingerprint != first.fingerprint


def test_for_model_records_split_digests_and_fitted_preprocessing():
    plan = ExperimentManifest.for_model(model(), splits={"main": SplitPlan(SPLIT_A.upper())},
                                        preprocessing=Fitted(),
                                        objective={"id": "supervised", "version": 1})
    assert plan.splits["main"] == {"identity": "digest", "value": SPLIT_A}
    assert plan.preprocessing["state"]["mean"] == (0.5, 1.0)
    assert plan.preprocessing["digest"] == {"identity": "digest", "value": "c" * 64}
    assert plan.config is None


# -- identity references ----------------------------------------------------------------

def test_hash_file_equals_hashlib_over_many_chunks(tmp_path):
    data = bytes(range(256)) * 9000  # > 2 MiB: several read chunks
    path = tmp_path / "rows.csv"
    path.write_bytes(data)
    ref = hash_file(path)
    assert ref == IdentityRef("digest", hashlib.sha256(data).hexdigest())
    assert ref.verified and hash_bytes(data) == ref and hash_file(str(path)) == ref
    assert IdentityRef.from_json(ref.to_json()) == ref
    name = declared("val-2024-06")
    assert name.state() == {"identity": "declared", "value": "val-2024-06"} and not name.verified
    assert IdentityRef.unknown().state() == {"identity": "unknown", "value": None}
    with pytest.raises(ValueError):
        IdentityRef("guessed", "x")
    with pytest.raises(ValueError):
        declared("")


# -- attempts ---------------------------------------------------------------------------

def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_attempt_runs_commits_and_completes(tmp_path):
    plan = small()
    attempt = begin_attempt(tmp_path / "run", plan)
    assert isinstance(attempt, Attempt) and attempt.status == "running"
    on_disk = read(tmp_path / "run" / "attempt.json")
    assert on_disk["attempt_id"] == attempt.attempt_id and len(attempt.attempt_id) == 32
    assert on_disk["fingerprint"] == plan.fingerprint and on_disk["status"] == "running"
    assert datetime.fromisoformat(on_disk["started_at"]).utcoffset().total_seconds() == 0
    stored = read(tmp_path / "run" / "provenance.json")
    assert stored == {"fingerprint": plan.fingerprint, "manifest": plan.document()}
    attempt.committed("last", 0, 1)
    attempt.committed("last", 1, 2)
    attempt.finish("completed")
    found = read_provenance(tmp_path / "run")
    assert isinstance(found, RunProvenance) and found.manifest == plan
    assert found.fingerprint == plan.fingerprint
    record = found.attempt
    assert isinstance(record, AttemptRecord) and record == attempt.record
    assert (record.status, record.last_tag, record.last_epoch, record.last_generation) == (
        "completed", "last", 1, 2)
    assert record.error_type is None and record.finished_at is not None
    with pytest.raises(RuntimeError, match="completed"):
        attempt.committed("last", 2, 3)
    with pytest.raises(RuntimeError):
        attempt.finish("failed")


@pytest.mark.parametrize("status, error, kind, message", [
    ("failed", ValueError("loss is nan"), "ValueError", "loss is nan"),
    ("cancelled", KeyboardInterrupt(), "KeyboardInterrupt", ""),
])
def test_failed_and_cancelled_attempts_record_the_error(tmp_path, status, error, kind, message):
    attempt = begin_attempt(tmp_path, small())
    attempt.finish(status, error)
    record = read_provenance(tmp_path).attempt
    assert (record.status, record.error_type, record.error_message) == (status, kind, message)
    assert record.last_tag is None


def test_a_failure_to_record_a_failed_attempt_is_a_warning(tmp_path):
    attempt = begin_attempt(tmp_path / "run", small())
    shutil.rmtree(tmp_path / "run")  # nowhere to write attempt.json any more
    with pytest.warns(RuntimeWarning, match="could not record attempt"):
        record = attempt.finish("failed", RuntimeError("cuda"), suppress_errors=True)
    assert record.status == "failed" and record.error_type == "RuntimeError"
    other = begin_attempt(tmp_path / "other", small())
    shutil.rmtree(tmp_path / "other")
    with pytest.raises(OSError):
        other.finish("failed", RuntimeError("cuda"))
    with pytest.raises(ValueError, match="status"):
        begin_attempt(tmp_path / "third", small()).finish("crashed")


def test_a_resumed_attempt_links_its_parent_and_leaves_it_untouched(tmp_path):
    plan = small()
    parent = begin_attempt(tmp_path / "parent", plan)
    parent.committed("last", 1, 2)
    parent.finish("cancelled", KeyboardInterrupt())
    before = {p.name: p.read_bytes() for p in (tmp_path / "parent").iterdir()}
    link = {"run_id": "parent", "attempt_id": parent.attempt_id, "checkpoint": "last",
            "generation": 2}
    child = begin_attempt(tmp_path / "child", plan, parent=link)
    child.finish("completed")
    assert {p.name: p.read_bytes() for p in (tmp_path / "parent").iterdir()} == before
    record = read_provenance(tmp_path / "child").attempt
    assert record.parent == link and record.attempt_id != parent.attempt_id
    assert record.fingerprint == parent.fingerprint


def test_provenance_json_is_never_rewritten(tmp_path):
    first = begin_attempt(tmp_path, small())
    target = tmp_path / "provenance.json"
    stat, text = target.stat(), target.read_bytes()
    second = begin_attempt(tmp_path, small())  # a retry of the same plan: a fresh attempt
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    assert second.attempt_id != first.attempt_id
    assert read_provenance(tmp_path).attempt.attempt_id == second.attempt_id
    with pytest.raises(ValueError, match="another experiment"):
        begin_attempt(tmp_path, small(labels=["c", "b", "a"]))
    assert target.read_bytes() == text


def test_tampered_or_unreadable_provenance_is_ignored_with_a_warning(tmp_path):
    assert read_provenance(tmp_path / "nothing") is None
    begin_attempt(tmp_path, small()).finish("completed")
    target = tmp_path / "provenance.json"
    doc = read(target)
    doc["manifest"]["labels"] = ["c", "b", "a"]  # the recorded fingerprint no longer matches
    target.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="does not match"):
        assert read_provenance(tmp_path) is None
    with pytest.raises(ValueError, match="cannot be verified"):
        begin_attempt(tmp_path, small())
    target.write_text("{not json", encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="ignoring"):
        assert read_provenance(tmp_path) is None


def test_a_tampered_attempt_record_is_ignored_but_the_manifest_kept(tmp_path):
    begin_attempt(tmp_path, small()).finish("completed")
    record = read(tmp_path / "attempt.json")
    record["fingerprint"] = "0" * 64
    (tmp_path / "attempt.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="attempt.json"):
        found = read_provenance(tmp_path)
    assert found.manifest == small() and found.attempt is None


# -- comparing --------------------------------------------------------------------------

def test_compare_reports_every_status_by_path():
    left = ExperimentManifest(
        labels=["a", "b"], objective={"id": "sup", "version": 1},
        data={"train": hash_bytes(b"rows"), "val": "val-v1", "test": None},
        splits={"main": SplitPlan(SPLIT_A)}, config={"optim": {"max_lr": 0.1}, "seed": 0})
    right = ExperimentManifest(
        labels=["a", "c"], objective={"id": "sup", "version": 1},
        data={"train": hash_bytes(b"rows"), "val": "val-v1", "test": "test-v1"},
        splits={"main": SplitPlan(SPLIT_B)}, config={"optim": {"max_lr": 0.2}},
        task={"kind": "regression"})
    result = compare(left, right)
    assert isinstance(result, Comparison)
    assert dict(result.fields) == {
        "config.optim.max_lr": "different", "config.seed": "missing",
        "data.test": "unknown", "data.train": "verified", "data.val": "declared",
        "labels[0]": "equal", "labels[1]": "different",
        "objective.id": "equal", "objective.version": "equal",
        "splits.main": "different", "task": "missing",
    }
    assert result.differences == ("config.optim.max_lr", "config.seed", "data.test",
                                  "labels[1]", "splits.main", "task")
    assert not result.verified_equal
    assert result.fingerprints == (left.fingerprint, right.fingerprint)


def test_verified_equal_needs_every_field_equal_or_verified():
    verified = dict(data={"train": hash_bytes(b"rows")}, splits={"main": SplitPlan(SPLIT_A)},
                    config={"lr": 0.1})
    same = compare(ExperimentManifest(**verified), ExperimentManifest(**verified))
    assert same.verified_equal and same.differences == ()
    named = compare(small(), small())
    assert named.fields["data.train"] == "declared"
    assert not named.verified_equal and named.differences == ()


def test_compare_reads_runs_by_path_run_and_id(tmp_path, monkeypatch):
    run = NNRun(model_params=NNModelParams(), train_params=NNTrainParams(n_epochs=2),
                net_params=NNParams(input_dim=5, output_dim=3), root=tmp_path / "runs")
    plan = small()
    begin_attempt(run.path, plan).finish("completed")
    bare = tmp_path / "runs" / "bare"
    bare.mkdir()
    assert compare(run, plan).verified_equal is False  # declared data: equal, unverified
    assert compare(run, plan).differences == ()
    assert compare(run.path, str(run.path)).fields == compare(plan, plan).fields
    assert compare(run.id, plan, root=tmp_path / "runs").fields["data.train"] == "declared"
    monkeypatch.chdir(tmp_path)
    assert compare(run.id, plan).fields["labels[2]"] == "equal"
    absent = compare(run.id, "bare")
    assert dict(absent.fields) == {"$": "absent"} and absent.differences == ("$",)
    assert not absent.verified_equal and absent.fingerprints == (plan.fingerprint, None)
    assert dict(compare(bare, bare).fields) == {"$": "absent"}
    with pytest.raises(TypeError):
        compare(3, plan)

"""Named metrics (spec §6.4): specs, the registry, built-ins against scikit-learn."""

from __future__ import annotations

import warnings
from types import MappingProxyType

import numpy as np
import pytest
import torch
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    log_loss,
    mean_absolute_error,
    mean_squared_error,
)
from torch import nn

from nnx._foundation.hashing import md5_hex
from nnx._foundation.plugins import versioned_registry
from nnx.metrics import (
    MetricRegistration,
    MetricSpec,
    MissingMetricError,
    check_metric_inputs,
    metric_modes,
    register_metric,
    resolve_metric,
)
from nnx.tasks import TaskSpec, task_adapter

RNG = np.random.default_rng(0)
NAN = float("nan")


def sk(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def feed(spec: MetricSpec, *batches: tuple[object, object]) -> float:
    acc = resolve_metric(spec).factory(spec.config)
    for target, prediction in batches:
        acc.update(target, prediction)
    return acc.result()


# -- MetricSpec -------------------------------------------------------------------------------

def test_spec_defaults_label_and_minimal_state() -> None:
    spec = MetricSpec("nll")
    assert (spec.id, spec.version, dict(spec.config), spec.name) == ("nll", 1, {}, None)
    assert spec.label == "nll"
    assert spec.state() == {"id": "nll", "version": 1}
    named = MetricSpec("accuracy", name="acc")
    assert named.label == "acc"
    assert named.state() == {"id": "accuracy", "version": 1, "name": "acc"}


def test_spec_takes_the_spec_signature_positionally_with_the_same_state() -> None:
    # §6.4: MetricSpec(id, version=1, config={}, name=None), positional or keyword.
    positional = MetricSpec("f1", 1, {"average": "macro"}, "macro_f1")
    keyword = MetricSpec("f1", version=1, config={"average": "macro"}, name="macro_f1")
    assert positional == keyword
    assert positional.state() == keyword.state() == {
        "id": "f1", "version": 1, "config": {"average": "macro"}, "name": "macro_f1"}
    assert md5_hex(positional.state()) == md5_hex(keyword.state())
    assert MetricSpec("nll", 2).state() == {"id": "nll", "version": 2}


def test_spec_round_trips_and_config_is_read_only_plain_data() -> None:
    spec = MetricSpec("acme.topk", version=2,
                      config={"k": np.int64(3), "weights": [1, 2.5], "inner": {"a": [True]}})
    assert spec.config["k"] == 3 and type(spec.config["k"]) is int
    assert spec.config["weights"] == (1, 2.5)
    assert isinstance(spec.config, MappingProxyType)
    assert isinstance(spec.config["inner"], MappingProxyType)
    with pytest.raises(TypeError):
        spec.config["k"] = 4  # type: ignore[index]
    state = spec.state()
    assert state == {"id": "acme.topk", "version": 2,
                     "config": {"inner": {"a": [True]}, "k": 3, "weights": [1, 2.5]}}
    again = MetricSpec.from_state(state)
    assert again == spec and again.state() == state
    assert hash(again) == hash(spec)
    assert md5_hex(again.state()) == md5_hex(state)


def test_spec_refuses_code_in_config() -> None:
    with pytest.raises(ValueError, match=r"not JSON-like configuration data.*never holds code"):
        MetricSpec("nll", config={"fn": lambda x: x})


def test_spec_refuses_non_finite_config_numbers() -> None:
    with pytest.raises(ValueError, match=r"MetricSpec.config.x: non-finite number"):
        MetricSpec("nll", config={"x": float("nan")})


def test_spec_refuses_a_non_mapping_config() -> None:
    with pytest.raises(ValueError, match=r"MetricSpec.config must be a mapping"):
        MetricSpec("nll", config=[("a", 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, 1.0, True, "1"])
def test_spec_refuses_a_bad_version(bad: object) -> None:
    with pytest.raises(ValueError, match=r"MetricSpec.version must be an integer >= 1"):
        MetricSpec("nll", version=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "nll@v1", " nll", None, 3])
def test_spec_refuses_a_bad_id(bad: object) -> None:
    with pytest.raises(ValueError, match=r"MetricSpec.id must be a"):
        MetricSpec(bad)  # type: ignore[arg-type]


def test_spec_refuses_a_bad_name() -> None:
    with pytest.raises(ValueError, match=r"MetricSpec.name must be a non-empty string or None"):
        MetricSpec("nll", name="")


def test_spec_from_state_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match=r"unknown field"):
        MetricSpec.from_state({"id": "nll", "factory": "x"})


# -- the registry -----------------------------------------------------------------------------

class Counter:
    def __init__(self, config):
        self.n = 0
        self.scale = config.get("scale", 1)

    def update(self, target, prediction) -> None:
        self.n += len(target)

    def result(self) -> float:
        return float(self.n * self.scale)


def test_register_and_resolve_a_custom_metric() -> None:
    registration = register_metric("test.count", 3, Counter, input="labels", mode="max")
    assert resolve_metric(MetricSpec("test.count", version=3)) is registration
    assert feed(MetricSpec("test.count", version=3, config={"scale": 2}),
                ([1, 2], [1, 2]), ([3], [3])) == 6.0
    assert metric_modes([MetricSpec("test.count", version=3, name="n"),
                         MetricSpec("nll")]) == {"n": "max", "nll": "min"}


def test_check_config_runs_when_a_spec_is_resolved() -> None:
    def check(config):
        if "scale" not in config:
            raise ValueError("test.scaled needs a scale")

    register_metric("test.scaled", 1, Counter, input="labels", mode="max", check_config=check)
    with pytest.raises(ValueError, match=r"test.scaled needs a scale"):
        resolve_metric(MetricSpec("test.scaled"))


def test_unregistered_version_names_the_registered_ones() -> None:
    register_metric("test.versions", 1, Counter, input="labels", mode="max")
    register_metric("test.versions", 4, Counter, input="labels", mode="max")
    with pytest.raises(MissingMetricError, match=r"test.versions@v2 is not registered.*"
                                                 r"registered versions of 'test.versions': "
                                                 r"v1, v4"):
        resolve_metric(MetricSpec("test.versions", version=2))


def test_unregistered_id_fails_without_running_metric_code() -> None:
    with pytest.raises(MissingMetricError, match=r"no version of 'test.nothing' is registered"):
        check_metric_inputs([MetricSpec("test.nothing")],
                            task_adapter(TaskSpec.regression(1), nn.MSELoss()))


def test_an_entry_that_is_not_a_registration_is_refused() -> None:
    versioned_registry("nnx.metrics").register("test.raw", 1, Counter)
    with pytest.raises(MissingMetricError, match=r"not a MetricRegistration"):
        resolve_metric(MetricSpec("test.raw"))


@pytest.mark.parametrize(("kw", "message"), [
    ({"input": "logits", "mode": "max"}, "register_metric input must be one of"),
    ({"input": "labels", "mode": "up"}, "register_metric mode must be one of"),
])
def test_register_refuses_unknown_input_or_mode(kw, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        register_metric("test.bad", 1, Counter, **kw)


def test_register_refuses_a_non_callable_factory() -> None:
    with pytest.raises(ValueError, match=r"a metric factory must be callable"):
        MetricRegistration(factory=3, input="labels", mode="max")  # type: ignore[arg-type]


def test_register_refuses_a_bad_id() -> None:
    with pytest.raises(ValueError, match=r"a registered id must be a non-empty string"):
        register_metric("a@b", 1, Counter, input="labels", mode="max")


# -- built-ins against scikit-learn -----------------------------------------------------------

def test_accuracy_and_macro_f1_match_sklearn_over_uneven_batches() -> None:
    t, p = RNG.integers(0, 4, 50), RNG.integers(0, 4, 50)
    batches = [(t[:3], p[:3]), (t[3:41], p[3:41]), (t[41:], p[41:])]
    assert feed(MetricSpec("accuracy"), *batches) == pytest.approx(accuracy_score(t, p))
    assert feed(MetricSpec("f1"), *batches) == pytest.approx(sk(f1_score, t, p, average="macro"))


def test_binary_f1_is_the_pooled_positive_f1() -> None:
    t, p = RNG.integers(0, 2, (20, 3)), RNG.integers(0, 2, (20, 3))
    spec = MetricSpec("f1", config={"average": "binary"})
    got = feed(spec, (t[:5].ravel(), p[:5].ravel()), (t[5:].ravel(), p[5:].ravel()))
    assert got == pytest.approx(f1_score(t.ravel(), p.ravel(), average="binary"))


def test_categorical_nll_and_brier_match_sklearn_and_numpy() -> None:
    probs = RNG.dirichlet(np.ones(3), 40)
    t = RNG.integers(0, 3, 40)
    nll = feed(MetricSpec("nll"), (t[:7], probs[:7]), (t[7:], probs[7:]))
    assert nll == pytest.approx(log_loss(t, probs, labels=[0, 1, 2]))
    brier = feed(MetricSpec("brier"), (t[:7], probs[:7]), (t[7:], probs[7:]))
    assert brier == pytest.approx(float(((probs - np.eye(3)[t]) ** 2).sum(1).mean()))


def test_bernoulli_nll_and_brier_match_sklearn_and_numpy() -> None:
    probs, t = RNG.uniform(0.01, 0.99, 60), RNG.integers(0, 2, 60)
    nll = feed(MetricSpec("nll"), (t[:10], probs[:10]), (t[10:], probs[10:]))
    assert nll == pytest.approx(log_loss(t, probs))
    brier = feed(MetricSpec("brier"), (t, probs))
    assert brier == pytest.approx(float(((probs - t) ** 2).mean()))


def test_mse_and_mae_match_sklearn() -> None:
    t, p = RNG.normal(size=30), RNG.normal(size=30)
    assert feed(MetricSpec("mse"), (t[:4], p[:4]), (t[4:], p[4:])) == pytest.approx(
        mean_squared_error(t, p))
    assert feed(MetricSpec("mae"), (t[:4], p[:4]), (t[4:], p[4:])) == pytest.approx(
        mean_absolute_error(t, p))


def test_declared_metrics_through_a_categorical_adapter_match_sklearn() -> None:
    gen = torch.Generator().manual_seed(3)
    out = torch.randn(33, 3, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (33,), generator=gen)
    y[[2, 20]] = -100
    adapter = task_adapter(TaskSpec.categorical(3, ignore_index=-100), nn.CrossEntropyLoss())
    acc = adapter.accumulator(metrics=[MetricSpec("nll"), MetricSpec("brier"),
                                       MetricSpec("accuracy", name="acc"), MetricSpec("f1")])
    for s in (slice(0, 5), slice(5, 33)):
        acc.update(out[s], y[s])
    metrics = acc.result().metrics
    keep = (y != -100).numpy()
    probs = torch.softmax(out, 1).numpy()[keep]
    t, p = y.numpy()[keep], out.argmax(1).numpy()[keep]
    assert metrics["nll"] == pytest.approx(log_loss(t, probs, labels=[0, 1, 2]))
    assert metrics["brier"] == pytest.approx(float(((probs - np.eye(3)[t]) ** 2).sum(1).mean()))
    assert metrics["acc"] == pytest.approx(accuracy_score(t, p))
    assert metrics["f1"] == pytest.approx(sk(f1_score, t, p, average="macro"))


def test_declared_metrics_through_a_multilabel_adapter_pool_every_valid_output() -> None:
    gen = torch.Generator().manual_seed(4)
    out = torch.randn(25, 4, generator=gen, dtype=torch.float64)
    y = (torch.rand(25, 4, generator=gen) > 0.5).double()
    y[0, 0] = y[7, 3] = NAN
    adapter = task_adapter(TaskSpec.multilabel(4, threshold=0.6), nn.BCEWithLogitsLoss())
    acc = adapter.accumulator(metrics=[MetricSpec("nll"), MetricSpec("brier"),
                                       MetricSpec("accuracy"),
                                       MetricSpec("f1", config={"average": "binary"})])
    acc.update(out[:9], y[:9])
    acc.update(out[9:], y[9:])
    edp = acc.result()
    valid = ~torch.isnan(y)
    t = y[valid].numpy().astype(int)
    probs = torch.sigmoid(out)[valid].numpy()
    p = (probs >= 0.6).astype(int)
    assert edp.metrics["nll"] == pytest.approx(log_loss(t, probs))
    assert edp.metrics["brier"] == pytest.approx(float(((probs - t) ** 2).mean()))
    assert edp.metrics["accuracy"] == pytest.approx(accuracy_score(t, p))
    assert edp.metrics["accuracy"] == pytest.approx(edp.metrics["element_accuracy"])
    assert edp.metrics["f1"] == pytest.approx(f1_score(t, p, average="binary"))


def test_continuous_metrics_through_the_default_regression_loss() -> None:
    out, y = torch.randn(8, 1, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    adapter = task_adapter(None, nn.MSELoss())
    acc = adapter.accumulator(metrics=[MetricSpec("mae")])
    acc.update(out, y)
    edp = acc.result()
    assert edp.metrics["mae"] == pytest.approx(mean_absolute_error(y.numpy(), out.numpy()[:, 0]))
    assert edp.kind is None


# -- refusals before any batch is read --------------------------------------------------------

REG = task_adapter(TaskSpec.regression(1), nn.MSELoss())
CAT = task_adapter(TaskSpec.categorical(3), nn.CrossEntropyLoss())
ML = task_adapter(TaskSpec.multilabel(3), nn.BCEWithLogitsLoss())


def test_probabilities_need_a_categorical_or_multilabel_model() -> None:
    with pytest.raises(ValueError, match=r"metric 'brier' \(brier@v1\) needs probabilities "
                                         r"inputs, which need a categorical .*this model is a "
                                         r"regression task of width 1 trained with MSELoss"):
        check_metric_inputs([MetricSpec("brier")], REG)


def test_probabilities_need_a_probabilistic_loss() -> None:
    class Custom(nn.Module):
        def forward(self, output, target):
            return output.sum()

    with pytest.raises(ValueError, match=r"needs probabilities inputs"):
        check_metric_inputs([MetricSpec("nll")], task_adapter(TaskSpec.categorical(3), Custom()))


def test_continuous_inputs_need_a_regression_loss_or_task() -> None:
    with pytest.raises(ValueError, match=r"needs continuous inputs, which need a regression "
                                         "loss"):
        check_metric_inputs([MetricSpec("mse")], CAT)
    with pytest.raises(ValueError, match=r"needs continuous inputs"):
        check_metric_inputs([MetricSpec("mae")], task_adapter(None, nn.KLDivLoss()))


def test_labels_need_a_classification_model() -> None:
    with pytest.raises(ValueError, match=r"needs labels inputs, which need a classification"):
        check_metric_inputs([MetricSpec("accuracy")], REG)


def test_multilabel_f1_needs_binary_averaging() -> None:
    with pytest.raises(ValueError, match=r"needs config=\{'average': 'binary'\}.*per-label "
                                         r"averaging is not available"):
        check_metric_inputs([MetricSpec("f1")], ML)
    check_metric_inputs([MetricSpec("f1", config={"average": "binary"})], ML)


@pytest.mark.parametrize("average", ["weighted", "micro", "samples", None])
def test_f1_refuses_per_label_and_weighted_averaging(average: object) -> None:
    with pytest.raises(ValueError, match=r"Per-label and weighted averaging are not available"):
        resolve_metric(MetricSpec("f1", config={"average": average}))


def test_binary_f1_needs_two_classes() -> None:
    with pytest.raises(ValueError, match=r"average='binary' needs two classes; this model has 3"):
        check_metric_inputs([MetricSpec("f1", config={"average": "binary"})], CAT)


def test_f1_refuses_unknown_config_keys() -> None:
    with pytest.raises(ValueError, match=r"config takes only 'average'; got key\(s\) \['beta'\]"):
        resolve_metric(MetricSpec("f1", config={"beta": 2}))


def test_config_free_metrics_refuse_a_config() -> None:
    with pytest.raises(ValueError, match=r"metric 'accuracy' takes no config"):
        resolve_metric(MetricSpec("accuracy", config={"normalize": False}))


def test_duplicate_reported_names_are_refused() -> None:
    with pytest.raises(ValueError, match=r"two declared metrics are reported as 'nll'"):
        check_metric_inputs([MetricSpec("nll"), MetricSpec("brier", name="nll")], CAT)


@pytest.mark.parametrize("name", ["loss", "error"])
def test_reserved_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match=f"cannot be reported as '{name}'"):
        check_metric_inputs([MetricSpec("nll", name=name)], CAT)


def test_a_non_spec_is_refused() -> None:
    with pytest.raises(ValueError, match=r"a declared metric must be a MetricSpec"):
        check_metric_inputs(["nll"], CAT)  # type: ignore[list-item]


def test_update_refuses_mismatched_sizes() -> None:
    with pytest.raises(ValueError, match=r"as many targets as predictions; got 2 and 3"):
        feed(MetricSpec("mse"), ([1.0, 2.0], [1.0, 2.0, 3.0]))


def test_spec_pickles_and_deep_copies() -> None:
    import copy
    import pickle

    spec = MetricSpec("f1", config={"average": "binary"}, name="f1_pos")
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert copy.deepcopy(spec) == spec

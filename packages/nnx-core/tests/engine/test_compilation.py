"""Opt-in compilation (spec §28): scope refusals before any run is reserved, the
canonical module kept canonical, the eager paths, the failure policy, the recompile
limit and where the CompileRecord lives. Backends "eager" / "aot_eager" and test
backends registered here keep every test fast; one inductor fit is marked slow."""

from __future__ import annotations

import json

import pytest
import torch
import torch._dynamo
import yaml
from _nnx_core_tiny import tiny_batches, tiny_loader, tiny_model, tiny_train_params
from functorch.compile import make_boxed_func
from torch import nn
from torch._dynamo.backends.common import aot_autograd

from nnx import Callback, NNCheckpoint, NNModel, NNModelParams, NNRun, Precision
from nnx._engine.compilation import CompileSession
from nnx.compilation import (
    CompileFailed,
    CompileRecord,
    CompileRestart,
    CompileScopeError,
    CompileSpec,
)
from nnx.distributed import DDP
from nnx.enums import Devices
from nnx.provenance import ExperimentManifest, declared

EAGER = CompileSpec(backend="eager")


# -- test backends: a compile that always fails, a backward compile that fails ---------
def _boom(gm, example_inputs):
    raise RuntimeError("forced compile failure")


_BW_CALLS = {"n": 0, "fail_from": 10**9}


def _fw(gm, example_inputs):
    return make_boxed_func(gm.forward)


def _bw(gm, example_inputs):
    _BW_CALLS["n"] += 1
    if _BW_CALLS["n"] >= _BW_CALLS["fail_from"]:
        raise RuntimeError("forced backward compile failure")
    return make_boxed_func(gm.forward)


torch._dynamo.register_backend(name="nnx_test_boom", compiler_fn=_boom)
torch._dynamo.register_backend(name="nnx_test_bwfail",
                               compiler_fn=aot_autograd(fw_compiler=_fw, bw_compiler=_bw))


def run_dirs(root):
    """The run directories under ``root`` (its lease directory is no run)."""
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".")) if root.exists() else []


def run_ids(root):
    """The runs under ``root`` (runs/best and the leases are no run)."""
    return [name for name in run_dirs(root)
            if name != "best" and (root / name / "run.yaml").is_file()]


def breaking(model, flag=None):
    """A pre-hook whose graph break no fullgraph compile can take (eager: a no-op);
    with ``flag``, only while ``flag["on"]``."""
    def hook(module, args):
        if flag is None or flag["on"]:
            torch._dynamo.graph_break()
    model.net.register_forward_pre_hook(hook)
    return model


class Switch(Callback):
    """Turns ``flag["on"]`` on at the end of epoch 0 (after its commit is decided)."""

    def __init__(self, flag):
        self.flag = flag

    def on_epoch_end(self, ctx):
        self.flag["on"] = True


# -- CompileSpec and CompileRecord ----------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    ({"backend": ""}, "backend"), ({"backend": None}, "backend"),
    ({"mode": "fastest"}, "mode"), ({"fullgraph": 1}, "fullgraph"),
    ({"dynamic": "yes"}, "dynamic"), ({"on_failure": "ignore"}, "on_failure"),
])
def test_compile_spec_refuses_bad_fields(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CompileSpec(**kwargs)


def test_compile_record_round_trips_its_state():
    record = CompileRecord.pending(CompileSpec(backend="eager", fullgraph=True), "2.9")
    eager = CompileRecord(**{**record.__dict__, "effect": "eager",
                             "restart": CompileRestart("train", 1, 2, "Unsupported: x")})
    for r in (record, eager):
        assert CompileRecord.from_state(yaml.safe_load(yaml.safe_dump(r.state()))) == r
    assert record.request["fullgraph"] is True and record.effect == "pending"
    with pytest.raises(ValueError, match="restart"):
        CompileRecord(**{**record.__dict__, "effect": "eager"})


# -- scope: refused before a run is reserved ------------------------------------------
class Transforming(Callback):
    checkpoint_transforms = ("qat",)


def _runtime_model():
    torch.manual_seed(0)
    return NNModel(module=nn.Linear(4, 3), params=NNModelParams(device=Devices.CPU))


@pytest.mark.parametrize("case", ["runtime_module", "train_step_fn", "objective",
                                  "reduced_precision", "topology_callback", "ddp"])
def test_out_of_scope_fits_are_refused_before_a_run_is_reserved(tmp_path, case):
    from nnx import default_train_step, supervised_objective

    model = _runtime_model() if case == "runtime_module" else tiny_model()
    if case == "reduced_precision":
        model = NNModel(net_params=model.net_params, params=NNModelParams(
            net=model.params.net, device=Devices.CPU, precision=Precision.BF16))
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    def own_step(ctx):
        return default_train_step(ctx)
    kwargs = {"train_step_fn": {"train_step_fn": own_step},
              "objective": {"objective": supervised_objective()},
              "topology_callback": {"callbacks": [Transforming()]},
              "ddp": {"distributed": DDP()}}.get(case, {})
    with pytest.raises(CompileScopeError, match="compile="):
        model.train(tiny_train_params(), compile=EAGER, verbose=False, root=tmp_path,
                    **kwargs)
    assert run_dirs(tmp_path) == []
    assert all(torch.equal(v, model.net.state_dict()[k]) for k, v in before.items())
    assert model._fit_forward is None


@pytest.mark.parametrize("compilable", [False, True])
def test_an_add_on_net_compiles_only_when_its_registration_says_so(tmp_path, compilable):
    """§28 covers the built-in non-graph nets, add-ons' included (nnx-lm's TRANSFORMER):
    a Nets member's NetRegistration declares it, so core imports no add-on to decide;
    one that does not (a graph net) is refused before a run is reserved."""
    from nnx import NNParams
    from nnx._foundation.plugins import registry
    from nnx.enums import Nets
    from nnx.extend import NetRegistration
    from nnx.nets.feedforward import FeedFwdNN

    name = f"TEST_COMPILE_{int(compilable)}"
    nets = registry("nnx.nets")
    nets.register(name, NetRegistration(build=FeedFwdNN, params_class=NNParams,
                                        compilable=compilable))
    try:
        torch.manual_seed(0)
        model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(6,)),
                        params=NNModelParams(net=getattr(Nets, name), device=Devices.CPU))
        if compilable:
            run = model.train(tiny_train_params(), compile=EAGER, verbose=False, root=tmp_path)
            assert run.compile.effect == "compiled"
        else:
            with pytest.raises(CompileScopeError, match=f"this model's net is .*{name}"):
                model.train(tiny_train_params(), compile=EAGER, verbose=False, root=tmp_path)
            assert run_dirs(tmp_path) == []
    finally:
        nets.unregister(name)
        Nets._members.pop(name, None)  # the member cache: a fresh process has none


def test_compile_takes_a_compile_spec(tmp_path):
    with pytest.raises(TypeError, match="CompileSpec"):
        tiny_model().train(tiny_train_params(), compile={"backend": "eager"}, verbose=False,
                           root=tmp_path)
    assert run_dirs(tmp_path) == []


# -- the canonical module stays canonical ---------------------------------------------
def test_a_compiled_fit_keeps_the_net_and_its_checkpoints_canonical(tmp_path):
    model = tiny_model()
    net = model.net
    run = model.train(tiny_train_params(n_epochs=2), compile=EAGER, verbose=False,
                      root=tmp_path)
    assert model.net is net and type(net).__name__ == "FeedFwdNN"
    assert model._fit_forward is None  # the wrapper was dropped with the fit
    for tag in ("last", "best"):
        ckpt = NNCheckpoint.load(run.id, tag, root=tmp_path)
        assert not any(k.startswith("_orig_mod.") for k in ckpt.state_dict)
        eager = tiny_model(seed=1)
        eager.net.load_state_dict(ckpt.state_dict, strict=True)
        assert NNModel.from_checkpoint(ckpt).net.state_dict().keys() == net.state_dict().keys()
    names = NNCheckpoint.load_training_state(run.id, root=tmp_path)["param_names"]
    assert names == [[n for n, _ in net.named_parameters()]]


def test_the_eager_backend_trains_exactly_like_eager(tmp_path):
    eager = tiny_model()
    eager.train(tiny_train_params(n_epochs=2), verbose=False, root=tmp_path / "a")
    compiled = tiny_model()
    compiled.train(tiny_train_params(n_epochs=2), compile=EAGER, verbose=False,
                   root=tmp_path / "b")
    for k, v in eager.net.state_dict().items():
        assert torch.equal(v, compiled.net.state_dict()[k]), k


def test_the_record_is_never_in_the_run_id(tmp_path):
    plain = tiny_model().train(tiny_train_params(), verbose=False, root=tmp_path / "a")
    compiled = tiny_model().train(tiny_train_params(), compile=EAGER, verbose=False,
                                  root=tmp_path / "b")
    assert plain.id == compiled.id
    assert "compile" not in (tmp_path / "b" / compiled.id / "run.yaml").read_text()


def test_a_resume_builds_a_fresh_wrapper(tmp_path):
    first_model = tiny_model()
    first = first_model.train(tiny_train_params(n_epochs=1), compile=EAGER, verbose=False,
                              root=tmp_path)
    straight = tiny_model()
    straight.train(tiny_train_params(n_epochs=2), verbose=False, root=tmp_path / "s")
    resumed_model = tiny_model(seed=5)
    resumed = resumed_model.train(
        tiny_train_params(n_epochs=1, resume_from_run_id=first.id, resume_mode="stateful"),
        compile=EAGER, verbose=False, root=tmp_path)
    assert resumed.compile.effect == "compiled" and resumed_model._fit_forward is None
    for k, v in straight.net.state_dict().items():
        assert torch.equal(v, resumed_model.net.state_dict()[k]), k


# -- eager paths and the wrapper during the fit -----------------------------------------
class PredictsDuringFit(Callback):
    def __init__(self, seen):
        self.seen = seen

    def on_epoch_end(self, ctx):
        self.seen.append("callback")
        ctx.model.predict(torch.zeros(2, 4))


def test_validation_and_callback_predicts_go_through_the_wrapper_later_ones_are_eager(
        tmp_path):
    model = tiny_model(hidden=9)
    seen: list[object] = []

    def hook(module, args):  # traced into the graph: True only when compiled
        seen.append(("train" if module.training else "eval",
                     torch.compiler.is_compiling()))
    model.net.register_forward_pre_hook(hook)
    model.train(tiny_train_params(val_loader=tiny_loader(seed=1)), compile=EAGER,
                callbacks=[PredictsDuringFit(seen)], verbose=False, root=tmp_path)
    during = seen[:seen.index("callback")]
    assert ("train", True) in during and ("eval", True) in during
    assert all(compiled for _, compiled in during)
    assert seen[seen.index("callback") + 1:] == [("eval", True)]
    seen.clear()
    model.predict(torch.zeros(2, 4))
    model.evaluate(tiny_loader())
    assert seen and all(not compiled for _, compiled in seen)


# -- the failure policy ---------------------------------------------------------------
def test_on_failure_eager_finishes_a_run_whose_forward_cannot_compile(tmp_path):
    reference = tiny_model(dropout=0.3)
    reference.train(tiny_train_params(n_epochs=2), verbose=False, root=tmp_path / "a")
    model = breaking(tiny_model(dropout=0.3))
    run = model.train(tiny_train_params(n_epochs=2), verbose=False, root=tmp_path / "b",
                      compile=CompileSpec(backend="eager", fullgraph=True,
                                          on_failure="eager"))
    record = run.compile
    assert record.effect == "eager" and record.fullgraph is True
    assert record.restart.phase == "train" and record.restart.epoch == 0
    assert record.restart.batch == 0 and "graph_break" in record.restart.error
    assert len(run.epoch_records()) == 2
    # The re-run started from the RNG state the failed call found: dropout draws equal.
    for k, v in reference.net.state_dict().items():
        assert torch.equal(v, model.net.state_dict()[k]), k


def test_on_failure_error_raises_compile_failed_and_reserves_nothing(tmp_path):
    model = tiny_model()
    with pytest.raises(CompileFailed, match="failed to compile") as caught:
        model.train(tiny_train_params(), compile=CompileSpec(backend="nnx_test_boom"),
                    verbose=False, root=tmp_path)
    assert caught.value.record.effect == "failed" and caught.value.record.stage == "forward"
    assert run_dirs(tmp_path) == [] and model._fit_forward is None


def test_a_failure_after_the_last_commit_shows_only_in_attempt_json(tmp_path):
    flag = {"on": False}
    model = breaking(tiny_model(hidden=7), flag)
    params = tiny_train_params(n_epochs=2)
    plan = ExperimentManifest.for_model(model, train=params, data={"train": declared("t")})
    with pytest.raises(CompileFailed):
        model.train(params, compile=CompileSpec(backend="eager", fullgraph=True),
                    callbacks=[Switch(flag)], provenance=plan, verbose=False, root=tmp_path)
    (run_id,) = run_ids(tmp_path)
    attempt = json.loads((tmp_path / run_id / "attempt.json").read_text())
    assert attempt["status"] == "failed" and attempt["compile"]["effect"] == "failed"
    assert attempt["compile"]["stage"] == "forward"
    assert NNRun.load(run_id, root=tmp_path).compile.effect == "compiled"
    assert NNCheckpoint.load_training_state(run_id, root=tmp_path)["compile"][
        "effect"] == "compiled"


class _Stateful(nn.Module):
    """Draws from the RNG and updates a buffer in a first graph, then breaks."""

    def __init__(self, shape_bug=False):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))
        self.shape_bug = shape_bug

    def forward(self, x):
        self.calls.add_(1)
        y = torch.nn.functional.dropout(self.lin(x), 0.5, training=True)
        torch._dynamo.graph_break()
        return y.reshape(3, -1) if self.shape_bug else y * 2


def _session(net, on_failure, backend="eager"):
    session = CompileSession(CompileSpec(backend=backend, on_failure=on_failure), net,
                             torch.device("cpu"))

    class Holder:
        _fit_forward = None
    return session, Holder()


@pytest.mark.parametrize("on_failure", ["error", "eager"])
def test_the_eager_re_run_starts_from_the_rng_and_buffers_of_the_failed_call(on_failure):
    torch.manual_seed(0)
    net, x = _Stateful(), torch.randn(2, 4)
    session, holder = _session(net, on_failure, backend="nnx_test_boom")
    rng, calls = torch.get_rng_state(), net.calls.clone()
    expected_net = _Stateful()
    expected_net.load_state_dict(net.state_dict())
    torch.set_rng_state(rng)
    expected = expected_net(x)
    torch.set_rng_state(rng)
    with session.active(holder):
        if on_failure == "error":
            with pytest.raises(CompileFailed):
                session(x)
            assert torch.equal(torch.get_rng_state(), rng) and torch.equal(net.calls, calls)
        else:
            assert torch.equal(session(x), expected)
            assert session.record.effect == "eager" and net.calls.item() == calls.item() + 1
    assert holder._fit_forward is None


@pytest.mark.parametrize("on_failure", ["error", "eager"])
def test_an_error_the_eager_re_run_hits_too_propagates_unchanged(on_failure):
    torch.manual_seed(0)
    net, x = _Stateful(shape_bug=True), torch.randn(2, 4)
    session, holder = _session(net, on_failure)
    rng, calls = torch.get_rng_state(), net.calls.clone()
    with session.active(holder), pytest.raises(RuntimeError, match="invalid for input") as c:
        session(x)
    assert not isinstance(c.value, CompileFailed)
    assert type(c.value) is RuntimeError  # eager's own error, not dynamo's wrapper of it
    assert torch.equal(torch.get_rng_state(), rng) and torch.equal(net.calls, calls)
    assert session.record.effect in ("pending", "compiled")


class Shrinking:
    """Batches of 4 rows in epoch 0 and of 3 after: with dynamic=False, epoch 1 compiles
    a new graph, and so a new backward."""

    def __init__(self):
        self.epoch, self.batches = -1, [tiny_batches(2, size=4), tiny_batches(2, size=3)]

    def __len__(self):
        return 2

    def __iter__(self):
        self.epoch += 1
        return iter(self.batches[min(self.epoch, 1)])


def test_a_failed_backward_compile_is_recorded_and_propagates(tmp_path):
    model = tiny_model(hidden=6)
    params = tiny_train_params(Shrinking(), n_epochs=2)
    plan = ExperimentManifest.for_model(model, train=params, data={"train": declared("t")})
    _BW_CALLS["n"], _BW_CALLS["fail_from"] = 0, 2
    try:
        with pytest.raises(RuntimeError, match="forced backward") as caught:
            model.train(params, compile=CompileSpec(backend="nnx_test_bwfail", dynamic=False),
                        provenance=plan, verbose=False, root=tmp_path)
    finally:
        _BW_CALLS["fail_from"] = 10**9
    assert not isinstance(caught.value, CompileFailed)
    (run_id,) = run_ids(tmp_path)
    record = json.loads((tmp_path / run_id / "attempt.json").read_text())["compile"]
    assert record["effect"] == "failed" and record["stage"] == "backward"


_BOOM = {"on": False}


class _BoomSGD(torch.optim.SGD):
    def step(self, closure=None):  # type: ignore[override]
        if _BOOM["on"]:
            raise RuntimeError("optimizer boom")
        return super().step(closure)


class _RecompileThenBoom(Callback):
    """Epoch 1 compiles a new graph (the cache is reset) and its first step fails."""

    def on_epoch_begin(self, ctx):
        if ctx.epoch == 1:
            torch._dynamo.reset()
            _BOOM["on"] = True


def test_an_optimizer_step_error_after_the_backward_is_not_the_backwards(tmp_path, monkeypatch):
    """§28: only the first backward after a new graph is recorded failed (stage backward);
    an error once that backward returned (clipping, the optimizer step) propagates as
    itself and leaves the record as it was."""
    from nnx import NNOptimFactoryParams, OptimizerFactorySpec, register_optimizer_factory
    from nnx._foundation.plugins import versioned_registry

    names = versioned_registry("nnx.optimizer_factories")._names
    monkeypatch.setattr(names, "_explicit", dict(names._explicit))
    register_optimizer_factory("test.boom", 1, lambda groups, config: _BoomSGD(groups, lr=0.1))
    model = tiny_model(hidden=7)
    params = tiny_train_params(n_epochs=2, optim=NNOptimFactoryParams(
        factory=OptimizerFactorySpec("test.boom", 1, {}), max_lr=0.1))
    plan = ExperimentManifest.for_model(model, train=params, data={"train": declared("t")})
    _BOOM["on"] = False
    try:
        with pytest.raises(RuntimeError, match="optimizer boom"):
            model.train(params, compile=CompileSpec(backend="eager", dynamic=False),
                        callbacks=[_RecompileThenBoom()], provenance=plan, verbose=False,
                        root=tmp_path)
    finally:
        _BOOM["on"] = False
    (run_id,) = run_ids(tmp_path)
    record = json.loads((tmp_path / run_id / "attempt.json").read_text())["compile"]
    assert record["effect"] == "compiled" and record["stage"] is None


# -- the recompile limit --------------------------------------------------------------
def test_a_sweep_of_compiled_fits_in_one_process_keeps_working(tmp_path):
    spec = CompileSpec(backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1):
        for i, hidden in enumerate((21, 22, 23, 24)):
            run = tiny_model(hidden=hidden).train(tiny_train_params(), compile=spec,
                                                  verbose=False, root=tmp_path / str(i))
            assert run.compile.effect == "compiled"
        assert torch._dynamo.config.recompile_limit == 1  # restored after each fit


def test_a_limit_the_users_own_compile_hit_earlier_does_not_make_the_fit_eager(tmp_path):
    # The user's torch.compile of another FeedFwdNN hits dynamo's limit outside any fit:
    # dynamo marks the class's forward "cached graphs only". The fit still compiles (its
    # failing backend is called, so CompileFailed), never a silent eager run.
    outside = torch.compile(tiny_model(hidden=33).net, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1), torch.no_grad():
        for n in (5, 6, 7):
            outside(torch.randn(n, 4))
    with pytest.raises(CompileFailed, match="failed to compile"):
        tiny_model(hidden=34).train(tiny_train_params(), verbose=False, root=tmp_path,
                                    compile=CompileSpec(backend="nnx_test_boom"))


def test_hitting_the_recompile_limit_is_a_failure_never_a_silent_fallback(tmp_path):
    sizes = [torch.randn(n, 4) for n in (4, 3, 2)]
    batches = [(x, torch.zeros(len(x), dtype=torch.long)) for x in sizes]
    with torch._dynamo.config.patch(recompile_limit=1):
        with pytest.raises(CompileFailed, match="FailOnRecompileLimitHit"):
            tiny_model(hidden=31).train(
                tiny_train_params(batches), verbose=False, root=tmp_path / "a",
                compile=CompileSpec(backend="eager", dynamic=False))
        run = tiny_model(hidden=32).train(
            tiny_train_params(batches), verbose=False, root=tmp_path / "b",
            compile=CompileSpec(backend="eager", dynamic=False, on_failure="eager"))
    assert run.compile.effect == "eager"
    assert "FailOnRecompileLimitHit" in run.compile.restart.error


# -- graph breaks ---------------------------------------------------------------------
def test_graph_breaks_are_counted_when_the_first_call_compiles(tmp_path):
    spec = CompileSpec(backend="eager", dynamic=False)
    first = breaking(tiny_model(hidden=17)).train(tiny_train_params(), compile=spec,
                                                  verbose=False, root=tmp_path / "a")
    assert first.compile.capture == "partial" and first.compile.graph_breaks >= 1
    clean = tiny_model(hidden=18).train(tiny_train_params(), compile=spec, verbose=False,
                                        root=tmp_path / "b")
    assert clean.compile.capture == "full" and clean.compile.graph_breaks == 0
    # The same class and shapes again: dynamo serves the graph, the capture is unknown.
    again = tiny_model(hidden=18).train(tiny_train_params(), compile=spec, verbose=False,
                                        root=tmp_path / "c")
    assert again.compile.effect == "compiled" and again.compile.capture is None
    assert again.compile.graph_breaks is None


# -- where the record lives -------------------------------------------------------------
def test_the_record_is_in_metadata_checkpoints_attempt_and_survives_reload(tmp_path):
    model = tiny_model()
    params = tiny_train_params(n_epochs=2)
    plan = ExperimentManifest.for_model(model, train=params, data={"train": declared("t")})
    run = model.train(params, compile=CompileSpec(backend="aot_eager"), provenance=plan,
                      verbose=False, root=tmp_path)
    record = run.compile
    assert record.backend == "aot_eager" and record.effect == "compiled"
    assert record.torch_version == str(torch.__version__)
    meta = yaml.safe_load((run.path / "metadata.yaml").read_text())
    assert CompileRecord.from_state(meta["compile"]) == record
    assert NNRun.load(run.id, root=tmp_path).compile == record
    for tag in ("last", "best"):
        state = NNCheckpoint.load_training_state(run.id, tag, root=tmp_path)
        assert CompileRecord.from_state(state["compile"]) == record
    attempt = json.loads((run.path / "attempt.json").read_text())
    assert CompileRecord.from_state(attempt["compile"]) == record
    assert run.provenance.attempt.compile["effect"] == "compiled"


def test_runs_without_compile_carry_no_record_and_still_load(tmp_path):
    model = tiny_model()
    params = tiny_train_params()
    plan = ExperimentManifest.for_model(model, train=params, data={"train": declared("t")})
    run = model.train(params, provenance=plan, verbose=False, root=tmp_path)
    assert run.compile is None and NNRun.load(run.id, root=tmp_path).compile is None
    assert "compile" not in NNCheckpoint.load_training_state(run.id, root=tmp_path)
    assert "compile" not in json.loads((run.path / "attempt.json").read_text())
    assert run.provenance.attempt.compile is None


@pytest.mark.slow
def test_an_inductor_fit_compiles_and_keeps_the_canonical_keys(tmp_path):
    model = tiny_model(hidden=5)
    run = model.train(tiny_train_params(), compile=CompileSpec(), verbose=False,
                      root=tmp_path)
    assert run.compile.backend == "inductor" and run.compile.effect == "compiled"
    ckpt = NNCheckpoint.load(run.id, root=tmp_path)
    tiny_model(hidden=5).net.load_state_dict(ckpt.state_dict, strict=True)

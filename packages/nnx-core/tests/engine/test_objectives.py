"""Objectives and the shared update engine (spec §6.5): exact numbers, windows, precision,
non-finite policies, events, hooks and the refusals of a second update owner."""

from __future__ import annotations

import copy
import functools
import warnings
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.objectives import FP32, Linear1, engine_on, feed
from torch import nn

from nnx import (
    Callback,
    LossTerm,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNSchedulerParams,
    NNTrainParams,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    Precision,
    default_train_step,
    kd_objective,
    supervised_objective,
)
from nnx._engine.precision import ResolvedPrecision
from nnx._engine.update_engine import OptimizerSlot, UpdateEngine


def test_a_term_switching_between_summed_and_normalized_in_a_window_fails():
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, _, _ = engine_on(w, Linear1(), accumulate=2)
    engine.microbatch((8.0, 2.0), epoch=0, batch_idx=0, closes=False)
    with pytest.raises(ValueError, match="switched from 'mean' to 'sum'"):
        engine.microbatch((1.0, None), epoch=0, batch_idx=1, closes=True)


def test_a_window_whose_every_term_is_masked_takes_no_update():
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, events, counter = engine_on(w, Linear1(), accumulate=2)
    feed(engine, [(0.0, 0.0), (0.0, 0.0)])
    assert w.item() == 1.0 and events == [] and counter.committed_updates == 0


class Exploding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise AssertionError("a term of weight 0 was back-propagated")


class TwoTerms(Objective):
    def __call__(self, ctx):
        w = ctx.model.w
        return ObjectiveResult([LossTerm("a", 2.0 * w, 1.0),
                                LossTerm("zero", Exploding.apply(w) * 5.0, 1.0, weight=0.0)])


@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_term_of_weight_zero_is_never_back_propagated(accumulate):
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, events, _ = engine_on(w, TwoTerms(), accumulate=accumulate)
    feed(engine, [None] * accumulate)
    assert w.item() == pytest.approx(-1.0)
    assert events[0].terms["zero"] == 5.0  # still reported


class PerTermWindows(Objective):
    """Two normalized terms with different denominators per microbatch."""

    def __call__(self, ctx):
        w = ctx.model.w
        a_num, a_den, b_num, b_den = ctx.batch
        return ObjectiveResult([LossTerm("a", a_num * w, a_den),
                                LossTerm("b", b_num * w * w, b_den, weight=0.5)])


def test_each_term_is_normalized_by_its_own_summed_denominator():
    w = torch.nn.Parameter(torch.tensor(2.0))
    engine, events, _ = engine_on(w, PerTermWindows(), accumulate=2)
    feed(engine, [(3.0, 1.0, 4.0, 2.0), (5.0, 3.0, 2.0, 1.0)])
    # d/dw at w=2: a = (3 + 5) / (1 + 3) = 2; b = 0.5 · (4 + 2) · 2w / (2 + 1) = 4
    assert w.item() == pytest.approx(2.0 - 6.0)
    assert events[0].terms == {"a": (3.0 + 5.0) * 2.0 / 4.0, "b": (4.0 + 2.0) * 4.0 / 3.0}


# -- the engine against plain full-batch autograd ---------------------------------------
def student_teacher():
    torch.manual_seed(1)
    teacher = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    student = tiny_model(seed=2)
    return student, teacher


def kd_full_batch_grads(student, teacher, x, y, alpha, t):
    net = copy.deepcopy(student.net)
    s = net(x)
    with torch.no_grad():
        q = F.softmax(teacher(x) / t, dim=-1)
    kl = F.kl_div(F.log_softmax(s / t, dim=-1), q, reduction="batchmean") * t * t
    loss = alpha * kl + (1 - alpha) * F.cross_entropy(s, y)
    loss.backward()
    return {n: p.grad.clone() for n, p in net.named_parameters()}


@pytest.mark.parametrize("sizes", [(5, 2, 1), (4, 4), (1, 3, 4)])
def test_kd_objective_equals_the_full_batch_loss_however_the_rows_are_split(sizes):
    student, teacher = student_teacher()
    x, y = torch.cat([b[0] for b in tiny_batches(2)]), torch.cat([b[1] for b in tiny_batches(2)])
    expected = kd_full_batch_grads(student, teacher, x, y, 0.3, 2.5)
    params = list(student.net.parameters())
    before = {n: p.detach().clone() for n, p in student.net.named_parameters()}
    slot = OptimizerSlot(None, torch.optim.SGD(params, lr=1.0), sgd(1.0))
    engine = UpdateEngine(model=student, objective=kd_objective(teacher, 0.3, 2.5), slots=[slot],
                          precision=FP32, scaler=None, accumulate=len(sizes),
                          counter=SimpleNamespace(committed_updates=0),
                          on_commit=lambda e, s: None)
    start = 0
    for i, n in enumerate(sizes):
        engine.microbatch((x[start:start + n], y[start:start + n]), epoch=0, batch_idx=i,
                          closes=i == len(sizes) - 1)
        start += n
    for name, p in student.net.named_parameters():
        torch.testing.assert_close(before[name] - p.detach(), expected[name], atol=1e-6,
                                   rtol=1e-5)


def test_kd_objective_at_alpha_zero_returns_only_the_supervised_term():
    student, teacher = student_teacher()
    objective = kd_objective(teacher, 0.0, 3.0)
    batch = tiny_batches(1)[0]
    ctx = ObjectiveContext(model=student, batch=batch, batch_idx=0, epoch=0, precision=FP32)
    assert [t.name for t in objective(ctx).terms] == ["supervised"]
    assert all(not p.requires_grad for p in teacher.parameters()) and not teacher.training


def test_kd_teacher_runs_in_its_own_precision_not_the_students():
    seen = []

    class Teacher(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            seen.append(torch.is_autocast_enabled("cpu"))
            return self.lin(x)

    student = NNModel(net_params=tiny_model().net_params,
                      params=NNModelParams(precision=Precision.BF16))
    objective = kd_objective(Teacher(), 0.5, 2.0)
    ctx = ObjectiveContext(model=student, batch=tiny_batches(1)[0], batch_idx=0, epoch=0,
                           precision=ResolvedPrecision(Precision.BF16, "cpu"))
    with ctx.precision.autocast():
        result = objective(ctx)
    assert seen == [False]
    assert result.terms[0].numerator.dtype == torch.float32


def test_an_objective_with_accumulation_over_uneven_microbatches_equals_one_full_batch(tmp_path):
    batches = tiny_batches(2)
    x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    uneven = [(x[:5], y[:5]), (x[5:7], y[5:7]), (x[7:], y[7:])]
    a, b, c = tiny_model(), tiny_model(), tiny_model()
    a.train(NNTrainParams(n_epochs=3, train_loader=uneven, optim=sgd(0.2, accumulate=3)),
            objective=supervised_objective(), root=tmp_path / "a", verbose=False)
    b.train(NNTrainParams(n_epochs=3, train_loader=[(x, y)], optim=sgd(0.2)),
            objective=supervised_objective(), root=tmp_path / "b", verbose=False)
    c.train(NNTrainParams(n_epochs=3, train_loader=[(x, y)], optim=sgd(0.2)),
            root=tmp_path / "c", verbose=False)
    for (name, pa), pb, pc in zip(a.net.named_parameters(), b.net.parameters(),
                                  c.net.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=1e-5, msg=name)
        torch.testing.assert_close(pb, pc, atol=1e-6, rtol=1e-5, msg=name)


# -- non-finite policies ------------------------------------------------------------
class Poisoned(Objective):
    """The supervised loss, NaN on batch ``bad`` of epoch 0."""

    def __init__(self, bad: int, policy: str) -> None:
        self.bad, self.inner = bad, supervised_objective()
        self.nonfinite = policy  # type: ignore[misc]

    def __call__(self, ctx):
        result = self.inner(ctx)
        if ctx.epoch == 0 and ctx.batch_idx == self.bad:
            term = result.terms[0]
            poisoned = LossTerm(term.name, term.numerator * float("nan"), term.denominator)
            return ObjectiveResult([poisoned], output=result.output, target=result.target)
        return result


def test_nonfinite_skip_drops_the_poisoned_window_and_the_run_continues(tmp_path):
    batches = tiny_batches(4)
    model = tiny_model()
    counts = []

    class Count(Callback):
        def on_epoch_end(self, ctx):
            counts.append(ctx.update_count)

    with pytest.warns(RuntimeWarning, match="update window is skipped"):
        run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, optim=sgd()),
                          objective=Poisoned(1, "skip"), callbacks=[Count()], root=tmp_path,
                          verbose=False)
    assert counts == [3, 7]  # epoch 0 lost one of its four updates
    assert len(run.epoch_records()) == 2
    # The dropped window is replaced by nothing: epoch 0 trained as if batch 1 never was.
    skipped, reference = tiny_model(), tiny_model()
    with pytest.warns(RuntimeWarning, match="update window is skipped"):
        skipped.train(NNTrainParams(n_epochs=1, train_loader=batches, optim=sgd()),
                      objective=Poisoned(1, "skip"), root=tmp_path / "s", verbose=False)
    kept = [b for i, b in enumerate(batches) if i != 1]
    reference.train(NNTrainParams(n_epochs=1, train_loader=kept, optim=sgd()),
                    objective=supervised_objective(), root=tmp_path / "r", verbose=False)
    for a, b in zip(skipped.net.parameters(), reference.net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_nonfinite_fail_raises_before_anything_is_stepped(tmp_path):
    model = tiny_model()
    before = copy.deepcopy(model.net.state_dict())
    with pytest.raises(FloatingPointError, match="non-finite loss term 'supervised'"):
        model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd()),
                    objective=Poisoned(0, "fail"), root=tmp_path, verbose=False)
    for k, v in model.net.state_dict().items():
        assert torch.equal(v, before[k])


def test_an_unknown_nonfinite_policy_is_refused():
    class Bad(Linear1):
        nonfinite = "ignore"

    with pytest.raises(ValueError, match=r"objective\.nonfinite"):
        engine_on(torch.nn.Parameter(torch.tensor(1.0)), Bad(), accumulate=1)


# -- FP16: the all-or-nothing window --------------------------------------------------
class Overflowing(Objective):
    def __init__(self):
        self.big = True

    def __call__(self, ctx):
        a, b = ctx.model.a, ctx.model.b
        k = 1e38 if self.big else 1.0
        return ObjectiveResult([LossTerm("t", a * k + b, 1.0)])


def test_fp16_overflow_in_one_optimizer_steps_none_of_them():
    a = torch.nn.Parameter(torch.tensor(1.0))
    b = torch.nn.Parameter(torch.tensor(1.0))
    slots = [OptimizerSlot("A", torch.optim.SGD([a], lr=1.0), sgd(1.0)),
             OptimizerSlot("B", torch.optim.SGD([b], lr=1.0), sgd(1.0))]
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    objective = Overflowing()
    events: list = []
    engine = UpdateEngine(model=SimpleNamespace(a=a, b=b), objective=objective, slots=slots,
                          precision=ResolvedPrecision(Precision.FP16, "cpu"), scaler=scaler,
                          accumulate=1, counter=SimpleNamespace(committed_updates=0),
                          on_commit=lambda evs, stepped: events.extend(evs))
    engine.microbatch(None, epoch=0, batch_idx=0, closes=True)
    assert (a.item(), b.item()) == (1.0, 1.0) and events == []  # B's finite grads not stepped
    assert scaler.get_scale() == 2.0**15  # a quiet skip: the scale backs off
    objective.big = False
    engine.microbatch(None, epoch=0, batch_idx=1, closes=True)
    assert (a.item(), b.item()) == (0.0, 0.0)
    assert [(e.optimizer, e.update_index) for e in events] == [("A", 1), ("B", 1)]


def test_fp16_objective_run_trains_with_a_checkpointed_scaler(tmp_path):
    model = NNModel(net_params=tiny_model().net_params,
                    params=NNModelParams(precision=Precision.FP16))
    run = model.train(NNTrainParams(n_epochs=2, train_loader=tiny_batches(2), optim=sgd()),
                      objective=supervised_objective(), root=tmp_path, verbose=False)
    from nnx import NNCheckpoint

    state = NNCheckpoint.load(run.id, "last", root=tmp_path).training_state()
    assert state["scaler"] is not None and state["precision"]["policy"] == "FP16"


# -- events, hooks, counters ----------------------------------------------------------
class Recording(Objective):
    def __init__(self, log):
        self.log, self.inner = log, supervised_objective()

    def __call__(self, ctx):
        return self.inner(ctx)

    def check_run(self, model, *, optimizers, callbacks):
        self.log.append(("check_run", tuple(optimizers), len(callbacks)))

    def after_update(self, events):
        self.log.append(("after_update", events[0].update_count))


def test_events_hooks_and_update_counts(tmp_path):
    log: list = []

    class Listen(Callback):
        def on_optimizer_update(self, ctx, event):
            log.append(("event", event.update_count, ctx.update_count, event.epoch,
                        event.batch_idx, event.microbatches, event.update_index,
                        event.optimizer, ctx.optimizer.param_groups[0]["lr"]))

    schedule = NNSchedulerParams.builder().step(step_size=1, factor=0.5).clock(
        "optimizer_update").build()
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(3), optim=sgd(0.4, 2),
                           scheduler=schedule)
    run = tiny_model().train(params, objective=Recording(log), callbacks=[Listen()],
                             root=tmp_path, verbose=False)
    assert log[0] == ("check_run", (None,), 1)
    events = [e for e in log if e[0] == "event"]
    # Windows of 2 + 1 microbatches: two updates per epoch, four in all.
    assert [e[1:8] for e in events] == [
        (1, 1, 0, 1, 2, 1, None), (2, 2, 0, 2, 1, 2, None),
        (3, 3, 1, 1, 2, 3, None), (4, 4, 1, 2, 1, 4, None)]
    # Each event fires before the update-clock schedule steps: it sees the update's own LR.
    assert [e[8] for e in events] == pytest.approx([0.4, 0.2, 0.1, 0.05])
    # after_update runs once per commit, before the callbacks see its events.
    order = [e[0] for e in log[1:]]
    assert order == ["after_update", "event"] * 4
    assert [r.update_count for r in run.idps] == [0, 1, 2, 2, 3, 4]


def test_check_run_refuses_before_any_run_is_reserved(tmp_path):
    class Refuse(Linear1):
        def check_run(self, model, *, optimizers, callbacks):
            raise ValueError("not with this model")

    with pytest.raises(ValueError, match="not with this model"):
        tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd()),
                           objective=Refuse(), root=tmp_path, verbose=False)
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_a_stateful_resume_continues_the_update_counters_and_equals_the_whole_run(tmp_path):
    def params(n, **kw):
        return NNTrainParams(n_epochs=n, train_loader=tiny_batches(3), optim=sgd(0.3, 2),
                             seed=0, **kw)

    whole = tiny_model()
    whole_run = whole.train(params(4), objective=supervised_objective(), root=tmp_path / "w",
                            verbose=False)
    part = tiny_model()
    first = part.train(params(2), objective=supervised_objective(), root=tmp_path / "p",
                       verbose=False)
    resumed = tiny_model(seed=5)
    second = resumed.train(params(2, resume_from_run_id=first.id),
                           objective=supervised_objective(), root=tmp_path / "p",
                           verbose=False)
    for a, b in zip(whole.net.parameters(), resumed.net.parameters(), strict=True):
        assert torch.equal(a, b)
    assert second.idps[-1].update_count == whole_run.idps[-1].update_count == 8
    weights_only = tiny_model().train(
        params(1, resume_from_run_id=first.id, resume_mode="weights_only"),
        objective=supervised_objective(), root=tmp_path / "p", verbose=False)
    assert weights_only.idps[-1].update_count == 2


def test_gradual_unfreezing_trains_exactly_as_the_default_step(tmp_path):
    class Unfreeze(Callback):
        def on_train_begin(self, ctx):
            ctx.model.freeze("layers.0.*")

        def on_epoch_begin(self, ctx):
            if ctx.epoch == 1:
                ctx.model.unfreeze("*")

    runs = []
    for objective in (supervised_objective(), None):
        model = tiny_model()
        model.train(NNTrainParams(n_epochs=3, train_loader=tiny_batches(3), optim=sgd(0.2, 2)),
                    objective=objective, callbacks=[Unfreeze()],
                    root=tmp_path / str(len(runs)), verbose=False)
        runs.append(model)
    for a, b in zip(runs[0].net.parameters(), runs[1].net.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_a_parameter_no_optimizer_owns_warns_once_per_run(tmp_path):
    class Unfreeze(Callback):
        def on_epoch_begin(self, ctx):
            ctx.model.unfreeze("*")

    model = tiny_model()
    model.freeze("layers.0.*")
    optim = NNOptimParams.builder().sgd(max_lr=0.1).param_groups(
        [NNParamGroupSpec(name_pattern="*")]).build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train(NNTrainParams(n_epochs=3, train_loader=tiny_batches(2), optim=optim),
                    objective=supervised_objective(), callbacks=[Unfreeze()], root=tmp_path,
                    verbose=False)
    unowned = [w for w in caught if "no optimizer owns" in str(w.message)]
    assert len(unowned) == 1 and "layers.0.weight" in str(unowned[0].message)


# -- refusals: one update owner, objects not wrappers -----------------------------------
def refused(tmp_path, error, match, **kwargs):
    model = tiny_model()
    before = copy.deepcopy(model.net.state_dict())
    params = NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd())
    with pytest.raises(error, match=match):
        model.train(params, root=tmp_path, verbose=False, **kwargs)
    assert not tmp_path.exists() or not [p for p in tmp_path.iterdir()
                                         if not p.name.startswith(".")]
    for k, v in model.net.state_dict().items():
        assert torch.equal(v, before[k])


def test_a_step_function_and_an_objective_together_are_refused(tmp_path):
    refused(tmp_path, ValueError, "exactly one update owner",
            train_step_fn=default_train_step, objective=supervised_objective())


def test_an_imperative_step_passed_as_the_objective_is_refused(tmp_path):
    refused(tmp_path, TypeError, "imperative step", objective=default_train_step)


def test_an_objective_passed_as_the_step_function_is_refused(tmp_path):
    refused(tmp_path, TypeError, "pass it as objective=", train_step_fn=supervised_objective())


@pytest.mark.parametrize("wrap", ["lambda", "partial"])
def test_a_wrapper_hiding_an_objective_is_refused(tmp_path, wrap):
    inner = supervised_objective()
    wrapper = (lambda ctx: inner(ctx)) if wrap == "lambda" else functools.partial(inner)
    refused(tmp_path, TypeError, "pass the objective itself", objective=wrapper)


def test_a_non_callable_objective_is_refused(tmp_path):
    refused(tmp_path, TypeError, "objective must be callable", objective=42)


def test_a_plain_function_objective_trains(tmp_path):
    def halved(ctx):
        result = supervised_objective()(ctx)
        term = result.terms[0]
        return ObjectiveResult([LossTerm("half", term.numerator, term.denominator, 0.5)])

    run = tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                           optim=sgd()),
                             objective=halved, root=tmp_path, verbose=False)
    assert run.idps[-1].update_count == 2


# -- the result types ---------------------------------------------------------------
def test_loss_term_and_result_validation():
    with pytest.raises(TypeError, match="one-element tensor"):
        LossTerm("t", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="denominator"):
        LossTerm("t", torch.tensor(1.0), -1.0)
    with pytest.raises(ValueError, match="weight"):
        LossTerm("t", torch.tensor(1.0), 1.0, weight=float("nan"))
    with pytest.raises(ValueError, match="unique"):
        ObjectiveResult([LossTerm("t", torch.tensor(1.0)), LossTerm("t", torch.tensor(2.0))])
    with pytest.raises(TypeError, match="non-empty"):
        ObjectiveResult([])
    term = LossTerm("t", torch.tensor(1.0), torch.tensor(4.0))
    assert term.denominator == 4.0 and term.reduction == "mean"
    assert LossTerm("t", torch.tensor(1.0)).reduction == "sum"
    half = torch.ones(2, dtype=torch.float16, requires_grad=True)
    full = ObjectiveContext.full_precision(half * 2)
    assert full.dtype == torch.float32 and full.requires_grad


def test_an_objective_returning_something_else_is_refused(tmp_path):
    with pytest.raises(TypeError, match="must return an ObjectiveResult"):
        tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd()),
                           objective=lambda ctx: 1.0, root=tmp_path, verbose=False)


def test_kd_objective_refuses_the_students_own_net_as_teacher(tmp_path):
    student = tiny_model()
    refused_run = kd_objective(student, 0.5, 2.0)
    assert all(p.requires_grad for p in student.net.parameters())  # nothing frozen yet
    with pytest.raises(ValueError, match="must not be the student's own net"):
        student.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd()),
                      objective=refused_run, root=tmp_path, verbose=False)
    assert not tmp_path.exists() or not [p for p in tmp_path.iterdir()
                                         if not p.name.startswith(".")]
    assert all(p.requires_grad for p in student.net.parameters())

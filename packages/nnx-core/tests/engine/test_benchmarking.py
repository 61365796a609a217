"""nnx.benchmarking (spec §28): what a benchmark counts and reports, compare_compile's
identical copies, profile_forward's finite schedule and its closing on success, error
and cancellation. No assertion here depends on how long anything took."""

from __future__ import annotations

import statistics

import pytest
import torch
from _nnx_core_tiny import tiny_model
from torch import nn

from nnx.benchmarking import (
    BenchmarkResult,
    benchmark_forward,
    compare_compile,
    profile_forward,
)
from nnx.compilation import CompileSpec


def counting(module):
    calls = []
    module.register_forward_pre_hook(
        lambda mod, args: calls.append((mod.training, torch.is_grad_enabled())))
    return calls


def profiling():
    return torch.autograd.profiler._is_profiler_enabled


def test_benchmark_forward_times_the_first_call_apart_from_the_warmed_ones():
    model = tiny_model()
    calls = counting(model.net)
    model.net.train()
    result = benchmark_forward(model, torch.randn(8, 4), warmup=3, repeats=5)
    assert isinstance(result, BenchmarkResult)
    assert len(calls) == 1 + 3 + 5  # first, warmup, timed
    assert all(mode == (False, False) for mode in calls)  # eval, no grad
    assert model.net.training  # the mode it had is restored
    assert len(result.latencies_s) == result.repeats == 5 and result.warmup == 3
    assert result.mean_s == pytest.approx(statistics.fmean(result.latencies_s))
    assert result.median_s == statistics.median(result.latencies_s)
    assert result.stdev_s == pytest.approx(statistics.stdev(result.latencies_s))
    assert result.first_call_s > 0 and all(t > 0 for t in result.latencies_s)
    assert result.input_shapes == ((8, 4),) and result.input_dtypes == ("float32",)
    assert (result.backend, result.device, result.label) == ("eager", "cpu", "FeedFwdNN")
    assert result.peak_memory_bytes is None  # CUDA only


def test_benchmark_forward_takes_tuples_and_keyword_inputs_and_a_compile_spec():
    class Two(nn.Module):
        def forward(self, a, b=None):
            return a + (0 if b is None else b)

    x = torch.ones(2, 3, dtype=torch.float64)
    by_tuple = benchmark_forward(Two(), (x, x), warmup=0, repeats=1)
    assert by_tuple.input_shapes == ((2, 3), (2, 3)) and by_tuple.stdev_s == 0.0
    by_name = benchmark_forward(Two(), {"a": x, "b": x}, warmup=1, repeats=2,
                                compile=CompileSpec(backend="eager"))
    assert by_name.backend == "eager" and by_name.input_dtypes == ("float64", "float64")


@pytest.mark.parametrize("kwargs, error", [({"warmup": -1}, ValueError),
                                           ({"repeats": 0}, ValueError),
                                           ({"compile": "inductor"}, TypeError)])
def test_benchmark_forward_refuses_bad_arguments(kwargs, error):
    with pytest.raises(error):
        benchmark_forward(tiny_model(), torch.randn(2, 4), **kwargs)
    with pytest.raises(TypeError, match=r"nn\.Module"):
        benchmark_forward(object(), torch.randn(2, 4))
    with pytest.raises(TypeError, match="example_input"):
        benchmark_forward(tiny_model(), [torch.randn(2, 4)])


def test_a_benchmark_never_times_inside_a_profile(tmp_path):
    with torch.profiler.profile(), pytest.raises(RuntimeError, match="profiler"):
        benchmark_forward(tiny_model(), torch.randn(2, 4))


def test_compare_compile_benchmarks_identical_copies_and_leaves_the_source_untouched():
    model = tiny_model(dropout=0.2)
    source = model.net
    before = {k: v.clone() for k, v in source.state_dict().items()}
    params = [id(p) for p in source.parameters()]
    ran = []
    source.register_forward_pre_hook(lambda mod, args: ran.append(mod))  # copied too
    source.train()
    result = compare_compile(model, torch.randn(8, 4), compile=CompileSpec(backend="aot_eager"),
                             warmup=1, repeats=2)
    assert result.same_weights and result.max_abs_diff == 0.0
    assert result.eager.backend == "eager" and result.compiled.backend == "aot_eager"
    assert result.speedup == result.eager.median_s / result.compiled.median_s
    assert ran and all(mod is not source for mod in ran)  # the copies ran, never it
    assert source.training  # its mode untouched
    assert [id(p) for p in source.parameters()] == params
    assert all(torch.equal(v, source.state_dict()[k]) for k, v in before.items())
    assert model.net is source


def test_profile_forward_runs_a_finite_schedule_into_its_output_dir(tmp_path):
    model = tiny_model()
    calls = counting(model.net)
    report = profile_forward(model, torch.randn(4, 4), output_dir=tmp_path / "prof", wait=1,
                             warmup=1, active=2, repeat=2)
    assert report.steps == len(calls) == (1 + 1 + 2) * 2
    assert report.output_dir == tmp_path / "prof" and len(report.traces) == 2
    assert all(p.parent == tmp_path / "prof" and p.suffix == ".json" for p in report.traces)
    assert "Name" in report.table and not profiling()
    with pytest.raises(ValueError, match="active"):
        profile_forward(model, torch.randn(4, 4), output_dir=tmp_path / "x", active=0)


@pytest.mark.parametrize("bad", ["model", "input", "compile"])
def test_profile_forward_refuses_bad_arguments_before_creating_output_dir(tmp_path, bad):
    kwargs = {"model_or_module": tiny_model(), "example_input": torch.randn(4, 4),
              "compile": None}
    kwargs[{"model": "model_or_module", "input": "example_input", "compile": "compile"}[bad]] = (
        {"model": object(), "input": [torch.randn(4, 4)], "compile": {"backend": "eager"}}[bad])
    with pytest.raises(TypeError):
        profile_forward(output_dir=tmp_path / "never", **kwargs)
    assert not (tmp_path / "never").exists()


class Fails(nn.Module):
    def __init__(self, error, at):
        super().__init__()
        self.error, self.at, self.calls = error, at, 0

    def forward(self, x):
        self.calls += 1
        if self.calls == self.at:
            raise self.error
        return x


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_the_profiler_is_closed_on_error_and_cancellation(tmp_path, error):
    module = Fails(error, at=3)
    module.train()
    with pytest.raises(type(error)):
        profile_forward(module, torch.randn(2, 2), output_dir=tmp_path / "p")
    assert not profiling() and module.training and torch.is_grad_enabled()
    benchmark_forward(tiny_model(), torch.randn(2, 4), warmup=0, repeats=1)  # not refused

"""GenerativeNNModel.generate (spec §15, §13.2): cache, sampling, stops, streaming, modes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import nnx
from nnx import (
    GenerativeNNModel,
    Nets,
    NNCheckpoint,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    NNTransformerParams,
)
from nnx.extend import finalize_step
from nnx.generation import LogitsChain, TemperatureScaling
from nnx.lm.tokenizer import NNTokenizerParams

SHAPE = NNTransformerParams(vocab_size=61, d_model=32, n_heads=4, n_layers=2, max_seq_len=300)
TEXT = "the quick brown fox jumps over the lazy dog. " * 8


def _model(seed: int = 0, tokenizer: NNTokenizerParams | None = None) -> GenerativeNNModel:
    torch.manual_seed(seed)
    return GenerativeNNModel(net_params=SHAPE, params=NNModelParams(net=Nets.TRANSFORMER),
                             tokenizer=tokenizer)


class _Recorder:
    """A processor that keeps each step's raw logits."""

    def __init__(self) -> None:
        self.seen: list[torch.Tensor] = []

    def __call__(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        self.seen.append(logits.clone())
        return logits


def test_exported_at_top_level() -> None:
    from nnx.lm import GenerativeNNModel as direct

    assert nnx.GenerativeNNModel is direct is GenerativeNNModel


def test_greedy_with_the_cache_equals_recomputation_over_256_tokens() -> None:
    model = _model()
    prompt = [5, 17, 3, 42]
    runs = {}
    for use_cache in (True, False):
        rec = _Recorder()
        out = model.generate(prompt, max_new_tokens=256, use_cache=use_cache,
                             logits_pipeline=[rec, TemperatureScaling(0)])
        runs[use_cache] = (out, rec.seen)
    (cached, c_logits), (full, f_logits) = runs[True], runs[False]
    assert len(cached) == 256 and cached == full
    assert len(c_logits) == len(f_logits) == 256
    for step, (a, b) in enumerate(zip(c_logits, f_logits, strict=True)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5, msg=f"step {step}")
    # The scalar spelling is the same greedy decode.
    assert model.generate(prompt, max_new_tokens=256, temperature=0) == cached


def test_a_fixed_seed_samples_the_same_twice_and_leaves_the_global_rng() -> None:
    model = _model()
    state = torch.random.get_rng_state()
    a = model.generate([1, 2, 3], max_new_tokens=40, top_k=20, top_p=0.95, seed=7)
    b = model.generate([1, 2, 3], max_new_tokens=40, top_k=20, top_p=0.95, seed=7)
    c = model.generate([1, 2, 3], max_new_tokens=40, top_k=20, top_p=0.95, seed=8)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert a == b and a != c
    # Same seed, with or without the cache: the same sample.
    assert model.generate([1, 2, 3], max_new_tokens=40, top_k=20, top_p=0.95, seed=7,
                          use_cache=False) == a


def test_greedy_draws_nothing_from_the_global_rng() -> None:
    model = _model()
    state = torch.random.get_rng_state()
    model.generate([1, 2], max_new_tokens=5, temperature=0)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_id_stop_sequences_end_generation_and_are_not_kept() -> None:
    model = _model()
    free = model.generate([5, 17], max_new_tokens=30, seed=3)
    i = 6
    pair = free[i:i + 2]
    out = model.generate([5, 17], max_new_tokens=30, seed=3, stop=[pair, [10**3]])
    first = next(j for j in range(len(free) - 1) if free[j:j + 2] == pair)
    assert out == free[:first]
    assert model.generate([5, 17], max_new_tokens=30, seed=3, stop=free[i]) == \
        free[:free.index(free[i])]
    tensor_out = model.generate(torch.tensor([5, 17]), max_new_tokens=30, seed=3, stop=[pair])
    assert isinstance(tensor_out, torch.Tensor) and tensor_out.tolist() == out


def test_text_stop_strings_are_matched_on_text_and_cut_out() -> None:
    tok = NNTokenizerParams.train(TEXT, vocab_size=280, eos_token=None)
    shape = NNTransformerParams(vocab_size=280, d_model=16, n_heads=2, n_layers=1,
                                max_seq_len=128)
    torch.manual_seed(0)
    model = GenerativeNNModel(net_params=shape, params=NNModelParams(net=Nets.TRANSFORMER),
                              tokenizer=tok)
    free = model.generate("the quick", max_new_tokens=40, seed=1)
    assert isinstance(free, str) and len(free) > 4
    stop = free[2:4]
    streamed: list[int] = []
    out = model.generate("the quick", max_new_tokens=40, seed=1, stop=[stop, "\x00never"],
                         on_token=streamed.append)
    assert out == free[:free.index(stop)]
    assert stop in tok.decode(streamed)  # the stop was streamed, then cut from the result
    assert len(streamed) < 40


def test_on_token_streams_every_token_in_order() -> None:
    model = _model()
    streamed: list[int] = []
    out = model.generate([4, 4, 4], max_new_tokens=12, seed=0, on_token=streamed.append)
    assert streamed == out and len(out) == 12


def _modes(model: GenerativeNNModel) -> list[bool]:
    return [m.training for m in model.net.modules()]


def test_modes_are_restored_after_on_token_raises() -> None:
    model = _model()
    model.net.train()
    model.net.blocks[0].eval()  # a mixed tree: restored module by module
    before = _modes(model)
    seen_modes: list[bool] = []

    def boom(token: int) -> None:
        seen_modes.append(model.net.training)
        raise RuntimeError("stop streaming")

    with pytest.raises(RuntimeError, match="stop streaming"):
        model.generate([1, 2], max_new_tokens=5, on_token=boom)
    assert seen_modes == [False]  # decoding ran in eval mode
    assert _modes(model) == before


def test_modes_are_restored_after_a_normal_call() -> None:
    model = _model()
    model.net.train()
    before = _modes(model)
    model.generate([1, 2], max_new_tokens=3)
    assert _modes(model) == before


_REFUSED = [
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"max_new_tokens": 2.0}, "max_new_tokens"),
    ({"max_new_tokens": True}, "max_new_tokens"),
    ({"max_new_tokens": 299}, "max_seq_len"),
    ({"temperature": -1.0}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": "1"}, "temperature"),
    ({"top_k": 0}, "TopKFilter.k"),
    ({"top_k": 2.5}, "TopKFilter.k"),
    ({"top_p": 0.0}, "TopPFilter.p"),
    ({"top_p": 1.5}, "TopPFilter.p"),
    ({"repetition_penalty": 0.0}, "penalty"),
    ({"repetition_penalty": float("inf")}, "penalty"),
    ({"seed": -1}, "seed"),
    ({"seed": True}, "seed"),
    ({"seed": 2**32}, "seed"),
    ({"use_cache": 1}, "use_cache"),
    ({"stop": []}, "stop"),
    ({"stop": "x"}, "text prompt"),
    ({"stop": [[1], "x"]}, r"stop\[1\]"),
    ({"stop": [-1]}, r"stop\[0\]\[0\]"),
    ({"logits_chain": LogitsChain(), "logits_pipeline": []}, "not both"),
    ({"logits_chain": LogitsChain(), "top_k": 3}, "standard chain"),
    ({"logits_pipeline": [TemperatureScaling(0)], "temperature": 0.5}, "standard chain"),
]


@pytest.mark.parametrize(("kwargs", "match"), _REFUSED)
def test_bad_arguments_are_refused_before_anything_runs(kwargs: dict, match: str) -> None:
    model = _model()
    model.net.train()
    weights = {k: v.clone() for k, v in model.net.state_dict().items()}
    state = torch.random.get_rng_state()
    calls: list[int] = []
    args = {"max_new_tokens": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        model.generate([1, 2], on_token=calls.append, **args)
    assert calls == [] and model.net.training
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(v, weights[k]) for k, v in model.net.state_dict().items())


@pytest.mark.parametrize(("prompt", "kwargs", "error", "match"), [
    ("text", {}, ValueError, "needs a tokenizer"),
    ([], {}, ValueError, "empty"),
    ([1, 61], {}, ValueError, "outside"),
    ([1, 2.0], {}, ValueError, r"prompt\[1\]"),
    (torch.tensor([[1, 2]]), {}, ValueError, "1-D integer"),
    (torch.tensor([1.0, 2.0]), {}, ValueError, "1-D integer"),
    (3, {}, TypeError, "prompt must be"),
    ([1], {"on_token": 3}, TypeError, "on_token"),
    ([1], {"logits_chain": [TemperatureScaling(0)]}, TypeError, "LogitsChain"),
    ([1], {"logits_pipeline": [3]}, TypeError, "processor"),
])
def test_bad_prompts_and_callables_are_refused(prompt: object, kwargs: dict,
                                               error: type[Exception], match: str) -> None:
    model = _model()
    with pytest.raises(error, match=match):
        model.generate(prompt, max_new_tokens=2, **kwargs)  # type: ignore[call-overload]


def test_the_prompt_fills_max_seq_len_exactly() -> None:
    model = _model()
    out = model.generate(list(range(50)), max_new_tokens=250, temperature=0)
    assert len(out) == 250


def test_the_net_must_be_a_transformer() -> None:
    with pytest.raises(TypeError, match="TransformerNN"):
        GenerativeNNModel(module=torch.nn.Linear(2, 2))


def _next_token_step(ctx):  # type: ignore[no-untyped-def]
    (ids,), targets = ctx.model.split_batch(ctx.batch)
    logits = ctx.model.net(ids)
    return finalize_step(ctx, F.cross_entropy(logits.flatten(0, 1), targets.flatten())).record()


def test_a_trained_model_reloaded_from_its_checkpoint_generates_the_same_text(
        tmp_path: Path) -> None:
    tok = NNTokenizerParams.train(TEXT, vocab_size=280).save(tmp_path / "tok.json")
    shape = NNTransformerParams(vocab_size=280, d_model=16, n_heads=2, n_layers=1,
                                max_seq_len=64)
    torch.manual_seed(0)
    model = GenerativeNNModel(net_params=shape, params=NNModelParams(net=Nets.TRANSFORMER),
                              tokenizer=tok)
    ids = torch.tensor(tok.encode(TEXT))
    windows = ids[: (len(ids) // 17) * 17].view(-1, 17)
    batches = [(windows[i:i + 2, :-1], windows[i:i + 2, 1:]) for i in range(0, len(windows), 2)]
    optim = NNOptimParams.builder().adamw(max_lr=1e-2).build()
    run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, optim=optim,
                                    scheduler=None),
                      train_step_fn=_next_token_step, root=tmp_path, verbose=False)
    text = model.generate("the quick", max_new_tokens=20, temperature=0)
    sampled = model.generate("the quick", max_new_tokens=20, seed=5)

    last = NNCheckpoint.load(run.id, "last", root=tmp_path)
    reloaded = GenerativeNNModel.from_checkpoint(
        last, tokenizer=NNTokenizerParams.load(tmp_path / "tok.json"))
    assert type(reloaded) is GenerativeNNModel
    assert reloaded.generate("the quick", max_new_tokens=20, temperature=0) == text
    assert reloaded.generate("the quick", max_new_tokens=20, seed=5) == sampled
    losses = [r.train_edp.loss for r in run.epoch_records()]
    assert losses[-1] < losses[0]  # it did train


def test_a_generative_model_trains_with_the_causal_lm_task_and_then_generates(tmp_path):
    """task= hands the task to NNx (objective, eval step, component, run id), as for
    CausalLMModel; the same model then generates."""
    from nnx import Devices, Nets, NNModelParams, NNOptimParams, NNTrainParams
    from nnx.lm import GenerativeNNModel, NNTransformerParams
    from nnx.lm_tasks import CausalLMTask

    torch.manual_seed(0)
    task = CausalLMTask(vocab_size=32, label_smoothing=0.1)
    model = GenerativeNNModel(
        net_params=NNTransformerParams(vocab_size=32, d_model=16, n_heads=2, n_layers=1,
                                       max_seq_len=32),
        params=NNModelParams(net=Nets.TRANSFORMER, device=Devices.CPU), task=task)
    ids = torch.randint(0, 32, (8, 9), generator=torch.Generator().manual_seed(1))
    run = model.train(NNTrainParams(n_epochs=1, train_loader=[ids[:4]], val_loader=[ids[4:]],
                                    optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(),
                                    scheduler=None), verbose=False, root=tmp_path)
    assert run.state()["task"]["label_smoothing"] == 0.1  # the task is in the run id
    assert set(run.epoch_records()[-1].val_edp.metrics) == {"nll", "perplexity",
                                                            "token_accuracy"}
    out = model.generate([1, 2, 3], max_new_tokens=4, temperature=0)
    assert out == model.generate([1, 2, 3], max_new_tokens=4, temperature=0, use_cache=False)

"""quantize_int8 (spec §16): PTQ int8 weight-only through torchao's config API. The result
is an instance of the model's class with only ``net`` replaced by the quantized deep copy;
on a trained FeedFwd its outputs stay within 1 % relative L2 of FP32 and its serialized
state_dict is at most 0.30x the FP32 bytes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.utils import prune

from nnx import Devices, Nets, NNModel, NNModelParams, NNParams
from nnx.quantize import QuantizeError, quantize_int8
from nnx.testing import sgd, tiny_train_params


def _trained(tmp_path: Path) -> tuple[NNModel, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 32, generator=g)
    y = (x[:, :4].argmax(dim=1))
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=32, output_dim=4, hidden_dims=(256, 256)),
                    params=NNModelParams(device=Devices.CPU))
    batches = [(x[i:i + 64], y[i:i + 64]) for i in range(0, 256, 64)]
    model.train(tiny_train_params(batches, n_epochs=3, optim=sgd(0.05)), root=tmp_path,
                verbose=False)
    model.net.eval()
    return model, x


def _saved_bytes(net: torch.nn.Module) -> int:
    buffer = io.BytesIO()
    torch.save(net.state_dict(), buffer)
    return len(buffer.getvalue())


def test_int8_stays_within_one_percent_and_under_a_third_of_the_bytes(tmp_path: Path) -> None:
    model, x = _trained(tmp_path)
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    quantized = quantize_int8(model)
    with torch.no_grad():
        reference, output = model.net(x), quantized.net(x)
    assert (output - reference).norm() / reference.norm() < 0.01
    assert _saved_bytes(quantized.net) <= 0.30 * _saved_bytes(model.net)
    # the original is untouched: same net object, same float weights
    assert all(torch.equal(model.net.state_dict()[k], v) for k, v in before.items())
    assert type(model.net.layers[0].weight) is torch.nn.Parameter


def test_only_net_is_replaced_and_subclass_state_is_kept() -> None:
    class Tagged(NNModel):
        def greet(self) -> str:
            return f"hello {self.tag}"

    torch.manual_seed(0)
    model = Tagged(net_params=NNParams(input_dim=8, output_dim=2, hidden_dims=(16,)),
                   params=NNModelParams(device=Devices.CPU))
    model.tag = "int8"
    quantized = quantize_int8(model)
    assert type(quantized) is Tagged and quantized is not model
    assert quantized.greet() == "hello int8"
    assert quantized.net is not model.net
    changed = {k for k, v in vars(quantized).items() if vars(model).get(k) is not v}
    assert changed == {"net"}
    assert quantized.predict(torch.randn(3, 8)).classes.shape == (3,)


def test_refusals_change_nothing() -> None:
    with pytest.raises(QuantizeError, match="takes an NNModel"):
        quantize_int8(torch.nn.Linear(2, 2))  # type: ignore[type-var]
    model = NNModel(module=torch.nn.Sequential(torch.nn.ReLU()), params=NNModelParams())
    with pytest.raises(QuantizeError, match=r"no nn\.Linear"):
        quantize_int8(model)
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=8, output_dim=2, hidden_dims=(16,)),
                    params=NNModelParams(device=Devices.CPU))
    with pytest.raises(QuantizeError, match="already quantized"):
        quantize_int8(quantize_int8(model))
    prune.l1_unstructured(model.net.layers[0], "weight", amount=0.5)
    keys = list(model.net.state_dict())
    with pytest.raises(QuantizeError, match="pruning mask"):
        quantize_int8(model)
    assert list(model.net.state_dict()) == keys


def test_a_generative_model_keeps_its_tokenizer_and_generates() -> None:
    lm = pytest.importorskip("nnx.lm")  # the crossing: only where nnx-lm is installed
    text = "the quick brown fox jumps over the lazy dog. " * 4
    tokenizer = lm.NNTokenizerParams.train(text, vocab_size=280, eos_token=None)
    torch.manual_seed(0)
    model = lm.GenerativeNNModel(
        net_params=lm.NNTransformerParams(vocab_size=280, d_model=32, n_heads=4, n_layers=1,
                                          max_seq_len=64),
        params=NNModelParams(net=Nets.TRANSFORMER), tokenizer=tokenizer)
    quantized = quantize_int8(model)
    assert type(quantized) is lm.GenerativeNNModel
    assert quantized.tokenizer is model.tokenizer
    out = quantized.generate("the quick", max_new_tokens=5, temperature=0.0)
    assert isinstance(out, str)
    # the KV-cache path and recomputation agree on the quantized net too
    assert out == quantized.generate("the quick", max_new_tokens=5, temperature=0.0,
                                     use_cache=False)


def test_a_quantized_model_is_for_inference_train_refuses_it(tmp_path: Path) -> None:
    from nnx.testing import tiny_model
    from nnx.transforms import LiveTopologyError

    quantized = quantize_int8(tiny_model())
    with pytest.raises(LiveTopologyError, match="Int8Tensor"):
        quantized.train(tiny_train_params(), root=tmp_path, verbose=False)
    assert not any(tmp_path.iterdir())


_SERVE = """
import torch
import torch._inductor.config

from nnx import NNModel, NNParams
from nnx.quantize import quantize_int8

torch.manual_seed(0)
model = NNModel(net_params=NNParams(input_dim=64, output_dim=4, hidden_dims=(256,)))
quantized = quantize_int8(model)
x = torch.randn(8, 64)
with torch.no_grad():
    eager = quantized.net(x)

served = torch.compile(quantized.net, mode="max-autotune-no-cudagraphs")
with torch.no_grad(), torch._inductor.config.patch(freezing=True):
    logits = served(x)
assert torch._inductor.config.freezing is False  # the patch leaves the process as it was
assert type(quantized.net.layers[0].weight).__name__ == "Int8Tensor"
torch.testing.assert_close(logits, eager, rtol=1e-5, atol=1e-5)
print("served", tuple(logits.shape))
"""


@pytest.mark.slow
def test_the_documented_cpu_serving_recipe_compiles_and_equals_eager(tmp_path: Path) -> None:
    # docs/quantize.md "Serving it on the CPU", in a fresh interpreter so its compile and
    # inductor cache (under tmp_path) stay out of this test process.
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _SERVE], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "served (8, 4)" in proc.stdout

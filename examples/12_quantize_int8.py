"""Post-training int8 weight-only quantization (spec §16): train, quantize, compare.

A FeedFwd classifier is trained on synthetic data, then ``quantize_int8`` returns a
copy of the model whose net holds int8 weights (torchao ``Int8WeightOnlyConfig``: one
int8 per weight plus a float scale per output row). The script asserts that the
original model is untouched, that the quantized outputs stay within 1 % relative L2 of
FP32 with the same accuracy to within a point, and that the saved state_dict is at
most 0.30x the FP32 bytes.

    uv run python examples/12_quantize_int8.py
"""

from __future__ import annotations

import io
import os
import tempfile

import torch

from nnx import NNModel, NNOptimParams, NNParams, NNTrainParams, set_seed
from nnx.quantize import quantize_int8


def blobs(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Four Gaussian blobs in 64-D (the same centres for every seed), in batches of 64."""
    centres = torch.randn(4, 64, generator=torch.Generator().manual_seed(123)) * 0.5
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (512,), generator=g)
    x = centres[y] + torch.randn(512, 64, generator=g)
    return [(x[i:i + 64], y[i:i + 64]) for i in range(0, 512, 64)]


def saved_bytes(net: torch.nn.Module) -> int:
    buffer = io.BytesIO()
    torch.save(net.state_dict(), buffer)
    return len(buffer.getvalue())


def main(root: str) -> None:
    set_seed(0)
    model = NNModel(net_params=NNParams(input_dim=64, output_dim=4, hidden_dims=(256, 256)))
    model.train(NNTrainParams(n_epochs=4, train_loader=blobs(0), seed=0,
                              optim=NNOptimParams.builder().adamw(max_lr=3e-3).build()),
                verbose=False, root=root)
    model.net.eval()

    quantized = quantize_int8(model)  # model itself keeps its float weights
    assert type(quantized) is NNModel and quantized.net is not model.net

    test = blobs(1)
    x = torch.cat([b[0] for b in test])
    with torch.no_grad():
        reference, output = model.net(x), quantized.net(x)
    rel = ((output - reference).norm() / reference.norm()).item()
    acc_fp32 = model.evaluate(test).accuracy
    acc_int8 = quantized.evaluate(test).accuracy
    size_fp32, size_int8 = saved_bytes(model.net), saved_bytes(quantized.net)
    print(f"relative L2 int8 vs fp32: {rel:.2e}")
    print(f"accuracy fp32 {acc_fp32:.3f}, int8 {acc_int8:.3f}")
    print(f"state_dict bytes fp32 {size_fp32}, int8 {size_int8} "
          f"({size_int8 / size_fp32:.2f}x)")
    assert rel < 0.01
    assert acc_fp32 is not None and acc_int8 is not None
    assert acc_fp32 > 0.8 and abs(acc_int8 - acc_fp32) <= 0.01
    assert size_int8 <= 0.30 * size_fp32


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(os.path.join(tmp, "runs"))

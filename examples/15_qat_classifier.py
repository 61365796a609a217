"""Quantization-aware training, 8da4w (spec §16): train with fake-quant, convert on commit,
reload the converted LAST.

A FeedFwd classifier trains with ``QATLifecycleCallback(qat_config="8da4w", groupsize=32)``
and ``qat_train_step_factory``: every Linear is fake-quantized during training (int8
dynamic activations, int4 weights in groups of 32 inputs), and at the end of the run the
net is converted (torchao ``QATConfig(step="convert")``). The final LAST records the
``nnx.qat`` recipe, so ``NNModel.from_checkpoint`` rebuilds the quantized net on its own.
The script asserts that the reloaded model predicts exactly like the converted one in
memory, and that it classifies about as well as a float run of the same net. Last, the
converted LAST ships as a run bundle (spec §22): the bundle rebuilds the quantized net for
inference, bit for bit, and refuses to resume.

    uv run python examples/15_qat_classifier.py
"""

from __future__ import annotations

import os
import tempfile

import torch

from nnx import NNCheckpoint, NNModel, NNOptimParams, NNParams, NNTrainParams, set_seed
from nnx.bundles import BundleCapabilityError, export_bundle, reconstruct_bundle
from nnx.quantize import QATLifecycleCallback, qat_train_step_factory


def blobs(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Four Gaussian blobs in 64-D (the same centres for every seed), in batches of 64."""
    centres = torch.randn(4, 64, generator=torch.Generator().manual_seed(123)) * 0.5
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (512,), generator=g)
    x = centres[y] + torch.randn(512, 64, generator=g)
    return [(x[i:i + 64], y[i:i + 64]) for i in range(0, 512, 64)]


def trained(root: str, *, qat: bool) -> tuple[NNModel, str]:
    set_seed(0)
    model = NNModel(net_params=NNParams(input_dim=64, output_dim=4, hidden_dims=(128,)))
    params = NNTrainParams(n_epochs=4, train_loader=blobs(0), seed=0,
                           optim=NNOptimParams.builder().adamw(max_lr=3e-3).build())
    extra = ({"callbacks": [QATLifecycleCallback(qat_config="8da4w", groupsize=32)],
              "train_step_fn": qat_train_step_factory(qat_config="8da4w", groupsize=32)}
             if qat else {})
    run = model.train(params, verbose=False, root=root, **extra)
    return model, run.id


def main(root: str) -> None:
    fp32, _ = trained(os.path.join(root, "fp32"), qat=False)
    converted, run_id = trained(os.path.join(root, "qat"), qat=True)

    last = NNCheckpoint.load(run_id, "last", root=os.path.join(root, "qat"))
    print("LAST records:", list(last.transforms))
    restored = NNModel.from_checkpoint(last)  # replays nnx.qat, then loads the int4 weights
    print("weight type:", type(restored.net.layers[0].weight).__name__)

    test = blobs(1)
    x = torch.cat([b[0] for b in test])
    assert torch.equal(restored.predict(x).logits, converted.predict(x).logits)
    acc_fp32, acc_qat = fp32.evaluate(test).accuracy, restored.evaluate(test).accuracy
    print(f"accuracy fp32 {acc_fp32:.3f}, QAT 8da4w {acc_qat:.3f}")
    assert acc_fp32 is not None and acc_qat is not None
    assert acc_fp32 > 0.8 and acc_qat >= acc_fp32 - 0.03

    bundle = os.path.join(root, "qat-bundle")
    export_bundle(run_id, bundle, root=os.path.join(root, "qat"))
    served = reconstruct_bundle(bundle)
    assert torch.equal(served.model.predict(x).logits, converted.predict(x).logits)
    try:
        served.resume(NNTrainParams(n_epochs=5, train_loader=blobs(0)))
    except BundleCapabilityError as refusal:
        print("bundle: rebuilds for inference; resume refused:", str(refusal)[:60], "...")
    else:
        raise AssertionError("a QAT bundle must refuse to resume")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(os.path.join(tmp, "runs"))

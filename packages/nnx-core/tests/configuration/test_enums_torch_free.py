"""The configuration enums import no torch (issue 37): a member's torch class is resolved
when the member is first called, so reading a run's typed configuration (``nnx runs
show``) runs without torch; calling a member builds what it always built."""

from __future__ import annotations

import subprocess
import sys

import torch
from torch import nn

from nnx import Activations, Devices, Losses, Optims, Precision, Schedulers


def test_the_enums_and_a_runs_typed_configuration_import_no_torch() -> None:
    code = ("import sys; from nnx.enums import *; from nnx import NNModelParams, NNParams; "
            "from nnx.params.train import NNTrainParams; "
            "p = NNParams(input_dim=4, hidden_dims=(8,), output_dim=3); "
            "Nets.FEED_FWD.params_class; "
            "print('torch' in sys.modules, [m.value for m in Activations][:2], "
            "Losses.CROSS_ENTROPY.is_classification, Optims.ADAMW.is_adam_family, "
            "Precision.BF16.is_reduced)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False ['relu', 'leaky_relu'] True True True", done.stderr


def test_calling_a_member_builds_the_torch_object_it_names() -> None:
    assert type(Activations.GELU()) is nn.GELU and type(Activations.IDENTITY()) is nn.Identity
    loss = Losses.CROSS_ENTROPY(label_smoothing=0.1)
    assert type(loss) is nn.CrossEntropyLoss and loss.label_smoothing == 0.1
    assert type(Losses.BINARY_CROSS_ENTROPY()) is nn.BCEWithLogitsLoss
    assert Devices.CPU() == torch.device("cpu") and Precision.BF16() is torch.bfloat16
    net = nn.Linear(2, 2)
    opt = Optims.ADAMW(net, lr_start=0.01)
    assert type(opt) is torch.optim.AdamW and opt.defaults["betas"] == (0.9, 0.999)
    assert type(Schedulers.STEP(opt, _Knobs(), 4)) is torch.optim.lr_scheduler.StepLR


class _Knobs:
    clock, min_lr, factor, patience, cooldown, threshold = "epoch", 0.0, 0.5, 1, 0, 1e-4
    step_size, T_max, total_steps, warmup_steps, max_lr = 2, None, None, None, None

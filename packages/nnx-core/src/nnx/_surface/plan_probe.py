"""``ExperimentPlan.probe``'s ambient state: seeded like ``set_seed``, restored afterwards.

What ``set_seed`` changes is saved first and put back whether the probe succeeds
or fails: the Python / NumPy / torch RNG streams, the cuDNN deterministic and
benchmark flags, the deterministic-algorithms setting, ``PYTHONHASHSEED`` and
``CUBLAS_WORKSPACE_CONFIG``. A CPU model's probe never touches CUDA: seeding
through ``torch.manual_seed`` would queue a CUDA seed for CUDA's first use,
which would then re-seed the caller's CUDA stream long after the probe, so
only the CPU generator is seeded (``seed_streams(cuda=False)``). A CUDA
model's probe starts CUDA first (any queued seed runs then, as it would have
anyway) so its streams can be saved.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

__all__ = ["ambient_state_restored"]

_ENV = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG")


def _capture(cuda: bool) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if cuda else None,
        "cudnn": (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark),
        "algorithms": (torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled()),
        "env": {name: os.environ.get(name) for name in _ENV},
    }


def _restore(saved: dict[str, Any]) -> None:
    random.setstate(saved["python"])
    np.random.set_state(saved["numpy"])
    torch.set_rng_state(saved["torch"])
    if saved["cuda"] is not None:
        torch.cuda.set_rng_state_all(saved["cuda"])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved["cudnn"]
    enabled, warn_only = saved["algorithms"]
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    for name, value in saved["env"].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def ambient_state_restored(*, cuda: bool) -> Iterator[None]:
    """Save the global seed state, run the body, put it back (on error too). ``cuda``:
    the probe's model lives on a CUDA device, so CUDA is started and its streams saved."""
    if cuda:
        torch.cuda.init()  # type: ignore[no-untyped-call]
    saved = _capture(cuda)
    try:
        yield
    finally:
        _restore(saved)


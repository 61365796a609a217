"""Global seeding and RNG snapshots (spec §13, §13.2, §14).

``set_seed`` pins the process-wide streams (Python, NumPy, torch CPU and
CUDA) and cuDNN's algorithm choice. ``capture_rng_state`` /
``restore_rng_state`` let non-destructive helpers and resume put every
stream back exactly; the snapshot holds only plain Python values and
tensors, so a checkpoint can carry it and still load with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
import random
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from nnx._foundation.validation import check_count, check_seed

__all__ = ["capture_rng_state", "dataloader_worker_init_fn", "restore_rng_state", "seed_streams",
           "set_seed"]

_STATE_VERSION = 1
_STATE_KEYS = frozenset({"version", "python", "numpy", "torch", "cuda"})


def set_seed(seed: int, *, strict: bool = False) -> None:
    """Seed Python, NumPy and torch (CPU and every CUDA device); pin cuDNN.

    cuDNN is set to deterministic kernels with autotuning off. ``strict=True``
    also calls ``torch.use_deterministic_algorithms(True)`` (slower, and it
    raises on ops without a deterministic kernel) and sets
    ``CUBLAS_WORKSPACE_CONFIG=":4096:8"`` unless the environment already sets
    it. ``strict=False`` leaves the deterministic-algorithms setting as it
    was, so it never undoes a caller's own choice. ``PYTHONHASHSEED`` is
    exported for child processes (this interpreter's hashing is fixed at
    start-up and cannot change).
    """
    value = check_seed("seed", seed)
    if not isinstance(strict, bool):
        raise ValueError(f"strict must be a bool; got {strict!r}")
    seed_streams(value, cuda=True)
    if strict:
        # cuBLAS reads this when its handle is created; set it before any GPU matmul.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)


def seed_streams(seed: int, *, cuda: bool) -> None:
    """:func:`set_seed`'s non-strict part. ``cuda=False`` seeds no CUDA stream at all:
    ``torch.manual_seed`` would queue a CUDA seed for CUDA's first use, which then
    re-seeds a stream long after the caller restored its own (a CPU probe, §20)."""
    random.seed(seed)
    np.random.seed(seed)
    if cuda:
        torch.manual_seed(seed)  # every device's generator
        torch.cuda.manual_seed_all(seed)  # lazy: queued until CUDA initializes, free without it
    else:
        torch.default_generator.manual_seed(seed)  # the CPU generator alone
    os.environ["PYTHONHASHSEED"] = str(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def dataloader_worker_init_fn(worker_id: int) -> None:
    """``DataLoader(worker_init_fn=...)``: seed Python and NumPy per worker.

    torch gives each worker ``initial_seed() = base_seed + worker_id``, where
    ``base_seed`` is drawn from the (seeded) parent stream. Deriving from it
    makes workers differ from one another while a seeded run repeats.
    """
    check_count("worker_id", worker_id, minimum=0)
    seed = torch.initial_seed()
    random.seed(seed)
    # SeedSequence mixes all 64 bits of the torch seed into NumPy's 32-bit words.
    np.random.seed(np.random.SeedSequence(seed).generate_state(4))


def capture_rng_state() -> dict[str, Any]:
    """Snapshot the Python, NumPy, torch CPU and (when available) CUDA streams.

    Capturing on a CUDA host initializes CUDA, so the CUDA streams can be
    read. ``"cuda"`` is ``None`` where CUDA is unavailable.
    """
    numpy_state = np.random.get_state(legacy=False)
    version, words, gauss_next = random.getstate()
    return {
        "version": _STATE_VERSION,
        # The 625-word states as int64 tensors, not lists: weights_only loading refuses
        # ndarrays, and a list pickles as 625 objects, each a Python call in torch.save.
        # On the CPU explicitly: a factory built under a device context (the meta device
        # of a checkpoint's shape check) must not turn the snapshot into meta tensors.
        "python": (version, torch.tensor(words, dtype=torch.int64, device="cpu"), gauss_next),
        "numpy": {
            "bit_generator": numpy_state["bit_generator"],
            "key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Put back a :func:`capture_rng_state` snapshot, all streams or none.

    Each part is first applied to a scratch generator, so a malformed
    snapshot raises ``ValueError`` before any global stream changes. CUDA
    streams saved on a CUDA host are skipped, with a ``RuntimeWarning``,
    where CUDA is unavailable.
    """
    if not isinstance(state, Mapping) or state.get("version") != _STATE_VERSION:
        raise ValueError(f"RNG state must be a mapping with version {_STATE_VERSION}")
    if set(state) != _STATE_KEYS:
        raise ValueError(f"RNG state must have exactly the keys {sorted(_STATE_KEYS)}")
    numpy_state = _numpy_state(state["numpy"])
    cuda = _checked_cuda(state["cuda"])
    try:
        python = _python_state(state["python"])
        random.Random().setstate(python)
        torch.Generator().set_state(state["torch"])
    except Exception as exc:  # scratch generators: any failure means malformed
        raise ValueError(f"RNG state is malformed: {exc}") from None
    # Everything is known to apply; nothing below is expected to fail.
    random.setstate(python)
    np.random.set_state(numpy_state)
    torch.set_rng_state(state["torch"])
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _words(value: Any) -> Any:
    """A state's words as saved: an int64 tensor, or a list (older snapshots)."""
    return tuple(value.tolist()) if isinstance(value, torch.Tensor) else value


def _python_state(part: Any) -> tuple[Any, ...]:
    version, words, gauss_next = part
    return version, _words(words), gauss_next


def _numpy_state(part: Any) -> dict[str, Any]:
    try:
        full = {
            "bit_generator": part["bit_generator"],
            "state": {"key": np.asarray(_words(part["key"]), dtype=np.uint32),
                      "pos": int(part["pos"])},
            "has_gauss": int(part["has_gauss"]),
            "gauss": float(part["gauss"]),
        }
        np.random.RandomState().set_state(full)
    except Exception as exc:  # a scratch generator: any failure means malformed
        raise ValueError(f"RNG state's numpy part is malformed: {exc!r}") from None
    return full


def _checked_cuda(part: Any) -> list[torch.Tensor] | None:
    if part is None:
        return None
    if not isinstance(part, (list, tuple)) or not all(torch.is_tensor(t) for t in part):
        raise ValueError("RNG state's cuda part must be a list of tensors or None")
    if not torch.cuda.is_available():
        warnings.warn(
            "RNG state holds CUDA streams but CUDA is unavailable; they are not restored",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    if len(part) != torch.cuda.device_count():
        raise ValueError(
            f"RNG state holds {len(part)} CUDA stream(s) but this host has "
            f"{torch.cuda.device_count()} device(s)"
        )
    for tensor in part:
        if tensor.dtype != torch.uint8 or tensor.dim() != 1:
            raise ValueError("RNG state's cuda part must hold 1-D uint8 tensors")
    return list(part)

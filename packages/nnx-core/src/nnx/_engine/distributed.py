"""Multi-process training on torch.distributed (DDP): ``model.train(params, distributed=DDP())``.

Launch with ``torchrun``; NNx joins (or, under torchrun, creates) the default
process group and wraps ``model.net`` in
``torch.nn.parallel.DistributedDataParallel`` for the training forward only,
so ``model.net``, its parameter names and every checkpoint stay unprefixed.

What each rank does:

* **Data.** A map-style DataLoader gets a ``DistributedSampler`` (a sampler
  the user already made distributed is kept); a list of batches is dealt out
  round-robin. Every epoch's index reaches ``set_epoch``, so a resumed run
  draws what the uninterrupted run would.
* **Gradients.** DDP averages them across ranks; the update engine and the
  default step then rescale by the global denominator, so a window is the
  update of the union of every rank's microbatches.
* **Records.** Validation runs the whole validation set on every rank (the
  weights are identical, so every rank gets the exact single-process value);
  the whole-epoch training summary is reduced as sums and counts; rank 0's
  epoch record is broadcast, so BEST, EarlyStopping, plateau schedules and
  ``should_stop`` decide the same everywhere.
* **Persistence** is rank 0's: one run directory, one history, one set of
  checkpoints; the other ranks write nothing.
"""

from __future__ import annotations

import datetime
import gc
import inspect
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from nnx._foundation.records import NNIterationDataPoint
from nnx._foundation.validation import POSITIVE, check_choice, check_optional_real, check_real
from nnx._persistence.run_history import EagerHistory, open_history

if TYPE_CHECKING:
    from nnx._persistence.run import NNRun

__all__ = ["DDP", "DistributedSession", "MemoryHistory"]

BACKENDS = ("gloo", "nccl")
T = TypeVar("T")


@dataclass(frozen=True)
class DDP:
    """How to train across processes. ``backend=None`` picks NCCL on CUDA, else gloo.

    The other fields are DistributedDataParallel's own knobs; ``timeout_s``
    bounds every collective, so a dead rank makes the others fail instead of
    waiting forever.
    """

    backend: str | None = None
    find_unused_parameters: bool = False
    static_graph: bool = False
    bucket_cap_mb: float | None = None
    broadcast_buffers: bool = True
    gradient_as_bucket_view: bool = False
    timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.backend is not None:
            check_choice("DDP.backend", self.backend, BACKENDS)
        for name in ("find_unused_parameters", "static_graph", "broadcast_buffers",
                     "gradient_as_bucket_view"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"DDP.{name} must be a bool; got {getattr(self, name)!r}")
        check_optional_real("DDP.bucket_cap_mb", self.bucket_cap_mb, POSITIVE,
                            none_means="torch's default")
        check_real("DDP.timeout_s", self.timeout_s, POSITIVE)


class DistributedSession:
    """One rank's view of the process group for the length of a fit (the loop's
    :class:`~nnx._engine.process_session.ProcessSession` under DDP)."""

    spec_type: ClassVar[type[Any]] = DDP  # FSDP's session takes an FSDP (nnx._engine.fsdp)
    # Whether backward itself reduces the gradients over the ranks (FSDP's), or the
    # update engine sums them at a window's close (DDP's, under no_sync).
    reduces_in_backward: ClassVar[bool] = False

    def __init__(self, spec: Any, device: torch.device) -> None:
        if not isinstance(spec, self.spec_type):
            raise TypeError(f"distributed must be an nnx.distributed.DDP or FSDP; got "
                            f"{type(spec).__name__}")
        if not dist.is_available():
            raise RuntimeError("this torch build has no torch.distributed")
        self.spec, self.device = spec, device
        self.owns_group = not dist.is_initialized()
        if self.owns_group:
            missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
                       if v not in os.environ]
            if missing:
                raise RuntimeError(f"distributed={type(spec).__name__}(...) needs a launcher: run "
                                   f"the script with "
                                   f"torchrun (missing {', '.join(missing)} in the environment)")
            backend = spec.backend or ("nccl" if device.type == "cuda" else "gloo")
            dist.init_process_group(backend,
                                    timeout=datetime.timedelta(seconds=spec.timeout_s))
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.is_main = self.rank == 0

    def close(self, *, completed: bool = False) -> None:
        """Leave the group NNx created. After a completed fit every rank first meets at a
        barrier: a rank that tore its end of the group down (and exited) while a peer was
        still inside its last collective or its own teardown left gloo's threads to be
        killed at interpreter exit (an abort, "terminate called without an active
        exception"). After a failure no barrier is taken: a dead peer would make it wait
        for the whole timeout.

        The caller drops its references to the DDP wrapper first; the wrapper sits in
        reference cycles (its hooks), so a collection runs here. Otherwise it, its reducer
        and the gloo work they hold outlive the group until interpreter finalization,
        whose teardown of that work aborts the process."""
        gc.collect()
        if self.owns_group and dist.is_initialized():
            if completed:
                dist.barrier()
            dist.destroy_process_group()

    @property
    def distributed(self) -> DistributedSession:
        """What the per-batch code sums gradients and counts through: this session."""
        return self

    def verbosity(self, verbose: bool | None) -> bool | None:
        """Only rank 0 shows progress."""
        return verbose if self.is_main else False

    def history(self, run: NNRun, journal: Any) -> Any:
        """Rank 0 writes the run's history; the others keep theirs in memory."""
        return open_history(run, journal) if self.is_main else MemoryHistory(run)

    def on_main(self, action: Callable[[], T], what: str) -> T | None:
        """Run ``action`` on rank 0 and tell every rank whether it failed, so none goes
        on (or waits in a collective forever) after rank 0 could not persist."""
        failure: BaseException | None = None
        result: T | None = None
        if self.is_main:
            try:
                result = action()
            except BaseException as exc:
                failure = exc
        message = self.broadcast(None if failure is None else repr(failure))
        if failure is not None:
            raise failure
        if message is not None:
            raise RuntimeError(f"rank 0 could not {what}: {message}")
        return result

    # -- the model --------------------------------------------------------------------
    def wrap(self, net: torch.nn.Module, optimizers: Any = ()) -> torch.nn.Module:
        """The DDP wrapper the training forward goes through (construction broadcasts
        rank 0's parameters and buffers, so every rank starts from the same weights);
        the ``optimizers`` keep ``net``'s own parameters."""
        from torch.nn.parallel import DistributedDataParallel

        kwargs: dict[str, Any] = {}
        if self.spec.bucket_cap_mb is not None:
            kwargs["bucket_cap_mb"] = self.spec.bucket_cap_mb
        # Newer torch renames the per-forward buffer sync; both start from rank 0's buffers.
        accepted = inspect.signature(DistributedDataParallel.__init__).parameters
        sync = "forward_sync_buffers" if "forward_sync_buffers" in accepted else (
            "broadcast_buffers")
        kwargs[sync] = self.spec.broadcast_buffers
        device_ids = [self.device.index or 0] if self.device.type == "cuda" else None
        return DistributedDataParallel(
            net, device_ids=device_ids, find_unused_parameters=self.spec.find_unused_parameters,
            static_graph=self.spec.static_graph,
            gradient_as_bucket_view=self.spec.gradient_as_bucket_view, **kwargs)

    def window_backward(self, net: torch.nn.Module, closes: bool) -> bool:
        """Prepare the default step's next backward; True when it must run even without a
        loss. DDP's wrapper reduces every backward: nothing to prepare."""
        return False

    # -- checkpoints ------------------------------------------------------------------
    def persisted(self, net: torch.nn.Module) -> Any:
        """What rank 0's commit reads the model from: every replica is whole."""
        return net

    def gather(self, net: torch.nn.Module, optimizers: Any, directory: Any) -> None:
        """Before a commit, on every rank: a replica has nothing to gather."""
        return None

    # -- data -------------------------------------------------------------------------
    def shard(self, loader: Any, seed: int | None) -> Any:
        """This rank's part of ``loader``."""
        from torch.utils.data import DataLoader, DistributedSampler, IterableDataset

        if isinstance(loader, (list, tuple)):
            if len(loader) % self.world_size:
                raise ValueError(f"a list of {len(loader)} batches cannot be dealt evenly to "
                                 f"{self.world_size} ranks (every rank must take the same "
                                 "number of steps); pass a DataLoader, which is sharded by a "
                                 "DistributedSampler")
            return list(loader[self.rank::self.world_size])
        if not isinstance(loader, DataLoader):
            raise TypeError(f"under DDP the training loader must be a DataLoader or a list of "
                            f"batches; got {type(loader).__name__}")
        if isinstance(loader.dataset, IterableDataset):
            return loader  # an iterable dataset shards itself (get_worker_info / rank)
        if isinstance(loader.sampler, DistributedSampler):
            return loader  # the user's own distributed sampler is respected
        shuffle = not isinstance(loader.sampler, torch.utils.data.SequentialSampler)
        if loader.batch_sampler is not None and not isinstance(
                loader.batch_sampler, torch.utils.data.BatchSampler):
            raise ValueError("under DDP a DataLoader with a custom batch_sampler needs a "
                             "distributed one of your own")
        generator = getattr(loader.sampler, "generator", None)
        base_seed = seed if seed is not None else (
            generator.initial_seed() if isinstance(generator, torch.Generator) else 0)
        sampler: DistributedSampler[Any] = DistributedSampler(
            loader.dataset, num_replicas=self.world_size, rank=self.rank, shuffle=shuffle,
            seed=base_seed, drop_last=loader.drop_last)
        return DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler,
                          num_workers=loader.num_workers, collate_fn=loader.collate_fn,
                          pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                          timeout=loader.timeout, worker_init_fn=loader.worker_init_fn,
                          persistent_workers=loader.persistent_workers)

    # -- collectives ------------------------------------------------------------------
    def sum(self, values: Iterable[float]) -> list[float]:
        """Elementwise sums across ranks (float64 on the CPU for gloo, the device for NCCL)."""
        device = self.device if dist.get_backend() == "nccl" else torch.device("cpu")
        tensor = torch.tensor(list(values), dtype=torch.float64, device=device)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return [float(v) for v in tensor.cpu()]

    def sum_gradients(self, params: list[torch.Tensor]) -> None:
        """Sum every parameter's gradient over the ranks in one flat all-reduce. A
        parameter no rank has a gradient for keeps ``grad=None`` (an optimizer skips it)."""
        if not params:
            return
        device = params[0].device
        parts = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).to(
            device=device, dtype=torch.float32) for p in params]
        present = torch.tensor([float(p.grad is not None) for p in params], device=device)
        flat = torch.cat([*parts, present])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p in params:
            n = p.numel()
            p_flat, offset = flat[offset:offset + n], offset + n
            p.grad = p_flat.view_as(p).to(p.dtype).clone()
        for p, seen in zip(params, flat[offset:].tolist(), strict=True):
            if seen == 0:
                p.grad = None

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any rank."""
        return self.sum([1.0 if flag else 0.0])[0] > 0

    def broadcast(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank."""
        box = [value if self.is_main else None]
        dist.broadcast_object_list(box, src=0, device=self._object_device())
        return box[0]

    def _object_device(self) -> torch.device | None:
        return self.device if dist.get_backend() == "nccl" else None

    def reduce_state(self, obj: Any) -> None:
        """Sum every numeric leaf of ``obj`` (numbers and arrays, found by walking its
        attributes, dicts and lists in a fixed order) across ranks, in place.

        The whole-epoch summaries and the built-in metrics keep only sums and
        counts, so their reduced state is the state of the union of all ranks'
        batches; a declared metric must keep sums to be reduced exactly.
        """
        leaves: list[tuple[Any, Any, Any]] = []  # (container, key, value)
        _collect(obj, leaves, set())
        flat: list[float] = []
        for _, _, value in leaves:
            flat.extend(np.asarray(value, dtype=np.float64).ravel().tolist())
        if not flat:
            return
        summed = iter(self.sum(flat))
        for container, key, value in leaves:
            array = np.asarray(value)
            new = np.array([next(summed) for _ in range(array.size)]).reshape(array.shape)
            if isinstance(value, np.ndarray):
                value[...] = new.astype(value.dtype)
                continue
            scalar = type(value)(new.item()) if isinstance(value, (int, float)) else new.item()
            if isinstance(container, (dict, list)):
                container[key] = scalar
            else:
                setattr(container, key, scalar)


# Attributes that point at configuration, never at accumulated state.
_NOT_STATE = frozenset({"adapter", "loss_fn", "task", "spec", "config"})


def _is_state_object(value: Any) -> bool:
    """A plain object holding accumulated state (not a module, a class, an enum, a
    function or a params object with a ``state()``)."""
    import enum

    return (hasattr(value, "__dict__") and not callable(value)
            and not isinstance(value, (torch.nn.Module, type, enum.Enum))
            and not callable(getattr(value, "state", None)))


def _collect(obj: Any, leaves: list[tuple[Any, Any, Any]], seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, tuple):  # immutable: only the objects inside can hold state
        for item in obj:
            if isinstance(item, (dict, list, tuple)) or _is_state_object(item):
                _collect(item, leaves, seen)
        return
    if isinstance(obj, dict):
        items: Iterable[tuple[Any, Any]] = sorted(obj.items(), key=lambda kv: str(kv[0]))
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        items = sorted(vars(obj).items())
    for key, value in items:
        if isinstance(value, bool) or key in _NOT_STATE:
            continue
        if isinstance(value, (int, float)) or (
                isinstance(value, np.ndarray) and value.dtype.kind in "iuf"):
            leaves.append((obj, key, value))
        elif isinstance(value, (dict, list, tuple)) or _is_state_object(value):
            _collect(value, leaves, seen)


class MemoryHistory(EagerHistory):
    """A non-zero rank's history: the same protocol, kept in memory, never written."""

    def commit(self, epoch: int, idp: NNIterationDataPoint) -> None:
        pass

    def rollback(self, epoch: int) -> None:
        self._drop(epoch)


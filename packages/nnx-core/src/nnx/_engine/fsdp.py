"""Sharded training on torch.distributed (FSDP2): ``model.train(params, distributed=FSDP())``.

A second distributed session beside DDP's (:mod:`nnx._engine.distributed`): the same
ranks, data sharding, agreements and rank-0 persistence, but instead of a replica per
rank, ``torch.distributed.fsdp.fully_shard`` shards each shard unit and the root over a
1-D DeviceMesh, in place: ``model.net`` keeps its class's names and its parameter names,
and its parameters become DTensors holding this rank's shard.

What differs from DDP, and where it is answered:

* **Gradients.** FSDP reduce-scatters (averages) gradients in backward, as DDP
  all-reduces (averages) them, so the default step's rescaling is the same. Inside an
  accumulation window gradient sync is off and the window's last backward reduces
  what the earlier ones left unsharded (:meth:`FSDPSession.window_backward`).
* **Checkpoints.** Every rank joins the gather of the full model state before a
  commit (:meth:`FSDPSession.gather`); rank 0 writes it through :class:`FullStateNet`,
  so LAST holds full, unsharded weights that a single process loads. The optimizer
  state is saved sharded: every rank writes its part with torch.distributed.checkpoint,
  and rank 0's commit makes the directory part of the point
  (:mod:`nnx._persistence.optimizer_shards`).
* **Resume.** Every rank reads the checkpoint and loads its full state through
  :class:`FullStateNet`, keeping its shard: the same point resumes at any world size,
  and a single-process or DDP run resumes sharded (and an FSDP run in one process).
* **Objectives.** A one-microbatch window agrees on its denominators before its one
  backward, which FSDP reduces.
* **Objectives accumulating** over several microbatches reduce each term's backward
  at once and keep the reduced gradients apart until the window's close (the update
  engine's per-term buffers).
* **On the CPU** the GPU-only policies are refused (:func:`check_fsdp_fit`) before
  anything is reserved.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import nn

# The composable activation checkpoint works in place, so parameter names stay the net's.
from torch.distributed._composable.checkpoint_activation import checkpoint
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

from nnx._engine.distributed import BACKENDS, DistributedSession
from nnx._engine.loop_state import param_names
from nnx._foundation.validation import POSITIVE, check_choice, check_real
from nnx._persistence.optimizer_shards import MARKER, STAGING_PREFIX, StagedShards, digests

__all__ = ["FSDP", "FSDPSession", "FSDPUnsupportedError", "FullStateNet", "check_fsdp_fit",
           "shard_units"]

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class FSDPUnsupportedError(NotImplementedError):
    """What a fit under ``distributed=FSDP(...)`` cannot do on its device, raised before
    anything is reserved."""


@dataclass(frozen=True)
class FSDP:
    """How to train sharded across processes (FSDP2). Runtime-only: no field reaches the
    run id.

    ``units``: the submodules sharded as one unit each (module names as
    ``named_modules`` spells them, or module classes); None shards every
    parameter-holding element of the net's ``nn.ModuleList``s (the built-in nets' layers
    and blocks, ``TransformerNN``'s blocks). The root is always a unit of its own.
    ``reshard_after_forward``: free the gathered parameters after each unit's forward
    (less memory, one more all-gather in backward). ``param_dtype`` / ``reduce_dtype``:
    the mixed-precision policy (CUDA only). ``cpu_offload``: keep the sharded parameters,
    gradients and optimizer state in host memory (CUDA only). ``activation_checkpointing``:
    recompute each unit's activations in backward. ``backend`` (None: NCCL on CUDA, else
    gloo) and ``timeout_s`` as in :class:`~nnx._engine.distributed.DDP`.
    """

    units: tuple[str | type[nn.Module], ...] | None = None
    reshard_after_forward: bool = True
    param_dtype: torch.dtype | None = None
    reduce_dtype: torch.dtype | None = None
    cpu_offload: bool = False
    activation_checkpointing: bool = False
    backend: str | None = None
    timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.units is not None:
            units = tuple(self.units) if isinstance(self.units, (list, tuple)) else None
            if not units or not all((isinstance(u, str) and u) or (
                    isinstance(u, type) and issubclass(u, nn.Module)) for u in units):
                raise ValueError(f"FSDP.units must be None or a non-empty sequence of module "
                                 f"names and nn.Module classes; got {self.units!r}")
            object.__setattr__(self, "units", units)
        for name in ("reshard_after_forward", "cpu_offload", "activation_checkpointing"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"FSDP.{name} must be a bool; got {getattr(self, name)!r}")
        for name in ("param_dtype", "reduce_dtype"):
            value = getattr(self, name)
            if value is not None and value not in _DTYPES:
                raise ValueError(f"FSDP.{name} must be None or one of "
                                 f"{', '.join(map(str, _DTYPES))}; got {value!r}")
        if self.backend is not None:
            check_choice("FSDP.backend", self.backend, BACKENDS)
        check_real("FSDP.timeout_s", self.timeout_s, POSITIVE)


def check_fsdp_fit(spec: FSDP, device: torch.device) -> None:
    """Refuse what FSDP cannot do on ``device``, before any process group is joined or
    anything is reserved."""
    if device.type == "cuda":
        return
    needs_gpu = [name for name, on in (
        ("param_dtype", spec.param_dtype is not None),
        ("reduce_dtype", spec.reduce_dtype is not None),
        ("cpu_offload", spec.cpu_offload)) if on]
    if needs_gpu:
        raise FSDPUnsupportedError(
            f"FSDP({', '.join(needs_gpu)}=...) needs a CUDA model (torch's mixed-precision "
            f"and offload policies move tensors to and from a GPU); the model is on {device}")


def shard_units(net: nn.Module, units: Sequence[str | type[nn.Module]] | None
                ) -> list[nn.Module]:
    """The submodules sharded as units, innermost first (fully_shard goes bottom-up)."""
    named = list(net.named_modules())
    if units is None:
        chosen = {id(child) for _, m in named if isinstance(m, nn.ModuleList)
                  for child in m if any(True for _ in child.parameters())}
    else:
        names = {u for u in units if isinstance(u, str)}
        missing = sorted(names - {n for n, _ in named if n})
        if missing:
            raise ValueError(f"FSDP.units names modules the net does not have: {missing}")
        types = tuple(u for u in units if isinstance(u, type))
        chosen = {id(m) for n, m in named if n and (n in names or isinstance(m, types))}
    return [m for _, m in reversed(named) if id(m) in chosen and m is not net]


_FULL = StateDictOptions(full_state_dict=True)


class FullStateNet:
    """The sharded net as checkpoints see it: whole. A commit reads the full state the
    last :meth:`FSDPSession.gather` collected (rank 0 writes it); a resume loads a
    checkpoint's full state into it on every rank, each keeping its own shard, so one
    checkpoint resumes at any world size, and a single-process or DDP run's under FSDP.
    The parameter names are the live net's (the training state's optimizer topology)."""

    def __init__(self, net: nn.Module, main: bool) -> None:
        self.net, self.main = net, main
        self.weights: dict[str, torch.Tensor] = {}
        # Each optimizer's marker, and the sharded states the markers name (the last
        # gather's): the commit writes them (nnx._persistence.optimizer_shards).
        self.optimizers: dict[int, dict[str, Any]] = {}
        self.optimizer_shards: StagedShards | None = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The full weights the last commit gathered (rank 0's commit, and the callbacks'
        ``ctx.model_state_dict()``); refused where there are none, rather than empty."""
        if not self.main:
            raise RuntimeError("under FSDP the full weights are gathered on rank 0 only (the "
                               "rank that writes files); read them there")
        if not self.weights:
            raise RuntimeError("under FSDP no commit has gathered the full weights yet: read "
                               "them from work queued with ctx.defer, which runs after the "
                               "epoch's commit")
        return self.weights

    def named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        return self.net.named_parameters()

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """What a checkpoint's training state holds for ``optimizer``: a marker naming its
        sharded state, which readers resolve to the full state in a single process's
        format (:func:`nnx._persistence.optimizer_shards.resolve`)."""
        return self.optimizers[id(optimizer)]

    def load_state_dict(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Every rank loads the full ``weights``; each parameter keeps this rank's shard."""
        set_model_state_dict(self.net, dict(weights), options=_FULL)

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer,
                             state: Mapping[str, Any]) -> None:
        """``optimizer``'s full saved state (a single process's format), sharded as the
        net's parameters are."""
        named = _named(state, param_names(self.net, optimizer))
        set_optimizer_state_dict(self.net, optimizer, named, options=_FULL)


def _named(numbered: Mapping[str, Any], names: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The inverse of :func:`nnx._persistence.optimizer_shards.numbered`: a single
    process's optimizer state keyed by the parameter names of each group (as
    torch.distributed.checkpoint reads a full state)."""
    if len(names) != len(numbered["param_groups"]):
        raise ValueError(f"the saved optimizer state has {len(numbered['param_groups'])} "
                         f"parameter groups; the optimizer has {len(names)}")
    name_of: dict[int, str] = {}
    groups = []
    for group, group_names in zip(numbered["param_groups"], names, strict=True):
        name_of.update(zip(group["params"], group_names, strict=True))
        groups.append({**group, "params": list(group_names)})
    return {"state": {name_of[int(i)]: value for i, value in numbered["state"].items()},
            "param_groups": groups}


class FSDPSession(DistributedSession):
    """One rank's view of the process group for a sharded fit (the loop's
    :class:`~nnx._engine.process_session.ProcessSession` under FSDP)."""

    spec_type: ClassVar[type[Any]] = FSDP
    reduces_in_backward: ClassVar[bool] = True
    spec: FSDP

    def __init__(self, spec: FSDP, device: torch.device) -> None:
        super().__init__(spec, device)
        self.mesh = init_device_mesh(device.type, (self.world_size,))
        self.full: FullStateNet | None = None

    # -- the model --------------------------------------------------------------------
    def wrap(self, net: nn.Module, optimizers: Sequence[torch.optim.Optimizer] = ()
             ) -> nn.Module:
        """Shard ``net`` in place: rank 0's weights first reach every rank (as DDP's
        construction does), then each unit and the root are sharded over the mesh, and
        the ``optimizers`` (built before, on the whole parameters) take the sharded ones
        in their place."""
        before = {id(p): name for name, p in net.named_parameters()}
        with torch.no_grad():
            for tensor in net.state_dict().values():
                dist.broadcast(tensor, src=0)
        spec = self.spec
        kwargs: dict[str, Any] = {"mesh": self.mesh,
                                  "reshard_after_forward": spec.reshard_after_forward}
        if spec.param_dtype is not None or spec.reduce_dtype is not None:
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=spec.param_dtype,
                                                       reduce_dtype=spec.reduce_dtype)
        if spec.cpu_offload:
            kwargs["offload_policy"] = CPUOffloadPolicy()
        for unit in shard_units(net, spec.units):
            if spec.activation_checkpointing:
                checkpoint(unit)
            fully_shard(unit, **kwargs)
        fully_shard(net, **kwargs)
        # fully_shard registers new (DTensor) parameters: an optimizer still holding the
        # replaced ones would step tensors the net no longer uses. The optimizers hold no
        # state yet (a resume loads it later, sharded: FullStateNet), so swapping is all
        # it takes.
        after = dict(net.named_parameters())
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                group["params"] = [after[before[id(p)]] if id(p) in before else p
                                   for p in group["params"]]
        return net

    def window_backward(self, net: nn.Module, closes: bool) -> bool:
        """Gradient sync off inside a window, on at its last microbatch, whose backward
        must then run even without a loss: it reduces what the earlier ones left."""
        net.set_requires_gradient_sync(closes)  # type: ignore[operator]
        return closes

    # -- checkpoints ------------------------------------------------------------------
    def persisted(self, net: nn.Module) -> Any:
        self.full = FullStateNet(net, self.is_main)
        return self.full

    def gather(self, net: nn.Module, optimizers: Sequence[torch.optim.Optimizer],
               directory: Path) -> None:
        """Every rank joins: rank 0 receives the full model state on the CPU for its
        commit, and every rank writes its part of each optimizer's state with
        torch.distributed.checkpoint into one staging directory under ``directory``,
        which rank 0's commit makes the point's (:mod:`nnx._persistence.optimizer_shards`).
        No rank ever holds another's optimizer state."""
        weights = get_model_state_dict(
            net, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        shards = self._save_shards(net, optimizers, directory)
        if self.full is not None and shards is not None:
            self.full.weights = {k: v for k, v in weights.items()
                                 if isinstance(v, torch.Tensor)}
            self.full.optimizers = {id(opt): {MARKER: _key(i)}
                                    for i, opt in enumerate(optimizers)}
            self.full.optimizer_shards = shards

    def _save_shards(self, net: nn.Module, optimizers: Sequence[torch.optim.Optimizer],
                     directory: Path) -> StagedShards | None:
        """DCP's save of every optimizer's sharded state (each rank its own files, rank 0
        the metadata); rank 0 gets the staging directory and every file's digest, each
        hashed by the rank that wrote it. None on the other ranks."""
        from torch.distributed.checkpoint.filesystem import FileSystemWriter
        from torch.distributed.checkpoint.state_dict_saver import save

        chosen = [f"{STAGING_PREFIX}{uuid.uuid4().hex}" if self.is_main else None]
        dist.broadcast_object_list(chosen, src=0)
        staging = directory / str(chosen[0])
        states = {_key(i): get_optimizer_state_dict(net, opt) for i, opt in enumerate(optimizers)}
        save(states, storage_writer=FileSystemWriter(staging, sync_files=True))
        mine = sorted(n for n in os.listdir(staging) if n.startswith(f"__{self.rank}_"))
        found: list[Any] = [None] * self.world_size
        dist.gather_object(digests(staging, mine), found if self.is_main else None, dst=0)
        if not self.is_main:
            return None
        files = digests(staging, [".metadata"])
        for part in found:
            files.update(part)
        return StagedShards(staging, files)


def _key(index: int) -> str:
    """An optimizer's key among a commit's sharded states (the fit's optimizers, in order)."""
    return f"optimizer.{index}"

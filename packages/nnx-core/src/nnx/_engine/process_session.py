"""Which process persists a fit and how processes agree (spec §6.1; nnx.distributed).

The fit loop never asks which rank it is: it holds one :class:`ProcessSession` and
calls it at the few points where processes must agree. A single-process fit holds a
:class:`SingleProcess`, whose every answer is the trivial one (its agreement is the
process's own value, it persists everything, it wraps nothing); a DDP fit holds a
:class:`~nnx._engine.distributed.DistributedSession`; a sharded fit holds an
:class:`~nnx._engine.fsdp.FSDPSession`, one more session, not a branch in the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from nnx._persistence.run_history import open_history

if TYPE_CHECKING:
    import torch

    from nnx._engine.distributed import DistributedSession
    from nnx._persistence.run import NNRun

__all__ = ["ProcessSession", "SingleProcess", "open_session"]

T = TypeVar("T")


class ProcessSession(Protocol):
    """One process's part in a fit."""

    rank: int
    world_size: int
    is_main: bool  # this process persists the run (its directory, history, checkpoints)

    @property
    def distributed(self) -> DistributedSession | None:
        """What the per-batch code sums across processes through; None alone."""
        ...

    def shard(self, loader: Any, seed: int | None) -> Any:
        """This process's part of the training loader."""
        ...

    def verbosity(self, verbose: bool | None) -> bool | None:
        """The progress display this process shows (only the main process prints)."""
        ...

    def wrap(self, net: torch.nn.Module, optimizers: Sequence[torch.optim.Optimizer] = ()
             ) -> torch.nn.Module | None:
        """The module the training forward goes through, None for ``net`` itself
        (``optimizers``: the fit's, which a sharded net's new parameters replace in)."""
        ...

    def history(self, run: NNRun, journal: Any) -> Any:
        """The run's history as this process keeps it (only the main one writes it)."""
        ...

    def persisted(self, net: torch.nn.Module) -> Any:
        """The model as checkpoints see it: what the main process's commit reads the
        model's state from and a resume loads a checkpoint's state into (``net``, or a
        sharded fit's full-state view)."""
        ...

    def gather(self, net: torch.nn.Module, optimizers: Sequence[torch.optim.Optimizer],
               directory: Path) -> None:
        """Called on every process before a commit reads the model's state (``directory``:
        the run's checkpoints, where a sharded fit's ranks write their optimizer shards)."""
        ...

    def on_main(self, action: Callable[[], T], what: str) -> T | None:
        """Run ``action`` where the run is persisted; every process raises if it failed
        (``what`` completes "rank 0 could not ..."). Others get None."""
        ...

    def any(self, flag: bool) -> bool:
        """True everywhere when ``flag`` is true in any process."""
        ...

    def broadcast(self, value: Any) -> Any:
        """The main process's ``value``, everywhere."""
        ...

    def reduce_state(self, obj: Any) -> None:
        """Sum ``obj``'s numeric state over the processes, in place."""
        ...

    def close(self, *, completed: bool = False) -> None:
        """Leave the session at the end of the fit."""
        ...


class SingleProcess:
    """The session of a fit in one process: nothing to agree on, nothing to wrap."""

    rank, world_size, is_main = 0, 1, True
    distributed = None

    def shard(self, loader: Any, seed: int | None) -> Any:
        return loader

    def verbosity(self, verbose: bool | None) -> bool | None:
        return verbose

    def wrap(self, net: torch.nn.Module, optimizers: Sequence[torch.optim.Optimizer] = ()
             ) -> torch.nn.Module | None:
        return None

    def history(self, run: NNRun, journal: Any) -> Any:
        return open_history(run, journal)

    def persisted(self, net: torch.nn.Module) -> Any:
        return net

    def gather(self, net: torch.nn.Module, optimizers: Sequence[torch.optim.Optimizer],
               directory: Path) -> None:
        return None

    def on_main(self, action: Callable[[], T], what: str) -> T | None:
        return action()

    def any(self, flag: bool) -> bool:
        return flag

    def broadcast(self, value: Any) -> Any:
        return value

    def reduce_state(self, obj: Any) -> None:
        return None

    def close(self, *, completed: bool = False) -> None:
        return None


def open_session(distributed: Any, device: torch.device) -> ProcessSession:
    """The session ``train(distributed=...)`` asks for: DDP's, FSDP's, or a single
    process. FSDP's refusals (what needs a GPU) come first, before any process group."""
    if distributed is None:
        return SingleProcess()
    from nnx._engine.distributed import DistributedSession  # on first use (issue 38)
    from nnx._engine.fsdp import FSDP, FSDPSession, check_fsdp_fit  # likewise: torch's FSDP

    if isinstance(distributed, FSDP):
        check_fsdp_fit(distributed, device)
        return FSDPSession(distributed, device)
    return DistributedSession(distributed, device)

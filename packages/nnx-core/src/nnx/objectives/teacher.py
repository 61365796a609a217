"""FrozenTeacher: the live teacher of distillation (spec §10.1), frozen, in eval, no grad.

``kd_objective`` and nnx-paradigms' distillation steps share it: the teacher (an
NNModel or an nn.Module) is validated at construction, frozen and put in eval by
:meth:`FrozenTeacher.freeze` (never before the run's checks could refuse it), and
every forward runs under ``torch.no_grad`` with the net in eval (a callback flipping
modes between epochs cannot put it back in train mode), outside the student's
autocast and in the teacher's own inference precision.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

__all__ = ["FrozenTeacher"]


class FrozenTeacher:
    """An NNModel or an nn.Module used as a frozen teacher by ``who`` (named in errors)."""

    def __init__(self, teacher: Any, who: str) -> None:
        net = getattr(teacher, "net", teacher)
        if not isinstance(net, nn.Module):
            raise TypeError(f"{who}'s teacher must be an NNModel or an nn.Module; got "
                            f"{type(teacher).__name__}")
        self.teacher, self.net, self.who = teacher, net, who
        self.frozen = False
        # What freeze() changed: each parameter's requires_grad and each module's mode.
        self._before: tuple[list[tuple[Any, bool]], list[tuple[nn.Module, bool]]] = ([], [])

    def freeze(self) -> None:
        """Freeze the teacher's parameters and put its net in eval (once)."""
        if not self.frozen:
            self._before = ([(p, p.requires_grad) for p in self.net.parameters()],
                            [(m, m.training) for m in self.net.modules()])
            for p in self.net.parameters():
                p.requires_grad_(False)
            self.net.eval()
            self.frozen = True

    def _thaw(self) -> None:
        """Undo freeze(): every flag and mode it changed goes back to what it was."""
        if self.frozen:
            params, modules = self._before
            for p, flag in params:
                p.requires_grad_(flag)
            for m, mode in modules:
                m.training = mode
            self._before, self.frozen = ([], []), False

    def check_student(self, student_net: nn.Module) -> None:
        """Refuse a teacher that is, or shares parameters with, the student's net.

        A teacher frozen before the student was known (the paradigm step factories
        freeze on call, spec §10.1) is thawed first, so a refusal leaves every
        ``requires_grad`` flag and module mode of both nets as it was before the freeze.
        """
        if self.net is student_net:
            problem = "the teacher must not be the student's own net"
        else:
            student = {id(p) for p in student_net.parameters()}
            shared = any(id(p) in student for p in self.net.parameters())
            problem = "the teacher shares parameters with the student" if shared else ""
        if problem:
            self._thaw()
            raise ValueError(f"{self.who}: {problem}")

    @contextlib.contextmanager
    def _precision(self, device: torch.device) -> Iterator[None]:
        """Leave the student's autocast and enter the teacher's own inference policy."""
        with torch.autocast(device_type=device.type, enabled=False):
            if hasattr(self.teacher, "inference_precision"):
                with self.teacher.inference_precision().autocast():
                    yield
            else:
                yield

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The teacher's raw output for ``x`` as float32 on ``x``'s device."""
        device = next(self.net.parameters(), torch.empty(0)).device
        with torch.no_grad(), self._precision(device):
            self.net.eval()
            if hasattr(self.teacher, "forward_raw"):
                out = self.teacher.forward_raw((x.to(self.teacher.device),))
            else:
                out = self.net(x.to(device))
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{self.who}: the teacher returned {type(out).__name__}, not a "
                            "logits tensor")
        return out.float().to(x.device)

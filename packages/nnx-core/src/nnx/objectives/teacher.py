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

    def freeze(self) -> None:
        """Freeze the teacher's parameters and put its net in eval (once)."""
        if not self.frozen:
            for p in self.net.parameters():
                p.requires_grad_(False)
            self.net.eval()
            self.frozen = True

    def check_student(self, student_net: nn.Module) -> None:
        """Refuse a teacher that is, or shares parameters with, the student's net."""
        if self.net is student_net:
            raise ValueError(f"{self.who}: the teacher must not be the student's own net")
        student = {id(p) for p in student_net.parameters()}
        if any(id(p) in student for p in self.net.parameters()):
            raise ValueError(f"{self.who}: the teacher shares parameters with the student")

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

"""The live teacher of the distillation steps (spec §10.1): frozen, in eval mode, no grad.

The factories freeze the teacher's parameters and set its net to eval when they are
called, so its weights cannot drift while the student trains; every forward runs
under ``torch.no_grad`` with the net in eval (a callback flipping modes between
epochs cannot put it back in train mode).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["FrozenTeacher"]


class FrozenTeacher:
    """An NNModel or an nn.Module used as a frozen teacher."""

    def __init__(self, teacher: Any, who: str) -> None:
        net = getattr(teacher, "net", teacher)
        if not isinstance(net, nn.Module):
            raise TypeError(f"{who}'s teacher must be an NNModel or an nn.Module; got "
                            f"{type(teacher).__name__}")
        self.teacher = teacher
        self.net = net
        self.who = who

    def freeze(self) -> None:
        for p in self.net.parameters():
            p.requires_grad_(False)
        self.net.eval()

    def check_student(self, student_net: nn.Module) -> None:
        """Refuse a teacher that is, or shares parameters with, the student's net."""
        if self.net is student_net:
            raise ValueError(f"{self.who}: the teacher must not be the student's own net")
        student = {id(p) for p in student_net.parameters()}
        if any(id(p) in student for p in self.net.parameters()):
            raise ValueError(f"{self.who}: the teacher shares parameters with the student")

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The teacher's raw output for ``x`` as float32 on ``x``'s device."""
        with torch.no_grad():
            self.net.eval()
            if hasattr(self.teacher, "forward_raw"):
                out = self.teacher.forward_raw((x.to(self.teacher.device),))
            else:
                device = next(self.net.parameters(), torch.empty(0)).device
                out = self.net(x.to(device))
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{self.who}: the teacher returned {type(out).__name__}, not a "
                            "logits tensor")
        return out.float().to(x.device)

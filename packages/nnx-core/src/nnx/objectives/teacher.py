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
import weakref
from typing import Any

import torch
from torch import nn

__all__ = ["FrozenTeacher"]

_NO_PARAMETER = torch.empty(0)  # a parameterless teacher runs on the CPU
_UNSET = object()


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
        # The student net the last check_student passed (weak: the teacher never keeps a
        # student alive, and a collected net's id can never match a new one).
        self._passed: weakref.ref[nn.Module] | None = None
        # Read per batch, built once: the teacher's modules (a list walks faster than
        # modules()' recursion) and its inference policy (its configuration is frozen).
        self._modules: list[nn.Module] | None = None
        self._policy: Any = _UNSET

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

    def check_student_once(self, student_net: nn.Module) -> None:
        """:meth:`check_student`, skipped for the net the last check passed (a step calls
        it per batch; the run checked that net before it built its optimizer)."""
        last = self._passed
        if last is None or last() is not student_net:
            self.check_student(student_net)

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
            self._passed = None
            self._thaw()
            raise ValueError(f"{self.who}: {problem}")
        self._passed = weakref.ref(student_net)

    def _inference_policy(self) -> Any:
        """The teacher's own reduced inference precision, or None (full precision)."""
        own = getattr(self.teacher, "inference_precision", None)
        if own is None:
            return None
        precision = own()
        return precision if precision.is_reduced else None

    def _forward(self, net: nn.Module, x: torch.Tensor, device: torch.device) -> Any:
        if hasattr(self.teacher, "forward_raw"):
            return self.teacher.forward_raw((x.to(self.teacher.device),))
        return net(x.to(device))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The teacher's raw output for ``x`` as float32 on ``x``'s device."""
        net = self.net
        device = next(net.parameters(), _NO_PARAMETER).device
        # Read the modes rather than set them: eval() writes every module's flag each
        # batch, and nothing but a callback flipping modes can have changed them.
        if self._modules is None:
            self._modules = list(net.modules())
        if any(m.training for m in self._modules):
            net.eval()
        if self._policy is _UNSET:
            self._policy = self._inference_policy()
        policy = self._policy
        autocast = torch.is_autocast_enabled(device.type)
        with torch.no_grad():
            if policy is None and not autocast:  # the common case: no context to build
                out = self._forward(net, x, device)
            else:
                with contextlib.ExitStack() as scope:
                    # Leave the student's autocast, enter the teacher's own policy; each
                    # only when there is one (a disabled autocast costs as much as a layer).
                    if autocast:
                        scope.enter_context(torch.autocast(device_type=device.type,
                                                           enabled=False))
                    if policy is not None:
                        scope.enter_context(policy.autocast())
                    out = self._forward(net, x, device)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{self.who}: the teacher returned {type(out).__name__}, not a "
                            "logits tensor")
        return out.float().to(x.device)

"""born_again_train (spec §10, Furlanello et al. 2018): iterated self-distillation.

Generation 0 trains with the model's own supervised step; each generation g ≥ 1
is a fresh student distilled from generation g − 1 through
``kd_train_step_factory`` (so the §3.1 NLL adaptation and finalize_step apply).
Every generation is its own run with its own run id: the run is salted
``born-again:gen<g>`` (appended to the caller's salt), so identical
configurations of successive generations never share a run directory. A
teacher is frozen when its student's factory is built and never changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from torch import nn

from nnx import NNModel, NNRun, NNTrainParams
from nnx.extend import check_count
from nnx.paradigms._classifier import refuse_teacher_records
from nnx.paradigms.kd import kd_train_step_factory
from nnx.paradigms.offline_distillation.dataset import TeacherLoader

__all__ = ["BornAgainGeneration", "born_again_train", "generation_salt"]


class BornAgainGeneration(NamedTuple):
    """One trained generation: its index, its model and its run."""

    generation: int
    model: NNModel
    run: NNRun


def generation_salt(generation: int, salt: str | None = None) -> str:
    """The salt of generation ``generation``'s run."""
    own = f"born-again:gen{generation}"
    return own if salt is None else f"{salt}/{own}"


def born_again_train(make_student: Callable[[int], NNModel], *, generations: int,
                     params: NNTrainParams, alpha: float = 0.5, temperature: float = 4.0,
                     callbacks: Callable[[int], Iterable[Any]] | None = None,
                     salt: str | None = None, root: str | os.PathLike[str] = "runs",
                     verbose: bool | None = None) -> list[BornAgainGeneration]:
    """Train ``generations`` generations; returns one :class:`BornAgainGeneration` (model
    and run) per generation, generation 0 first (``[-1].model`` is the final student).

    ``make_student(g)`` builds generation g's untrained NNModel (a new object each
    call, usually the same architecture); ``params`` trains every generation;
    ``callbacks(g)``, when given, returns generation g's callbacks (fresh objects:
    a callback's state must not leak across runs).
    """
    count = check_count("born_again_train generations", generations)
    if not callable(make_student):
        raise TypeError(f"born_again_train make_student must be a callable (generation) -> "
                        f"NNModel; got {type(make_student).__name__}")
    if not isinstance(params, NNTrainParams):
        raise TypeError(f"born_again_train params must be NNTrainParams; got "
                        f"{type(params).__name__}")
    if isinstance(params.train_loader, TeacherLoader):
        refuse_teacher_records(next(iter(params.train_loader)), "born_again_train")
    # Validates alpha and temperature before generation 0 trains.
    kd_train_step_factory(_Probe(), alpha=alpha, temperature=temperature)
    out: list[BornAgainGeneration] = []
    for g in range(count):
        student = make_student(g)
        if not isinstance(student, NNModel):
            raise TypeError(f"born_again_train make_student({g}) returned "
                            f"{type(student).__name__}, not an NNModel")
        if any(student is m.model or student.net is m.model.net for m in out):
            raise ValueError(f"born_again_train make_student({g}) returned an earlier "
                             "generation's model; build a new one each call")
        step = None if g == 0 else kd_train_step_factory(out[-1].model, alpha=alpha,
                                                         temperature=temperature)
        run = student.train(params, train_step_fn=step,
                            callbacks=list(callbacks(g)) if callbacks else None,
                            salt=generation_salt(g, salt), root=root, verbose=verbose)
        out.append(BornAgainGeneration(g, student, run))
    return out


class _Probe:
    """A parameterless stand-in teacher: checking the knobs freezes nothing real."""

    def __init__(self) -> None:
        self.net = nn.Identity()

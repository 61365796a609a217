"""check_distribution's one-list-per-name rules (issue 25, nnx._surface.name_rules): each
rule planted broken in a temporary installed distribution is refused with a message
naming it, the same distribution with the names announced passes, and nnx-core's own
entry points must be what its registries resolve."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import nnx
from nnx._foundation.catalog import GROUP_KINDS
from nnx._foundation.plugins import registry, versioned_registry
from nnx.enums.nets import Nets
from nnx.metrics.builtin import ACCURACY_V1
from nnx.testing import check_distribution
from nnx.transforms import unregister_transform

DIST = "nnx-fake-names"
SUB = "nnx.fakenames"

Plant = Callable[..., None]


def _refresh() -> None:
    for group in GROUP_KINDS:
        (registry(group) if group in ("nnx.exports", "nnx.nets")
         else versioned_registry(group)).refresh()


@pytest.fixture
def plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """Install (wheel-style, under tmp_path) a distribution whose files are ``files`` and
    whose entry points are ``entry_points``; ``nnx.fakenames`` imports for real."""
    nets_before = dict(Nets._members)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(nnx, "__path__", [*nnx.__path__, str(tmp_path / "nnx")])

    def install(files: dict[str, str], entry_points: str = "", *, name: str = DIST) -> None:
        info = tmp_path / f"{name.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n"
                                       "Requires-Dist: nnx-core\n")
        (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
        for path, text in files.items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(textwrap.dedent(text))
        (info / "RECORD").write_text("".join(f"{path},,\n" for path in files))
        importlib.invalidate_caches()
        _refresh()

    yield install
    for module in [m for m in sys.modules if m == SUB or m.startswith(f"{SUB}.")]:
        del sys.modules[module]
    nnx.__dict__.pop("FakeThing", None)  # nnx.__getattr__ caches what it resolved
    Nets._members.clear()
    Nets._members.update(nets_before)
    monkeypatch.undo()
    _refresh()


def _problems(distribution: str = DIST) -> list[str]:
    with pytest.raises(AssertionError) as info:
        check_distribution(distribution)
    return str(info.value).split("\n  ")[1:]


_KINDS = """
    from torch import nn

    from nnx.extend import MetricRegistration, NetRegistration, NNParams, register_transform

    __all__ = ["FAKE_METRIC", "FAKE_NET", "FakeThing", "materialize"]


    class FakeThing:
        pass


    def _accuracy(config):
        return None


    def materialize(net, config, *, source=True):
        return None


    FAKE_NET = NetRegistration(build=lambda params: nn.Identity(), params_class=NNParams)
    FAKE_METRIC = MetricRegistration(_accuracy, input="labels", mode="max")
    """


def test_registered_kinds_a_public_all_lists_without_an_entry_point_are_refused(plant):
    # The transform registered at import (the pattern the entry points replace) and the
    # export announced by another distribution's pyproject (the wrong list).
    plant({"nnx/fakenames/__init__.py": _KINDS + 'register_transform("fake.op", 1, '
                                                 'materialize)\n'})
    plant({}, "[nnx.exports]\nFakeThing = nnx.fakenames:FakeThing\n", name="nnx-fake-other")
    try:
        problems = _problems()
    finally:
        unregister_transform("fake.op", 1)
    lists = f"{SUB}.__all__ lists"
    assert problems == [
        f"{lists} FAKE_METRIC, a MetricRegistration, but no nnx.metrics entry point of "
        f"{DIST} names it",
        f"{lists} FAKE_NET, a NetRegistration, but no nnx.nets entry point of {DIST} names it",
        f"{lists} FakeThing, which `from nnx import FakeThing` reaches, but {DIST} has no "
        "nnx.exports entry point FakeThing",
        f"{lists} materialize, which a register call put in nnx.transforms as fake.op@v1, "
        f"but no nnx.transforms entry point of {DIST} names it: announce it in "
        "pyproject.toml",
    ]


def test_the_same_names_announced_through_entry_points_pass(plant):
    plant({"nnx/fakenames/__init__.py": _KINDS}, """
        [nnx.exports]
        FakeThing = nnx.fakenames:FakeThing
        [nnx.nets]
        FAKE_NET = nnx.fakenames:FAKE_NET
        [nnx.metrics]
        fake_accuracy@v1 = nnx.fakenames:FAKE_METRIC
        [nnx.transforms]
        fake.op@v1 = nnx.fakenames:materialize
        """)
    check_distribution(DIST)
    assert Nets.FAKE_NET.registration is sys.modules[SUB].FAKE_NET
    assert nnx.FakeThing is sys.modules[SUB].FakeThing


def test_an_entry_point_naming_no_public_name_or_no_registry_name_is_refused(plant):
    plant({"nnx/fakenames/__init__.py": _KINDS,
           "nnx/fakenames/ops.py": """
               __all__ = []


               def materialize_hidden(net, config, *, source=True):
                   return None
               """}, """
        [nnx.nets]
        FAKE_NET = nnx.fakenames:FAKE_NET
        [nnx.metrics]
        fake_accuracy@v1 = nnx.fakenames:FAKE_METRIC
        [nnx.exports]
        FakeThing = nnx.fakenames:FakeThing
        [nnx.transforms]
        fake.op@v1 = nnx.fakenames:materialize
        fake.hidden@v1 = nnx.fakenames.ops:materialize_hidden
        fake.op@1 = nnx.fakenames:materialize
        [nnx.exprts]
        Thing = nnx.fakenames:FakeThing
        """)
    assert _problems() == [
        "entry point nnx.exprts:Thing = nnx.fakenames:FakeThing is in a group nnx-core does "
        f"not read ({', '.join(GROUP_KINDS)})",
        "entry point nnx.transforms:fake.hidden@v1 = nnx.fakenames.ops:materialize_hidden "
        "names an object no public __all__ lists (nnx.fakenames.ops, nnx.fakenames): list "
        "it where users import it",
        "entry point nnx.transforms:fake.op@1 = nnx.fakenames:materialize does not resolve "
        "by its name: ValueError: an nnx.transforms entry point is named id@vN (acme.op@v1)",
    ]


def test_nnx_core_s_entry_points_must_be_what_its_registries_resolve(monkeypatch):
    check_distribution("nnx-core")  # its built-ins: private targets, registered objects
    explicit = versioned_registry("nnx.metrics")._names._explicit
    # register_builtin_metrics() puts back an equal registration: still core's metric.
    monkeypatch.setitem(explicit, "accuracy@v1", dataclasses.replace(ACCURACY_V1))
    check_distribution("nnx-core")
    # Another registration by a register call in this process wins over the entry point.
    other = type(ACCURACY_V1)(ACCURACY_V1.factory, input="labels", mode="max")
    monkeypatch.setitem(explicit, "accuracy@v1", other)
    assert _problems("nnx-core") == [
        "entry point nnx.metrics:accuracy@v1 = nnx.metrics.builtin:ACCURACY_V1 is not the "
        "nnx.metrics registry's accuracy@v1 (a register call in this process, or another "
        "distribution's entry point of the same name, wins over it)",
    ]

"""nnx.testing.check_distribution (issues 25 and 37): nnx-core passes its rules, and a planted
add-on breaking each rule is caught, every problem listed in one AssertionError."""

from __future__ import annotations

import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from nnx._foundation.plugins import MissingDistributionError, require_distribution
from nnx.testing import check_distribution


def _installed(dist: str) -> bool:
    try:
        metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


#: How the kit names nnx.lm's owner: by name where nnx-lm is installed (the workspace),
#: as an uninstalled distribution where it is not (nnx-core's lone-install CI cell).
LM_OWNER = " of nnx-lm" if _installed("nnx-lm") else " (of a distribution not installed here)"


def test_nnx_core_has_no_import_circle_and_its_entry_points_resolve():
    check_distribution("nnx-core")


_FILES = {
    "nnx/__init__.py": "",
    "nnx/fake/__init__.py": "from nnx.fake.a import Thing\n\n__all__ = ['Thing']\n",
    "nnx/fake/a.py": """
        import importlib

        from nnx._engine import steps
        from nnx.extend import NNParams, _hidden
        from nnx.fake import b
        from nnx.lm import TransformerNN
        from nnx.objectives import Objective
        import peft


        class Thing(NNParams):
            def validate(self):
                NNParams._validate(self)


        def reach():
            return importlib.import_module("nnx.lm")
        """,
    "nnx/fake/b.py": """
        def late():
            from nnx.fake import a
            return a


        def explained():
            # Lazy: a is heavy, and only this path needs it.
            from nnx.fake import a
            return a
        """,
}


def _plant(root: Path, files: dict[str, str] = _FILES, name: str = "nnx-fake-addon") -> None:
    """An installed (wheel-style) distribution ``name`` whose every file breaks a rule."""
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n"
                                   "Requires-Dist: nnx-core\n"
                                   "Requires-Dist: nnx-lm; extra == 'lm'\n")
    (info / "entry_points.txt").write_text(
        "[nnx.transforms]\nfake.thing@v1 = nnx_fake_addon_absent_module:thing\n")
    for file, text in files.items():
        path = root / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (info / "RECORD").write_text("".join(f"{file},,\n" for file in files))


def test_a_planted_add_on_breaking_every_rule_is_refused_with_each_problem(tmp_path,
                                                                            monkeypatch):
    _plant(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError) as info:
        check_distribution("nnx-fake-addon", forbid=("peft",))
    text = str(info.value)
    expected = [
        "import circle: nnx.fake.a <-> nnx.fake.b",
        "nnx.fake.b:3 -> nnx.fake.a: an import inside a function needs a comment",
        "nnx.fake.a:4 imports private nnx._engine",
        "nnx.fake.a:5 imports private nnx.extend._hidden of nnx-core",
        f"nnx.fake.a:7 imports nnx.lm{LM_OWNER}, which nnx-fake-addon does not require",
        "nnx.fake.a:8 imports nnx.objectives: an add-on imports core only through nnx and "
        "nnx.extend",
        "nnx.fake.a:9 imports peft, which this distribution must not use",
        "nnx.fake.a:14 reads NNParams._validate, a private member of core",
        "nnx.fake.a:18 calls import_module",
        "nnx-fake-addon ships nnx/__init__.py",
        "entry point nnx.transforms:fake.thing@v1 = nnx_fake_addon_absent_module:thing does "
        "not load",
        "nnx.fake does not import (ModuleNotFoundError",  # nnx.fake.a and .b: not again
    ]
    assert [e for e in expected if e not in text] == []
    assert "nnx.fake.b:9" not in text  # the explained lazy import passes
    assert text.count("\n  ") == len(expected)  # nothing else, each problem once


_REACHING = """
    from nnx.extend import TrainableModel


    class Own:
        __slots__ = ("_mine",)

        def __init__(self):
            self._cache = {}

        def _helper(self):
            return self._cache._asdict(), self._mine, self._value_


    def reach(model: TrainableModel, ctx, module):
        adapter = model._adapter
        slots = ctx._slots
        task = getattr(model, "_task")
        runtime = model._runtime
        ops = model.task_adapter

        hooks = module._forward_hooks  # torch's nn.Module hook table, said as the kit asks
        return adapter, slots, task, runtime, ops, hooks, Own()._helper()
    """


def test_a_planted_add_on_reaching_core_internals_through_objects_is_refused(tmp_path,
                                                                             monkeypatch):
    """Any ``_x`` the add-on does not define, however reached (issue 37): core's own
    (``_task``, ``_runtime``) always; another's only with a comment saying whose."""
    _plant(tmp_path, {"nnx/fakereach/__init__.py": _REACHING}, "nnx-fake-reach")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError) as info:
        check_distribution("nnx-fake-reach")
    text = str(info.value)
    unowned = "a private member nnx-fake-reach does not define: say whose it is in a comment"
    expected = [
        f"nnx.fakereach:16 reaches model._adapter, {unowned}",
        f"nnx.fakereach:17 reaches ctx._slots, {unowned}",
        'nnx.fakereach:18 reaches getattr(model, "_task"), a private member only nnx-core '
        "defines",
        "nnx.fakereach:19 reaches model._runtime, a private member only nnx-core defines",
        "nnx.fakereach:20 reaches model.task_adapter, core's view of the task: use "
        "nnx.extend.task_batch_ops(model)",
    ]
    assert [e for e in expected if e not in text] == []
    # Its own members and torch's explained read pass; nothing else is about members.
    # (and Python's documented underscore API: a named tuple's, enum's _sunder_ names)
    assert "_cache" not in text and "_mine" not in text and "_helper" not in text
    assert "_asdict" not in text and "_value_" not in text
    assert "_forward_hooks" not in text and text.count(" reaches ") == len(expected)


def test_require_distribution_imports_or_names_the_install():
    assert require_distribution("nnx-core", "nnx.extend").__name__ == "nnx.extend"
    with pytest.raises(MissingDistributionError,
                       match=r"nnx\.nosuch \(needed by FakeTuner\) is provided by the "
                             r"nnx-nosuch distribution.*pip install nnx-nosuch") as info:
        require_distribution("nnx-nosuch", "nnx.nosuch", needed_by="FakeTuner")
    assert info.value.distribution == "nnx-nosuch" and isinstance(info.value, ImportError)


def test_require_distribution_never_hides_a_broken_install(tmp_path, monkeypatch):
    (tmp_path / "nnx_broken_addon_module.py").write_text("import nnx_dependency_not_there\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="nnx_dependency_not_there") as info:
        require_distribution("nnx-broken", "nnx_broken_addon_module")
    assert not isinstance(info.value, MissingDistributionError)

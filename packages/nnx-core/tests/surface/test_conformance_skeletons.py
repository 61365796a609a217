"""The conformance kit checks a declared add-on skeleton (issue 37): a package whose
``__init__.py`` says ``__nnx_skeleton__ = {"kind": "tool", "verb": ...}`` has errors,
document, inputs, its verb and report modules; a planted wrong layout is refused."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import nnx
from nnx.testing import check_distribution

DIST = "nnx-fake-skeleton"
TOOL = 'NAME = 1\n__nnx_skeleton__ = {"kind": "tool", "verb": "tally"}\n'


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Install (wheel-style, under tmp_path) a distribution of the given files whose
    ``nnx.<sub>`` packages import for real."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(nnx, "__path__", [*nnx.__path__, str(tmp_path / "nnx")])
    subs: set[str] = set()

    def put(files: dict[str, str]) -> None:
        info = tmp_path / f"{DIST.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n"
                                       "Requires-Dist: nnx-core\n")
        for path, text in files.items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(textwrap.dedent(text))
            subs.add("nnx." + path.split("/")[1].removesuffix(".py"))
        (info / "RECORD").write_text("".join(f"{path},,\n" for path in files))
        importlib.invalidate_caches()

    yield put
    for module in [m for m in sys.modules if any(m == s or m.startswith(f"{s}.") for s in subs)]:
        del sys.modules[module]


def _tool(*names: str, init: str = TOOL, package: str = "faketool") -> dict[str, str]:
    files = {f"nnx/{package}/__init__.py": init}
    files.update({f"nnx/{package}/{name}.py": "" for name in names})
    return files


def test_a_tool_with_every_skeleton_module_passes(install) -> None:
    install(_tool("errors", "document", "inputs", "tally", "report", "extra"))
    check_distribution(DIST)


def test_a_tool_missing_skeleton_modules_is_refused_naming_each(install) -> None:
    # The old layout: documents.py (plural) and no inputs.py / report.py.
    install(_tool("errors", "documents", "tally"))
    with pytest.raises(AssertionError) as info:
        check_distribution(DIST)
    assert ("nnx.faketool is declared a tool but lacks document.py, inputs.py, report.py"
            in str(info.value))
    assert str(info.value).count("\n  ") == 1


def test_a_declaration_without_a_known_kind_or_a_verb_is_refused(install) -> None:
    files = {**_tool(init='__nnx_skeleton__ = {"kind": "gadget"}\n'),
             **_tool("errors", "document", "inputs", "report", package="fakeverbless",
                     init='__nnx_skeleton__ = {"kind": "tool"}\n'),
             **_tool(package="faketrainer", init='__nnx_skeleton__ = {"kind": "training"}\n')}
    install(files)
    with pytest.raises(AssertionError) as info:
        check_distribution(DIST)
    text = str(info.value)
    assert "nnx.faketool:1 __nnx_skeleton__ must be a literal dict whose kind is one of" in text
    assert "nnx.fakeverbless:1 __nnx_skeleton__ names no verb module" in text
    assert "faketrainer" not in text  # a training extension declares its kind only
    assert text.count("\n  ") == 2


def test_a_package_that_declares_nothing_is_not_checked(install) -> None:
    install(_tool("errors", init="NAME = 1\n"))
    check_distribution(DIST)

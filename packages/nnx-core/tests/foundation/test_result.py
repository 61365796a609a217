"""nnx.result (spec §27): Ok / Err, their combinators, no truth value, BoundaryError."""

from __future__ import annotations

import asyncio
import dataclasses
import textwrap
from pathlib import Path

import pytest

import nnx
from nnx.result import BoundaryError, Err, Ok, Result, UnwrapError

SRC = Path(nnx.__file__).resolve().parent.parent


def test_ok_and_err_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Ok(1).value = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Err("e").error = "f"  # type: ignore[misc]
    assert Ok(1) == Ok(1) and Ok(1) != Err(1) and Err("x") == Err("x")


def test_map_changes_only_an_ok_and_map_error_only_an_err() -> None:
    calls: list[object] = []

    def record(v: object) -> str:
        calls.append(v)
        return f"<{v}>"

    assert Ok(1).map(record) == Ok("<1>")
    err = Err("e")
    assert err.map(record) is err
    ok = Ok(2)
    assert ok.map_error(record) is ok
    assert Err("e").map_error(record) == Err("<e>")
    assert calls == [1, "e"]


def test_bind_and_recover_flatten_one_result() -> None:
    assert Ok(3).bind(lambda v: Ok(v * 2)) == Ok(6)
    assert Ok(3).bind(lambda v: Err(f"bad {v}")) == Err("bad 3")
    assert Err("e").bind(lambda v: Ok(v)) == Err("e")
    assert Err("e").recover(lambda e: Ok(len(e))) == Ok(1)
    assert Err("e").recover(lambda e: Err(e + "!")) == Err("e!")
    assert Ok(1).recover(lambda e: Ok(0)) == Ok(1)
    # exactly one level: a nested Result is the value, not flattened further
    assert Ok(1).bind(lambda v: Ok(Ok(v))) == Ok(Ok(1))


@pytest.mark.parametrize("method, result", [("bind", Ok(1)), ("recover", Err(1))])
def test_a_callback_returning_a_non_result_raises_type_error(method: str, result: object) -> None:
    with pytest.raises(TypeError, match=f"{method}\\(\\) must return Ok"):
        getattr(result, method)(lambda v: v + 1)


def test_unwrap_returns_the_value_or_raises_unwrap_error_carrying_the_error() -> None:
    assert Ok(None).unwrap() is None
    cause = ValueError("boom")
    with pytest.raises(UnwrapError) as info:
        Err(cause).unwrap()
    assert info.value.error is cause and info.value.__cause__ is cause
    typed = BoundaryError("artifact_missing", "inspect_bundle_result", {"path": "x"})
    with pytest.raises(UnwrapError) as info:
        Err(typed).unwrap()
    assert info.value.error is typed and info.value.__cause__ is None
    converted = BoundaryError("artifact_missing", "w", {}, cause)
    with pytest.raises(UnwrapError) as info:
        Err(converted).unwrap()
    assert info.value.error is converted and info.value.__cause__ is cause


@pytest.mark.parametrize("exc", [RuntimeError("cb"), KeyboardInterrupt(), asyncio.CancelledError()])
@pytest.mark.parametrize("call", [
    lambda f: Ok(1).map(f), lambda f: Err(1).map_error(f),
    lambda f: Ok(1).bind(f), lambda f: Err(1).recover(f)])
def test_nothing_is_caught_on_your_behalf(exc: BaseException, call) -> None:
    def raising(_: object) -> object:
        raise exc
    with pytest.raises(type(exc)):
        call(raising)


def test_is_ok_and_is_err_answer_without_narrowing() -> None:
    assert Ok(1).is_ok is True and Ok(1).is_err is False
    assert Err(1).is_ok is False and Err(1).is_err is True


def test_match_branches_on_the_variant() -> None:
    def describe(r: Result[int, str]) -> str:
        match r:
            case Ok(value):
                return f"ok {value}"
            case Err(error):
                return f"err {error}"
        raise AssertionError

    assert describe(Ok(1)) == "ok 1" and describe(Err("x")) == "err x"


def test_boundary_error_fields_and_context_is_a_read_only_copy() -> None:
    context = {"path": "b"}
    cause = FileNotFoundError("b")
    error = BoundaryError("artifact_missing", "inspect_bundle_result", context, cause)
    context["path"] = "changed"
    assert (error.code, error.where, dict(error.context), error.cause) == (
        "artifact_missing", "inspect_bundle_result", {"path": "b"}, cause)
    with pytest.raises(TypeError):
        error.context["path"] = "x"  # type: ignore[index]
    assert str(error) == "artifact_missing in inspect_bundle_result: b"
    assert BoundaryError("c", "w").context == {}


@pytest.mark.parametrize("kwargs", [dict(code="", where="w"), dict(code="c", where=None),
                                    dict(code="c", where="w", context=[1]),
                                    dict(code="c", where="w", cause="not an exception")])
def test_boundary_error_refuses_malformed_fields(kwargs) -> None:
    with pytest.raises(TypeError, match="BoundaryError"):
        BoundaryError(**kwargs)


TYPED = """
    from nnx.result import Err, Ok, Result

    def parse(text: str) -> Result[int, str]:
        return Ok(int(text)) if text.isdigit() else Err(f"not a number: {text}")

    def by_isinstance(r: Result[int, str]) -> int:
        if isinstance(r, Ok):
            n: int = r.value
            return n
        e: str = r.error
        return len(e)

    def by_match(r: Result[int, str]) -> int:
        match r:
            case Ok(value):
                return value + 1
            case Err(error):
                return len(error)

    doubled: Result[int, str] = parse("2").map(lambda v: v * 2)
    chained: Result[str, str] = parse("2").bind(lambda v: Ok(str(v)))
"""


def _mypy(tmp_path: Path, code: str) -> tuple[str, int]:
    # mypy is a dev tool of the workspace, not of nnx-core alone (its à-la-carte cell).
    mypy_api = pytest.importorskip("mypy.api")
    (tmp_path / "snippet.py").write_text(textwrap.dedent(code))
    # Only the result modules are analysed: nnx/__init__ would pull torch's stubs in.
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nmypy_path = {SRC}\n[mypy-nnx]\nfollow_imports = skip\n")
    out, err, status = mypy_api.run([
        "--config-file", str(tmp_path / "mypy.ini"), "--strict", "--python-version", "3.10",
        "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "snippet.py")])
    return out + err, status


def test_a_type_checker_narrows_each_branch_with_no_extra_package(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, TYPED)
    assert status == 0, out
    # the check can fail: without narrowing, .value does not exist on Err
    out, status = _mypy(tmp_path, TYPED + "\n    def bad(r: Result[int, str]) -> int:\n"
                                          "        return r.value\n")
    expected = 'Item "Err[str]" of "Ok[int] | Err[str]" has no attribute "value"'
    assert status == 1 and expected in out, out

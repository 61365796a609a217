"""The strict JSON reader a bundle's documents go through (spec §22): duplicate keys,
NaN / Infinity and runaway nesting are refused, the nesting measured before parsing."""

from __future__ import annotations

import json

import pytest

from nnx._foundation.bounded import check_nesting, load_json


def test_a_10000_deep_document_is_refused_before_the_parser_runs(monkeypatch):
    deep = "[" * 10_000 + "]" * 10_000

    def parser(*args, **kwargs):
        raise AssertionError("the parser ran")

    monkeypatch.setattr(json, "loads", parser)
    with pytest.raises(ValueError, match="nests deeper than 64"):
        load_json(data=deep, where="state.json", strict=True)
    with pytest.raises(ValueError, match="nests deeper"):
        check_nesting(b'{"a":' * 100 + b"1" + b"}" * 100, "x")


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"a": "[" * 500 + '\\"{{{', "b": ["]]]", {"c": "x"}]})
    assert load_json(data=text, strict=True)["b"][1] == {"c": "x"}


@pytest.mark.parametrize(("text", "match"), [
    ('{"a": 1, "a": 2}', "repeats the key 'a'"),
    ('[{"x": {"k": 1, "k": 1}}]', "repeats the key 'k'"),
    ('{"a": NaN}', "NaN"),
    ('{"a": -Infinity}', "Infinity"),
    ('{"a": [1, 1e999]}', "1e999, too large for a float"),
])
def test_strict_refusals(text, match):
    with pytest.raises(ValueError, match=match):
        load_json(data=text, strict=True)
    load_json(data=text)  # the lenient reader of the runs root keeps its behaviour

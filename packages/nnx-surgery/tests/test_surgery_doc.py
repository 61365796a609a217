"""docs/surgery.md runs as written, every Python block in order (so it cannot rot), and
its parameter-count tables are exactly what their blocks print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "surgery.md"


def test_every_block_runs_and_the_table_is_what_it_prints(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str],
                                                          ) -> None:
    monkeypatch.chdir(tmp_path)  # the loop block writes runs/
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    assert len(blocks) == 5
    namespace: dict[str, object] = {"__name__": "__surgery_doc__"}
    exec(compile(blocks[0], "docs/surgery.md block 1", "exec"), namespace)
    table = capsys.readouterr().out
    assert table.count("\n") == 7  # header, rule, five surgeries
    assert f"```\n\n{table}\n" in text  # the page shows it right below the block
    exec(compile(blocks[1], "docs/surgery.md block 2", "exec"), namespace)
    assert capsys.readouterr().out == "(16, 16)\n"
    exec(compile(blocks[2], "docs/surgery.md block 3", "exec"), namespace)  # block 2's names
    assert capsys.readouterr().out == "[2]\n"
    exec(compile(blocks[3], "docs/surgery.md block 4", "exec"), namespace)
    assert capsys.readouterr().out == "True\n"
    pytest.importorskip("nnx.lm")  # the TransformerNN block needs nnx-lm
    exec(compile(blocks[4], "docs/surgery.md block 5", "exec"), namespace)
    table = capsys.readouterr().out
    assert table.count("\n") == 4  # header, rule, tied and untied
    assert f"```\n\n{table}\n" in text

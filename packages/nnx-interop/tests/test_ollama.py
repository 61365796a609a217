"""export_ollama_modelfile: the Modelfile beside a GGUF export, read from the file itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from _interop_tiny import tiny_net, tiny_tokenizer

from nnx.interop import (
    ExportExistsError,
    UnsupportedExportError,
    export_ollama_modelfile,
    write_gguf,
)


def test_the_modelfile_names_the_gguf_its_context_and_stop_token(tmp_path: Path) -> None:
    write_gguf(tiny_net(), tmp_path / "tiny.gguf", tokenizer=tiny_tokenizer())
    bundle = export_ollama_modelfile(tmp_path / "tiny.gguf", system="Be brief.",
                                     template="{{ .Prompt }}",
                                     parameters={"temperature": 0.7, "stop": ["<eos>", "."]})
    text = bundle.modelfile.read_text()
    assert bundle.modelfile == tmp_path / "Modelfile"
    lines = text.splitlines()
    assert lines[0].startswith("# nnx_transformer is NNx's own GGUF architecture")
    assert "FROM ./tiny.gguf" in lines
    assert 'TEMPLATE """{{ .Prompt }}"""' in lines and 'SYSTEM """Be brief."""' in lines
    assert "PARAMETER num_ctx 16" in lines and "PARAMETER temperature 0.7" in lines
    assert [x for x in lines if x.startswith("PARAMETER stop")] == [
        'PARAMETER stop "<eos>"', 'PARAMETER stop "."']


def test_a_llama_export_gets_no_warning_and_its_eos_by_default(tmp_path: Path) -> None:
    write_gguf(tiny_net(), tmp_path / "l.gguf", arch="llama", tokenizer=tiny_tokenizer())
    lines = export_ollama_modelfile(tmp_path / "l.gguf").modelfile.read_text().splitlines()
    assert lines[0] == "FROM ./l.gguf" and 'PARAMETER stop "<eos>"' in lines


def test_refusals_leave_no_modelfile(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        export_ollama_modelfile(tmp_path / "missing.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"not gguf")
    with pytest.raises(UnsupportedExportError, match="not a readable GGUF"):
        export_ollama_modelfile(tmp_path / "junk.gguf")
    write_gguf(tiny_net(), tmp_path / "m.gguf")
    with pytest.raises(UnsupportedExportError, match="unknown PARAMETER"):
        export_ollama_modelfile(tmp_path / "m.gguf", parameters={"temprature": 1})
    with pytest.raises(UnsupportedExportError, match="block quote"):
        export_ollama_modelfile(tmp_path / "m.gguf", system='say """')
    assert not (tmp_path / "Modelfile").exists()
    export_ollama_modelfile(tmp_path / "m.gguf")
    with pytest.raises(ExportExistsError):
        export_ollama_modelfile(tmp_path / "m.gguf")
    export_ollama_modelfile(tmp_path / "m.gguf", overwrite=True)

"""export_ollama_modelfile: the Ollama bundle file beside a GGUF export (spec §15).

It writes only the adjacent ``Modelfile`` (``FROM ./<file>.gguf``, the context length
and stop token read from the GGUF itself, optional TEMPLATE / SYSTEM / PARAMETER lines).
It does not make an ``nnx_transformer`` file executable by stock Ollama, which does not
implement that architecture; an ``arch="llama"`` export is what a stock runtime can load.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import gguf

from nnx.extend import atomic_write_text
from nnx.interop.errors import UnsupportedExportError
from nnx.interop.inputs import check_destination
from nnx.interop.report import OllamaBundle

__all__ = ["OLLAMA_PARAMETERS", "export_ollama_modelfile"]

#: The Modelfile PARAMETER names Ollama documents; another name is refused.
OLLAMA_PARAMETERS = frozenset({
    "num_ctx", "repeat_last_n", "repeat_penalty", "temperature", "seed", "stop",
    "num_predict", "top_k", "top_p", "min_p",
})

_OWNER = "export_ollama_modelfile"
_NOT_STOCK = ("# nnx_transformer is NNx's own GGUF architecture: stock Ollama does not run "
              "it (docs/gguf.md).\n")


def _read(path: Path) -> tuple[str, int | None, str | None]:
    """(architecture, context length, eos token spelling) of the GGUF file ``path``."""
    try:
        reader = gguf.GGUFReader(path)
    except (OSError, ValueError) as exc:
        raise UnsupportedExportError(f"{_OWNER}: {path} is not a readable GGUF file "
                                     f"({exc})") from None
    fields = reader.fields

    def scalar(key: str) -> object:
        field = fields.get(key)
        return None if field is None else field.contents()

    arch = str(scalar(gguf.Keys.General.ARCHITECTURE))
    context = scalar(gguf.Keys.LLM.CONTEXT_LENGTH.format(arch=arch))
    eos, tokens = scalar(gguf.Keys.Tokenizer.EOS_ID), scalar(gguf.Keys.Tokenizer.LIST)
    stop = tokens[eos] if isinstance(eos, int) and isinstance(tokens, list) else None
    return arch, context if isinstance(context, int) else None, stop


def _quoted(what: str, text: str | None) -> str:
    if text is None:
        return ""
    if not isinstance(text, str) or '"""' in text:
        raise UnsupportedExportError(f"{_OWNER}: {what} must be a str without '\"\"\"' "
                                     f"(a Modelfile's block quote)")
    return f'{what.upper()} """{text}"""\n'


def _parameter_lines(parameters: Mapping[str, object]) -> str:
    lines = []
    for key, value in parameters.items():
        if key not in OLLAMA_PARAMETERS:
            raise UnsupportedExportError(
                f"{_OWNER}: unknown PARAMETER {key!r} (one of "
                f"{', '.join(sorted(OLLAMA_PARAMETERS))})")
        for one in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(one, str) and ("\n" in one or '"' in one):
                raise UnsupportedExportError(f"{_OWNER}: PARAMETER {key} {one!r} holds a "
                                             "newline or a quote")
            text = f'"{one}"' if isinstance(one, str) else str(one)
            lines.append(f"PARAMETER {key} {text}\n")
    return "".join(lines)


def export_ollama_modelfile(gguf_path: str | os.PathLike[str], *, system: str | None = None,
                            template: str | None = None,
                            parameters: Mapping[str, object] | None = None,
                            overwrite: bool = False) -> OllamaBundle:
    """Write ``Modelfile`` beside ``gguf_path`` (a file write_gguf wrote).

    ``num_ctx`` defaults to the file's context length and ``stop`` to its eos token;
    ``parameters`` adds or overrides PARAMETER lines (a list value gives one line each).
    Refused before anything is written: an unreadable GGUF file, an unknown parameter,
    text that cannot be quoted (:class:`UnsupportedExportError`), an existing Modelfile
    without ``overwrite=True`` (:class:`ExportExistsError`).
    """
    source = Path(os.fspath(gguf_path))
    if not source.is_file():
        raise FileNotFoundError(f"{_OWNER}: no GGUF file at {source}")
    arch, context, stop = _read(source)
    merged: dict[str, object] = {}
    if context is not None:
        merged["num_ctx"] = context
    if stop is not None:
        merged["stop"] = stop
    merged.update(parameters or {})
    body = (_NOT_STOCK if arch == "nnx_transformer" else "") + f"FROM ./{source.name}\n"
    body += _quoted("template", template) + _quoted("system", system)
    body += _parameter_lines(merged)
    dest = check_destination(_OWNER, source.parent / "Modelfile", overwrite=overwrite)
    atomic_write_text(dest, body)
    return OllamaBundle(modelfile=dest, gguf=source)

"""nnx-lm keeps the add-on rules (docs/extending.md): core only through nnx and nnx.extend,
no private core name, no import circle, its entry points resolve; never transformers."""

from __future__ import annotations

from nnx.testing import check_distribution


def test_nnx_lm_keeps_the_add_on_rules_and_never_imports_transformers() -> None:
    # transformers is a dev-only dependency: the interop reads safetensors directly.
    check_distribution("nnx-lm", forbid=("transformers",))


def test_the_transformer_alone_never_imports_tokenizers() -> None:
    """issue 26 item 9: `tokenizers` is imported where a tokenizer is used, not before."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import nnx.lm, nnx.lm_tasks, nnx.generation\n"
            "from nnx import Nets, NNModel, NNModelParams, TransformerNN\n"
            "from nnx.lm import NNTransformerParams\n"
            "model = NNModel(NNTransformerParams(vocab_size=8, d_model=8, n_heads=2, n_layers=1,"
            " max_seq_len=8), NNModelParams(net=Nets.TRANSFORMER))\n"
            "assert isinstance(model.net, TransformerNN)\n"
            "assert 'tokenizers' not in sys.modules, 'tokenizers was imported'\n"
            "from nnx import NNTokenizerParams\n"
            "assert 'tokenizers' not in sys.modules, 'naming the class imported tokenizers'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr

"""Test-session settings for nnx-peft's tests: tiny tensors, one intra-op thread."""

import torch

torch.set_num_threads(1)

# The shared test helpers (_peft_tiny.py) import by name from this directory.
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

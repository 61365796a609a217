"""Test-session settings for nnx-core's own tests."""

import torch

# The test models are tiny: one intra-op thread is fastest, and it keeps the
# suite from oversubscribing CI's two cores when other processes run too.
torch.set_num_threads(1)

# The shared tiny helpers (_nnx_core_tiny.py) import by name from this directory.
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

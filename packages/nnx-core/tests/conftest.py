"""Test-session settings for nnx-core's own tests."""

import torch

# The test models are tiny: one intra-op thread is fastest, and it keeps the
# suite from oversubscribing CI's two cores when other processes run too.
torch.set_num_threads(1)

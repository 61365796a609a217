"""Test-session settings for nnx-diffusion's tests: tiny tensors, one intra-op thread."""

import torch

torch.set_num_threads(1)

"""Test-session settings for nnx-diffusion's tests: tiny tensors, one intra-op thread."""

import sys
from pathlib import Path

import torch

torch.set_num_threads(1)

# The shared tiny helpers (_nnx_diffusion_tiny.py) import by name from this directory.
sys.path.insert(0, str(Path(__file__).parent))

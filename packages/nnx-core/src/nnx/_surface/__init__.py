"""Layer 5, the user surface: NNModel, Trainer, the demo and the command line.

The top of the import graph; nothing inside nnx imports it except the public faces.
"""

"""Language models (spec §15): TransformerNN, NNTransformerParams, tokenizers, GenerativeNNModel."""

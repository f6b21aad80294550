"""Importing this package registers every layer type (one module per palette family)."""

from memdesigner.model.layers import (  # noqa: F401
    activation,
    attention,
    block,
    conv,
    dense,
    generation,
    hf_embeddings,
    inputs,
    loss,
    merge,
    moe,
    normalization,
    pooling,
    recurrent,
    tensor_ops,
    transformer,
)

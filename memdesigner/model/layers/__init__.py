"""Importing this package registers every layer type (one module per palette family)."""

from memdesigner.model.layers import (  # noqa: F401
    activation,
    attention,
    block,
    cast,
    collective,
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
    quant,
    recurrent,
    tensor_ops,
    transformer,
)

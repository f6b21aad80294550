"""Importing this package registers every layer type (one module per palette family)."""

from memdesigner.model.layers import (  # noqa: F401
    activation,
    attention,
    cast,
    conv,
    dense,
    inputs,
    loss,
    merge,
    normalization,
    pooling,
    quant,
    recurrent,
    tensor_ops,
)

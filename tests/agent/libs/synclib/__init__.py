"""A small library of the tests' own, imported from outside the project root (the tests put its
folder on sys.path): a host sync inside library code, like transformers' masking code's
``(mask[:, -1] == 0).all()`` in Python."""

import torch


def relu_if_negative(x):
    if (x < 0).any():  # host sync: Tensor.__bool__ -> aten::is_nonzero -> _local_scalar_dense
        return torch.relu(x)
    return x

"""Naive attention (matmul, scale, mask, softmax, matmul) next to the fused kernel.

`trnlens compare samples/attention.py::naive_attention samples/attention.py::fused_attention`
"""

import math

import torch
import torch.nn.functional as F


def attention_inputs():
    q, k, v = (torch.randn(2, 8, 256, 64) for _ in range(3))
    return (q, k, v)


# trnlens: inputs=attention_inputs
def naive_attention(q, k, v):
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    seq = q.shape[-2]
    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v)


# trnlens: inputs=attention_inputs
def fused_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)

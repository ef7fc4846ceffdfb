"""Three ways to write RMSNorm: the naive six-dispatch form, the fused op, and torch.compile.

Profile them with `trnlens profile samples/rmsnorm.py::rmsnorm_naive` (and _fused, _compiled),
or side by side with `trnlens compare samples/rmsnorm.py::rmsnorm_naive
samples/rmsnorm.py::rmsnorm_fused samples/rmsnorm.py::rmsnorm_compiled`.
"""

import torch


def rmsnorm_inputs():
    return (torch.randn(4, 512, 2048), torch.randn(2048))


# trnlens: inputs=rmsnorm_inputs
def rmsnorm_naive(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# trnlens: inputs=rmsnorm_inputs
def rmsnorm_fused(x, weight, eps=1e-6):
    return torch.rms_norm(x, (x.shape[-1],), weight, eps)


# trnlens: inputs=rmsnorm_inputs
@torch.compile
def rmsnorm_compiled(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

"""torch.compile with a graph break: a print in the middle splits the function into two graphs.

Profile it (`trnlens profile samples/graph_break.py::rmsnorm_logged`): dynamo compiles the code
before the print and the code after it as two graphs, two dispatches per call instead of one;
trnlens shows the break at the print's line with dynamo's reason. `rmsnorm_quiet` is the same
function without the print: one graph.
"""

import torch


def rmsnorm_inputs():
    return (torch.randn(4, 512, 2048), torch.randn(2048))


# trnlens: inputs=rmsnorm_inputs
@torch.compile
def rmsnorm_logged(x, weight, eps=1e-6):
    variance = x.pow(2).mean(-1, keepdim=True)
    print("variance computed")  # dynamo cannot trace print: the graph breaks here
    return x * torch.rsqrt(variance + eps) * weight


# trnlens: inputs=rmsnorm_inputs
@torch.compile
def rmsnorm_quiet(x, weight, eps=1e-6):
    variance = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight

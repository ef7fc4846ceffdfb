"""Which modules a collective moves: DDP's buckets and FSDP2's sharded modules.

DDP's reducer (C++) all-reduces gradients in buckets during backward, launching bucket 0, 1, ...
in index order as each fills. Bucket -> parameters comes from the reducer's own record:
- after DDP rebuilt its buckets (at the end of the first backward, the usual case), the logging
  data's ``rebuilt_per_bucket_param_indices`` (``"5 4 3 2, 1 0"``: per bucket, indices into
  the parameter list the reducer was built from, which ``_reducer_parameters`` rebuilds the way
  DDP's ``_build_params_for_reducer`` does);
- otherwise (``find_unused_parameters=True`` never rebuilds) the reducer's ``GradBucket``s
  (``_get_zeros_like_grad_buckets``: exact, but it allocates a zero copy of every bucket once).
A comm hook that sees the buckets (``register_comm_hook``, whose ``GradBucket.parameters()`` is
exact too) was not used: DDP takes one hook only (a user's would be refused) and a Python hook
replaces the C++ all-reduce, changing what is measured.

FSDP2 (``fully_shard``) labels its collectives with the sharded module's name relative to its
root (``FSDP::all_gather (layers.0)``); ``fsdp_names`` maps those to trnlens's module names.
"""

from __future__ import annotations

from typing import Any


def ddp_buckets(torch, named_modules) -> list[dict]:
    """One entry per DDP model: its buckets in launch order, each with its parameters' size in
    bytes and the modules that own them (by trnlens's names where known)."""
    try:
        ddp_type = torch.nn.parallel.DistributedDataParallel
    except AttributeError:
        return []
    names = {id(module): name for name, module in named_modules}
    found = []
    seen: set[int] = set()
    for _, module in named_modules:
        if not isinstance(module, ddp_type) or id(module) in seen:
            continue
        seen.add(id(module))
        buckets = _buckets(module, names)
        if buckets:
            found.append({"model": names.get(id(module)), "buckets": buckets})
    return found


def _reducer_parameters(ddp) -> list[tuple[Any, Any]]:
    """(owning module, parameter) in the order DDP gave them to its reducer."""
    ignore: set = getattr(ddp, "parameters_to_ignore", None) or set()
    pairs, memo = [], set()
    for module_name, module in ddp.module.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or f"{module_name}.{param_name}" in ignore:
                continue
            if id(param) not in memo:
                memo.add(id(param))
                pairs.append((module, param))
    return pairs


def _buckets(ddp, names: dict[int, str]) -> list[dict]:
    pairs = _reducer_parameters(ddp)
    root = names.get(id(ddp.module)) or names.get(id(ddp))

    def name_of(module) -> str:
        if id(module) in names:
            return names[id(module)]
        for sub_name, sub in ddp.module.named_modules():  # not reachable from the inputs
            if sub is module:
                prefix = root or f"<{type(ddp.module).__name__}>"
                return f"{prefix}.{sub_name}" if sub_name else prefix
        return f"<{type(module).__name__}>"

    groups = _logged_groups(ddp, len(pairs))
    if groups is None:
        groups = _grad_bucket_groups(ddp, pairs)
    if groups is None:
        return []
    out = []
    for index, members in enumerate(groups):
        modules: list[str] = []
        size = 0
        for i in members:
            module, param = pairs[i]
            size += param.numel() * param.element_size()
            name = name_of(module)
            if name not in modules:
                modules.append(name)
        out.append({"index": index, "bytes": size, "params": len(members), "modules": modules})
    return out


def _logged_groups(ddp, count: int) -> list[list[int]] | None:
    try:
        data = ddp._get_ddp_logging_data()
    except Exception:  # an older DDP, or a logger not set up
        return None
    if str(data.get("has_rebuilt_buckets")) != "1":
        return None
    text = data.get("rebuilt_per_bucket_param_indices")
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        groups = [[int(i) for i in part.split()] for part in text.split(",")]
    except ValueError:
        return None
    if any(i >= count for g in groups for i in g):
        return None  # not the parameter list rebuilt here: say nothing rather than guess
    return groups


def _grad_bucket_groups(ddp, pairs) -> list[list[int]] | None:
    index = {id(param): i for i, (_, param) in enumerate(pairs)}
    try:
        buckets = ddp.reducer._get_zeros_like_grad_buckets()
        groups = [[index[id(p)] for p in bucket.parameters()] for bucket in buckets]
    except Exception:  # no reducer API of that name, or a parameter not in the list
        return None
    return groups


def fsdp_names(named_modules) -> dict[str, str]:
    """FSDP2's module name (relative to its root, as in its labels) -> trnlens's name."""
    out: dict[str, str] = {}
    for name, module in named_modules:
        get_state = getattr(module, "_get_fsdp_state", None)
        if get_state is None:
            continue
        try:
            group = get_state()._fsdp_param_group
        except Exception:  # not initialised (never called) or another FSDP version
            continue
        if group is not None:
            out.setdefault(getattr(group, "_module_fqn", "") or "", name)
    return out

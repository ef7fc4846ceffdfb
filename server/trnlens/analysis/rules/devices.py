"""Where a value lives and what the host does with it, as far as the source shows.

The sync rules (TRN101-TRN106) are only right about values on the device: ``.item()`` of a tensor
already on the host is no sync, ``torch.tensor(x)`` without a device is no host-to-device copy,
``.to(dtype)`` is a cast. Measured on diffusers and timm (docs/rules.md), most false findings were
values visibly on the host or calls that only look like transfers. These helpers answer, from the
code alone and conservatively (unknown is never "host" or "device"):

- ``device_target``: is this ``.to(...)`` / factory call visibly aimed at an accelerator?
- ``on_host``: is this value visibly a host tensor (``.cpu()``, ``device="cpu"``, a factory
  without ``device=``, ``torch.from_numpy``, a name or attribute assigned only such values)?
- ``host_needs``: does the host need this value (an ``if``/``while`` test, a slice bound, a
  shape), so that the sync cannot be moved out of the loop?
"""

from __future__ import annotations

import ast

from trnlens.analysis.hostfacts import keyword_value, moved_to_host, names_cpu
from trnlens.analysis.patterns import dotted, is_module_ref
from trnlens.analysis.rules.base import Context

# torch functions that make a new tensor (on the CPU unless given ``device=``).
FACTORIES = frozenset(
    {
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "linspace",
        "logspace",
        "rand",
        "randn",
        "randint",
        "randperm",
        "eye",
    }
)
# Device strings that name an accelerator (a move to one of these is a host-to-device copy).
_ACCELERATORS = ("cuda", "neuron", "xla", "mps", "npu", "xpu", "hpu")
# Methods that keep a tensor where it is: ``x.cpu().float()`` is still on the host.
SAME_PLACE = frozenset(
    {
        "float",
        "double",
        "half",
        "long",
        "int",
        "bool",
        "byte",
        "detach",
        "clone",
        "contiguous",
        "view",
        "reshape",
        "permute",
        "transpose",
        "unsqueeze",
        "squeeze",
        "flatten",
        "split",
        "chunk",
        "numpy",
        "sum",
        "mean",
        "max",
        "min",
        "abs",
        "prod",
        "expand",
        # Reordering, selecting and counting keep a host tensor on the host too.
        "sort",
        "argsort",
        "topk",
        "flip",
        "roll",
        "cumsum",
        "index_select",
        "gather",
        "masked_select",
        "unique",
        "nonzero",
        "repeat",
        "clamp",
        "round",
    }
)
# Calls whose arguments are sizes or indices: the host must know them.
_SHAPE_CALLS = frozenset(
    {
        "reshape",
        "view",
        "expand",
        "repeat",
        "narrow",
        "split",
        "range",
        "zeros",
        "ones",
        "empty",
        "full",
        "randn",
        "rand",
        "arange",
        "interpolate",
    }
)
# Factories whose first argument is the size and the rest are values.
_SIZE_FIRST = frozenset({"full", "zeros", "ones", "empty", "randn", "rand"})
# Wrappers that pass a value on unchanged in kind (a Python number stays a Python number).
_PASS_THROUGH = frozenset({"int", "float", "bool", "round", "abs", "min", "max", "len"})


# -- devices -------------------------------------------------------------------------------------
def names_device(node: ast.AST | None) -> bool:
    """Visibly an accelerator: a ``device`` name or attribute (``device``, ``x.device``,
    ``self._device``, ``gather_device``), ``torch.device(...)``, or an accelerator string."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(":")[0] in _ACCELERATORS
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        return isinstance(first, ast.Constant) and str(first.value).startswith(_ACCELERATORS)
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        return name.endswith("torch.device") or name == "device"
    ident = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return isinstance(ident, str) and "cpu" not in ident and ident.lower().endswith("device")


def device_target(call: ast.Call) -> ast.expr | None:
    """The accelerator a ``.to(...)`` / ``.cuda()`` moves to, when the call visibly moves to one:
    ``.to(device)``, ``.to(x.device, dtype)``, ``.to(device=...)``, ``.to(t, non_blocking=True)``.
    None for casts (``.to(dtype)``, ``.to(x.dtype)``) and anything that may be one."""
    if not isinstance(call.func, ast.Attribute):
        return None
    if call.func.attr == "cuda":
        return call.func
    if call.func.attr != "to":
        return None
    keyword = keyword_value(call, "device")
    if keyword is not None and not names_cpu(keyword):
        return keyword  # `device=` says it, whatever the value is called
    target = call.args[0] if call.args else None
    if names_device(target):
        return target
    non_blocking = keyword_value(call, "non_blocking")
    if non_blocking is not None and call.args and not names_cpu(call.args[0]):
        return call.args[0]  # non_blocking only matters for a copy between host and device
    return None


def factory_device(call: ast.Call, ctx: Context) -> str | None:
    """For ``torch.<factory>(...)``: "device" when made on an accelerator (``device=`` given,
    not "cpu"), "host" when made on the host; None when ``call`` is not a torch factory."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in FACTORIES:
        return None
    if not is_module_ref(call.func.value, ctx.info):
        return None
    device = keyword_value(call, "device")
    if device is None or names_cpu(device):
        return "host"
    return "device"


# -- host values ---------------------------------------------------------------------------------
def on_host(node: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """Visibly a host tensor (or no tensor at all): never reported as a device sync."""
    if depth > 3:
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        attr = node.func.attr
        if attr in {"cpu", "numpy", "tolist"}:
            return True
        if attr == "to":
            target = keyword_value(node, "device") or (node.args[0] if node.args else None)
            if names_cpu(target):
                return True
            if device_target(node) is not None:
                return False
        placed = factory_device(node, ctx)
        if placed is not None:
            return placed == "host"
        if attr in SAME_PLACE and is_module_ref(node.func.value, ctx.info):
            # `torch.argsort(order_cpu)`: the function form of a method that keeps the place.
            return bool(node.args) and on_host(node.args[0], ctx, depth + 1)
        if attr in SAME_PLACE or attr in {"to", "pop", "get"}:
            return on_host(node.func.value, ctx, depth)  # `state_dict.pop(k)`: an element
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        generator = keyword_value(node, "generator")
        if isinstance(generator, ast.Name) and _host_generator(generator, ctx):
            return True  # a CPU generator only draws on the host
        if name.split(".")[0] in {"np", "numpy"}:
            return True  # a NumPy array: not a tensor at all
        # A result computed from ``torch.from_numpy`` data (a NumPy pipeline, e.g. ONNX).
        return any(_from_numpy(a, ctx) for a in node.args)
    if isinstance(node, ast.Subscript):
        return on_host(node.value, ctx, depth)
    if isinstance(node, ast.Attribute):
        owner = node.value
        if isinstance(owner, ast.Call) or (isinstance(owner, ast.Name) and owner.id != "self"):
            return on_host(owner, ctx, depth)  # `step(...).prev_sample`, `out.sample`
        root = dotted(node)
        if root is not None and root.startswith("self."):
            if node.attr in ctx.info.host_attrs:
                return True
            if _host_before(ctx, root, node):
                return True  # `self.sigmas = sigmas.to("cpu")` (or `self.init_sigmas()`) above
        return "cpu" in node.attr.lower().split("_")
    if isinstance(node, ast.Name):
        words = node.id.lower().split("_")
        if "cpu" in words or "state_dict" in node.id or words[-1] == "sd":
            return True  # `timesteps_cpu`; a checkpoint's state dict (`sds_sd`) is on the host
        reaching = reaching_value(ctx, node)
        values = [reaching] if reaching is not None else assigned_values(ctx, node.id)
        return bool(values) and all(on_host(v, ctx, depth + 1) for v in values)
    return False


def _host_generator(name: ast.Name, ctx: Context) -> bool:
    """``g = torch.Generator()`` (no device, or "cpu") is the only value ``g`` is given."""
    values = assigned_values(ctx, name.id)
    return bool(values) and all(
        isinstance(v, ast.Call)
        and (dotted(v.func) or "").endswith("Generator")
        and not any(not names_cpu(a) for a in [*v.args, *(k.value for k in v.keywords)])
        for v in values
    )


def on_device(node: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """Visibly made or put on an accelerator already: a ``.to(device)``, a factory with
    ``device=``, any call handed a device (``prepare_image(..., device=device)``), or a name
    assigned one of those. Moving it "to the device" again copies nothing."""
    if depth > 2:
        return False
    if isinstance(node, ast.Call):
        if factory_device(node, ctx) == "device" or device_target(node) is not None:
            return True
        return any(names_device(a) for a in [*node.args, *(k.value for k in node.keywords)])
    if isinstance(node, ast.Name):
        values = assigned_values(ctx, node.id, params=False)
        return any(on_device(v, ctx, depth + 1) for v in values)
    return False


def _host_before(ctx: Context, target: str, use: ast.AST) -> bool:
    """The last statement of this function's own body above ``use`` that sets ``target``
    (``self.sigmas``) moves it to the host: ``self.sigmas = sigmas.to("cpu")``, or a call of a
    method of this module that does (``self.init_sigmas()``, see ``HostFacts``)."""
    row = getattr(use, "lineno", 0)
    attr = target.removeprefix("self.")
    host = False
    for stmt in ctx.body:
        if stmt.lineno >= row:
            break
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            if dotted(stmt.targets[0]) == target:
                host = moved_to_host(stmt.value)
                continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            method = dotted(stmt.value.func) or ""
            if method.startswith("self.") and (method[5:], attr) in ctx.info.host_setters:
                host = True
                continue
        if any(
            isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and dotted(n) == target
            for n in ast.walk(stmt)
        ):
            host = False  # assigned in a branch or loop: which value reaches is unknown
    return host


def _from_numpy(node: ast.AST, ctx: Context) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "from_numpy"
        and is_module_ref(node.func.value, ctx.info)
    )


def reaching_value(ctx: Context, name: ast.Name) -> ast.expr | None:
    """The value of the nearest ``name = value`` before ``name``'s statement in the same block,
    when nothing between them (or in that statement) binds the name another way."""
    parents = ctx.parents
    stmt: ast.AST = name
    while not isinstance(stmt, ast.stmt):
        parent = parents.get(id(stmt))
        if parent is None:
            return None
        stmt = parent
    block = _block_of(stmt, parents.get(id(stmt)), ctx)
    if block is None:
        return None
    for before in reversed(block[: block.index(stmt)]):
        if not any(_binds(t, name.id) for t in _targets(before)):
            continue
        if (
            isinstance(before, ast.Assign)
            and len(before.targets) == 1
            and isinstance(before.targets[0], ast.Name)
        ):
            return before.value
        return None
    return None


def _block_of(stmt: ast.AST, parent: ast.AST | None, ctx: Context) -> list[ast.stmt] | None:
    blocks = (
        [ctx.body]
        if parent is None
        else [getattr(parent, f, None) for f in ("body", "orelse", "finalbody", "handlers")]
    )
    for block in blocks:
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    return None


def _targets(stmt: ast.stmt) -> list[ast.AST]:
    """Everything ``stmt`` may bind (its nested blocks included)."""
    found: list[ast.AST] = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append(node)
    return found


def assigned_values(ctx: Context, name: str, params: bool = True) -> list[ast.expr]:
    """Every value ``name`` is given in this body: plain assignments, and for loop targets
    (``for x in xs``, comprehensions) an element of the iterable (``xs[0]``). Empty when the
    name is also bound some other way (a tuple target, ``with``..., or, unless ``params`` is
    False, a parameter: then the caller's value is one more, unknown)."""
    if params and name in ctx.params:
        return []
    values: list[ast.expr] = []
    for node in ctx.nodes:
        if isinstance(node, ast.Assign) and any(_binds(t, name) for t in node.targets):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                return []
            values.append(node.value)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            if _binds(node.target, name):
                if not isinstance(node.target, ast.Name):
                    return []
                values.append(ast.Subscript(node.iter, ast.Constant(0), ast.Load()))
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.withitem | ast.NamedExpr):
            target = node.optional_vars if isinstance(node, ast.withitem) else node.target
            if target is not None and _binds(target, name):
                return []
    return values


def _binds(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


# -- what the host does with a value ---------------------------------------------------------------
def host_needs(node: ast.AST, ctx: Context, loop: ast.AST, depth: int = 0) -> bool:
    """The host cannot go on without this value: it decides a branch or a loop (``if x.item():``,
    ``while``, a conditional expression, an ``assert``), bounds a slice or sizes a tensor; or it
    is assigned to a name that does one of those in the same loop."""
    parents = ctx.parents
    child, parent = node, parents.get(id(node))
    while parent is not None:
        if isinstance(parent, ast.keyword):
            child, parent = parent, parents.get(id(parent))
            continue
        if isinstance(parent, ast.Compare | ast.BoolOp | ast.UnaryOp | ast.BinOp):
            child, parent = parent, parents.get(id(parent))
            continue
        if isinstance(parent, ast.Call) and child in parent.args:
            name = parent.func.id if isinstance(parent.func, ast.Name) else None
            if name in _PASS_THROUGH:
                child, parent = parent, parents.get(id(parent))
                continue
        break
    if parent is None:
        return False
    if _decides(child, parent):
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and depth == 0:
        target = parent.targets[0]
        if isinstance(target, ast.Name):
            return any(
                isinstance(use, ast.Name)
                and use.id == target.id
                and isinstance(use.ctx, ast.Load)
                and host_needs(use, ctx, loop, depth + 1)
                for use in ast.walk(loop)
                if use is not target
            )
    return False


def _decides(child: ast.AST, parent: ast.AST) -> bool:
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert) and child is parent.test:
        return True
    if isinstance(parent, ast.comprehension) and child in parent.ifs:
        return True
    if isinstance(parent, ast.Slice):
        return True
    if isinstance(parent, ast.Subscript) and child is parent.slice:
        return True
    if isinstance(parent, ast.Tuple):
        return False
    if isinstance(parent, ast.Call) and (child in parent.args or child in parent.keywords):
        func = parent.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in _SIZE_FIRST:  # `torch.full(size, value)`: only the size is the host's
            return bool(parent.args) and child is parent.args[0]
        return name in _SHAPE_CALLS
    return False

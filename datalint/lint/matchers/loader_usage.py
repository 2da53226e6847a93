"""Matchers for how loaders are used: how many workers, where workers start, how often.

DL008 (worker count), DL009 (no workers for training), DL010 (a loader rebuilt in a loop),
DL011 (loader attributes set after construction). The helpers that find a loader behind a
name and the places a loader is iterated are shared with the pickling matchers (DL104).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from typing import Any

from datalint.lint.matchers.common import dotted, names_in
from datalint.lint.module import UNKNOWN, LoaderCall, Match, Module

LOOPS = (ast.For, ast.AsyncFor, ast.While)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

# Calls that iterate what they are given, or hand it on to a `for` unchanged (`enumerate(loader)`).
ITERATING_CALLS: frozenset[str] = frozenset({"iter", "next", "list", "tuple"})
WRAPPER_CALLS: frozenset[str] = frozenset(
    {"enumerate", "zip", "iter", "tqdm", "track", "islice", "cycle", "chain", "repeat_loader"}
)
# Attributes of a DataLoader that raise ValueError when set after __init__ (torch 2.x __setattr__).
GUARDED_ATTRIBUTES: tuple[str, ...] = (
    "batch_size",
    "batch_sampler",
    "sampler",
    "drop_last",
    "dataset",
    "persistent_workers",
)


# ---- shared helpers ------------------------------------------------------------------------------


def loader_for(module: Module, expr: ast.expr | None) -> LoaderCall | None:
    """The DataLoader call an expression is (`DataLoader(...)`) or names through a sole binding."""
    if expr is None:
        return None
    resolved = module.resolve(expr)
    for loader in module.loader_calls:
        if loader.node is resolved:
            return loader
    return None


def restarts_workers(loader: LoaderCall) -> bool:
    """Each new iterator starts fresh worker processes: workers may run and are not persistent."""
    persistent = loader.effective("persistent_workers")
    return loader.may_use_workers() and persistent is not UNKNOWN and not persistent


def call_name(module: Module, call: ast.Call) -> str:
    """The last segment of the callee's name (`tqdm.auto.tqdm` -> "tqdm"), or ""."""
    qualified = module.qualname(call.func)
    if qualified is not None:
        return qualified.rpartition(".")[2]
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else ""


def iterated_operands(module: Module, expr: ast.expr, depth: int = 0) -> Iterator[ast.expr]:
    """What a `for` over `expr` iterates: `expr`, and through `enumerate(x)`, `tqdm(x)`, `zip(a, b)`."""
    yield expr
    if depth < 3 and isinstance(expr, ast.Call) and call_name(module, expr) in WRAPPER_CALLS:
        for arg in expr.args:
            yield from iterated_operands(module, arg, depth + 1)


def iterating_call_operand(module: Module, call: ast.Call) -> ast.expr | None:
    """`x` in `iter(x)`, `next(iter(x))`, `list(x)`; None for other calls."""
    name = module.qualname(call.func)
    if name not in ITERATING_CALLS or len(call.args) != 1:
        return None
    operand = call.args[0]
    if name == "next":
        # `next(it)` advances an existing iterator; only `next(iter(x))` starts one.
        if isinstance(operand, ast.Call) and module.qualname(operand.func) == "iter" and operand.args:
            return operand.args[0]
        return None
    return operand


def enclosing_loop(module: Module, node: ast.AST) -> ast.For | ast.AsyncFor | ast.While | None:
    """The nearest loop whose body (not its header) holds `node`, within the same function."""
    child = node
    for ancestor in module.ancestors(node):
        if isinstance(ancestor, SCOPES):
            return None
        if isinstance(ancestor, LOOPS) and child in ancestor.body:
            return ancestor
        child = ancestor
    return None


def assigned_name(module: Module, node: ast.AST) -> str | None:
    """`loader` in `loader = DataLoader(...)` (or `self.loader`, as written), else None."""
    parent = module.parent(node)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        return dotted(target)
    if isinstance(parent, ast.AnnAssign) and parent.value is node:
        return dotted(parent.target)
    return None


def _number(value: Any) -> float | None:
    if value is UNKNOWN or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


# ---- DL008 excessive-workers -----------------------------------------------------------------------


def excessive_workers(
    module: Module, *, threshold: int = 16, cpu_count_calls: Sequence[str] = ("os.cpu_count",)
) -> Iterator[Match]:
    """A literal num_workers >= threshold, or a worker count computed from the host's CPU count."""
    for loader in module.loader_calls:
        arg = loader.arg("num_workers")
        if arg.node is None:
            continue
        value = _number(arg.value) if arg.is_literal else None
        if value is not None:
            if value >= threshold and not _in_test_function(module, loader.node):
                reason = f"is tuned for one machine: {threshold} or more worker processes rarely help"
                yield Match(loader.node, {"value": module.segment(arg.node), "reason": reason})
            continue
        cpu_call = _uncapped_cpu_count(module, arg.node, cpu_count_calls, threshold)
        if cpu_call is not None:
            reason = (
                f"counts the host's CPUs (`{module.segment(cpu_call)}`), not the ones this process may use "
                "under a container quota, SLURM or taskset"
            )
            yield Match(loader.node, {"value": module.segment(arg.node), "reason": reason})


def _in_test_function(module: Module, node: ast.AST) -> bool:
    """Inside a `test_*` function or method (pytest, unittest): a literal count there is the
    case under test (more workers than shards, say), not a setting tuned for one machine."""
    function = module.enclosing_function(node)
    while function is not None:
        if getattr(function, "name", "").startswith("test"):
            return True
        function = module.enclosing_function(function)
    return False


def _uncapped_cpu_count(
    module: Module, expr: ast.expr, cpu_count_calls: Sequence[str], threshold: int
) -> ast.Call | None:
    """The CPU-count call inside `expr` (following sole bindings), unless a small `min()` caps it."""
    pending: list[tuple[ast.AST, bool]] = [(expr, False)]
    seen: set[int] = set()
    while pending:
        node, capped = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ast.Name):
            resolved = module.resolve(node)
            if resolved is not node and isinstance(resolved, ast.expr):
                pending.append((resolved, capped))
            continue
        if isinstance(node, ast.Call):
            name = module.qualname(node.func)
            if name in cpu_count_calls and not capped:
                return node
            capped = capped or (name == "min" and _has_small_literal(module, node, threshold))
        pending.extend((child, capped) for child in ast.iter_child_nodes(node))
    return None


def _has_small_literal(module: Module, call: ast.Call, threshold: int) -> bool:
    for arg in call.args:
        value = _number(module.literal(arg))
        if value is not None and value < threshold:
            return True
    return False


# ---- DL009 synchronous-loading ---------------------------------------------------------------------


def synchronous_loading(
    module: Module,
    *,
    train_words: Sequence[str] = ("train",),
    eval_words: Sequence[str] = ("val", "valid", "test", "eval", "predict", "infer"),
) -> Iterator[Match]:
    """A loader that certainly has no workers and looks like the training loader."""
    for loader in module.loader_calls:
        if not loader.workers_known_zero or not _is_training_loader(module, loader, train_words, eval_words):
            continue
        arg = loader.arg("num_workers")
        value = module.segment(arg.node) if arg.node is not None else "0, the default"
        yield Match(loader.node, {"value": value})


def _is_training_loader(
    module: Module, loader: LoaderCall, train_words: Sequence[str], eval_words: Sequence[str]
) -> bool:
    """Shuffles, or is named for training: `train_loader =`, `DataLoader(train_ds)`, `train_dataloader`."""
    if loader.effective("shuffle") is True:
        return True
    dataset = loader.arg("dataset").node
    for name in (
        assigned_name(module, loader.node),
        dotted(dataset) if dataset is not None else None,
    ):
        if name and _has_word(name, eval_words):
            return False
        if name and _has_word(name, train_words):
            return True
    # A function named for the training loader (Lightning's `train_dataloader`, `make_train_loader`),
    # not any function that trains: `def train(...)` builds evaluation loaders too.
    function = module.enclosing_function(loader.node)
    if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        return _has_word(function.name, train_words) and "loader" in function.name.lower()
    return False


def _has_word(text: str, words: Sequence[str]) -> bool:
    """`train_loader`, `self.train_ds`, `trainset`: a word of `text` starting with one of `words`."""
    parts = text.replace(".", "_").replace("(", "_").lower().split("_")
    return any(part.startswith(word) for part in parts for word in words)


# ---- DL010 loader-in-loop --------------------------------------------------------------------------


def loader_in_loop(module: Module) -> Iterator[Match]:
    """A loader built and iterated in one loop body, or `next(iter(loader))` inside a loop."""
    if not module.loader_calls:
        return
    for loader in module.loader_calls:
        if not restarts_workers(loader):
            continue
        loop = enclosing_loop(module, loader.node)
        if loop is None or _built_from_loop_names(loop, loader):
            continue  # one loader per fold or per dataset cannot be built once, outside the loop
        if _iterated_in_loop(module, loop, loader):
            what = f"`{module.segment(loader.node.func)}(...)`"
            yield Match(loader.node, {"what": what, "workers": _workers_text(module, loader)})
    for call in module.calls:
        operand = iterating_call_operand(module, call)
        if operand is None or module.qualname(call.func) != "next":
            continue
        iterated = loader_for(module, operand)
        if iterated is None or iterated.node is operand or not restarts_workers(iterated):
            continue  # a loader built right here is reported above, at its own call
        loop = enclosing_loop(module, call)
        if loop is None or (
            enclosing_loop(module, iterated.node) is loop and _built_from_loop_names(loop, iterated)
        ):
            continue
        yield Match(call, {"what": f"`{module.segment(call)}`", "workers": _workers_text(module, iterated)})


def _workers_text(module: Module, loader: LoaderCall) -> str:
    arg = loader.arg("num_workers")
    return f"num_workers={module.segment(arg.node)}" if arg.node is not None else "num_workers from **kwargs"


def _built_from_loop_names(loop: ast.For | ast.AsyncFor | ast.While, loader: LoaderCall) -> bool:
    """Whether the loader's arguments use a name the loop binds: its target, or one derived from it.

    `for train_idx, val_idx in folds: DataLoader(Subset(ds, train_idx))` or `for name, ds in
    datasets.items(): DataLoader(ds)` iterate a different dataset each pass; a `while` binds nothing.
    """
    if isinstance(loop, ast.While):
        return False
    bound = _loop_bound_names(loop)
    return any(
        isinstance(node, ast.Name) and node.id in bound
        for argument in (*loader.node.args, *(keyword.value for keyword in loader.node.keywords))
        for node in ast.walk(argument)
    )


def _loop_bound_names(loop: ast.For | ast.AsyncFor) -> set[str]:
    """The loop's target names, and names assigned in its body from them (`ds = datasets[name]`)."""
    bound = names_in(loop.target)
    assignments = [node for node in ast.walk(loop) if isinstance(node, ast.Assign | ast.AnnAssign)]
    grew = True
    while grew:  # `a = f(name)` then `b = g(a)`: follow the chain until nothing new is bound
        grew = False
        for assignment in assignments:
            if assignment.value is None or not (names_in(assignment.value) & bound):
                continue
            targets = assignment.targets if isinstance(assignment, ast.Assign) else [assignment.target]
            new = set().union(*(names_in(target) for target in targets)) - bound
            if new:
                bound |= new
                grew = True
    return bound


def _iterated_in_loop(module: Module, loop: ast.AST, loader: LoaderCall) -> bool:
    """Whether each pass of `loop` iterates the loader it builds (directly or through its name).

    Iterating it only in a nested loop (`for fold: loader = ...; for epoch: for b in loader`)
    reuses each loader many times: rebuilding it per fold is then necessary, not wasteful.
    """
    name = assigned_name(module, loader.node)
    for node in ast.walk(loop):
        operands: list[ast.expr] = []
        if isinstance(node, ast.For | ast.AsyncFor):
            operands.extend(iterated_operands(module, node.iter))
        elif isinstance(node, ast.Call):
            operand = iterating_call_operand(module, node)
            if operand is not None:
                operands.append(operand)
        if enclosing_loop(module, node) is not loop:
            continue
        for operand in operands:
            if operand is loader.node or (name is not None and dotted(operand) == name):
                return True
    return False


# ---- DL011 loader-attribute-after-init ----------------------------------------------------------------


def loader_attribute_after_init(
    module: Module, *, attributes: Sequence[str] = GUARDED_ATTRIBUTES
) -> Iterator[Match]:
    """`loader.batch_size = 64` on a name bound to a DataLoader call: torch raises ValueError."""
    for node in module.nodes_of(ast.Assign, ast.AugAssign, ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if not isinstance(target, ast.Attribute) or target.attr not in attributes:
                continue
            if not isinstance(target.value, ast.Name):
                continue
            loader = loader_for(module, target.value)
            if loader is not None and loader.signature_known:
                yield Match(target, {"attribute": target.attr, "loader": target.value.id})


MATCHERS: dict[str, Any] = {
    "excessive-workers": excessive_workers,
    "synchronous-loading": synchronous_loading,
    "loader-in-loop": loader_in_loop,
    "loader-attribute-after-init": loader_attribute_after_init,
}

"""Matchers for the sample-contract rules (DL5xx): what a dataset must provide and must not do."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from datalint.lint.matchers.common import (
    FunctionDef,
    dotted,
    full_pickle_load,
    imports_any,
    in_file_callee,
    is_self_attribute,
    loaders_of,
    names_in,
    self_assignments,
    walk_scope,
)
from datalint.lint.module import ClassInfo, Match, Module
from datalint.records import record

# Parameter annotations that say a constructor argument is a plain sequence of values.
SEQUENCE_ANNOTATIONS = frozenset(
    {"list", "tuple", "str", "List", "Tuple", "Sequence", "typing.List", "typing.Tuple"}
)
# Bases that add nothing to the dataset protocol.
NEUTRAL_BASES = frozenset({"object", "abc.ABC", "typing.Generic", "typing.Protocol"})
# Method calls on a plain source that still yield its items.
PLAIN_METHODS = frozenset({"readlines", "splitlines", "split", "items", "keys", "values"})

# ---- DL501 iterable-without-sharding -------------------------------------------------------------

# Queues shared between processes: each item put in is taken out by one process only.
QUEUE_CLASSES = frozenset({"Queue", "SimpleQueue", "JoinableQueue"})
QUEUE_TAKES = frozenset({"get", "get_nowait"})
QUEUE_MAKERS = frozenset(
    {
        "multiprocessing.get_context",
        "multiprocessing.Manager",
        "multiprocessing.managers.SyncManager",
        "torch.multiprocessing.get_context",
        "torch.multiprocessing.Manager",
    }
)


@record
class Sources:
    """What `__iter__` may read and still be seen whole: readers (any arguments) and wrappers of them."""

    readers: frozenset[str]
    wrappers: frozenset[str]


def iterable_without_sharding(
    module: Module,
    *,
    sharding_names: Sequence[str] = (),
    stream_sources: Sequence[str] = (),
    stream_wrappers: Sequence[str] = (),
) -> Iterator[Match]:
    """An IterableDataset whose `__iter__` yields a stream it can read whole, split by nothing."""
    plain_sources = Sources(frozenset(stream_sources), frozenset(stream_wrappers))
    for info in module.dataset_classes:
        method = info.methods.get("__iter__")
        if method is None or not module.is_iterable_dataset(info) or module.read_only_without_workers(info):
            continue
        reached = _reached_functions(module, info, method)
        if any(_mentions_sharding(f, sharding_names) for f in reached):
            continue
        if _narrowed_by_worker_init(module, info, sharding_names):
            continue
        if _streams_plainly(module, info, method, plain_sources, depth=0):
            yield Match(method, {"cls": info.name})


def _narrowed_by_worker_init(module: Module, info: ClassInfo, sharding_names: Sequence[str]) -> bool:
    """A `worker_init_fn` of this dataset's loader that narrows each worker's copy of it.

    The pattern torch documents for IterableDataset: `get_worker_info().dataset` is the worker's
    copy, and the hook sets its bounds (`dataset.start = ...`). A hook that only seeds never
    touches `.dataset`, so it does not count.
    """
    for loader in loaders_of(module, info):
        node = loader.arg("worker_init_fn").node
        hook = module.resolve(node) if node is not None else None
        if isinstance(hook, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            touches_dataset = any(
                isinstance(n, ast.Attribute) and n.attr == "dataset" for n in ast.walk(hook)
            )
            if touches_dataset and _mentions_sharding(hook, sharding_names):
                return True
    return False


def _reached_functions(module: Module, info: ClassInfo, start: FunctionDef) -> list[FunctionDef]:
    """`start` and the in-file functions and methods it calls, transitively."""
    found: dict[ast.AST, FunctionDef] = {}
    queue = [start]
    while queue:
        function = queue.pop()
        if function in found:
            continue
        found[function] = function
        for node in walk_scope(function):
            if isinstance(node, ast.Call):
                callee = in_file_callee(module, info, node)
                if callee is not None:
                    queue.append(callee)
    return list(found.values())


def _mentions_sharding(function: ast.AST, names: Sequence[str]) -> bool:
    wanted = set(names)
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id in wanted:
            return True
        if isinstance(node, ast.Attribute) and node.attr in wanted:
            return True
        if isinstance(node, ast.keyword) and node.arg in wanted:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name).rpartition(".")[2] in wanted:
            return True
    return False


def _streams_plainly(
    module: Module, info: ClassInfo, function: FunctionDef, sources: Sources, depth: int
) -> bool:
    """Every item the function yields (or the iterator it returns) comes from sources it reads whole."""
    points = [n for n in walk_scope(function) if isinstance(n, ast.Yield | ast.YieldFrom | ast.Return)]
    points = [p for p in points if not (isinstance(p, ast.Return) and p.value is None)]
    if not points or depth > 3:
        return False
    return all(_plain_point(module, info, function, point, sources, depth) for point in points)


def _plain_point(
    module: Module, info: ClassInfo, function: FunctionDef, point: ast.AST, sources: Sources, depth: int
) -> bool:
    for ancestor in module.ancestors(point):
        if ancestor is function:
            break
        if isinstance(ancestor, ast.While):
            return False  # `while True: yield next(reader)`: the source is not in sight
        if isinstance(ancestor, ast.For | ast.AsyncFor) and not _plain(
            module, info, function, ancestor.iter, sources
        ):
            return False
    if isinstance(point, ast.YieldFrom | ast.Return):
        assert point.value is not None
        return _plain_or_plain_generator(module, info, function, point.value, sources, depth)
    # `yield self.queue.get()`: a multiprocessing queue hands each item to one worker only.
    return not (
        isinstance(point, ast.Yield)
        and point.value is not None
        and _from_shared_queue(module, info, point.value)
    )


def _from_shared_queue(module: Module, info: ClassInfo, expr: ast.expr) -> bool:
    """The value is taken from a multiprocessing queue (`q.get()`, or a name bound once to it)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            bound = module.binding(node)
            node = bound if isinstance(bound, ast.Call) else node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in QUEUE_TAKES
            and _shared_queue(module, info, node.func.value)
        ):
            return True
    return False


def _shared_queue(module: Module, info: ClassInfo, receiver: ast.expr) -> bool:
    """`self.queue` (or a name) whose every value is a multiprocessing queue: built here, or a
    constructor parameter annotated as one."""
    if isinstance(receiver, ast.Attribute) and is_self_attribute(receiver):
        values = [a for a in self_assignments(module, info) if a.attr == receiver.attr]
        return bool(values) and all(_queue_value(module, a.method, a.value, info) for a in values)
    if isinstance(receiver, ast.Name):
        function = module.enclosing_function(receiver)
        if (
            isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
            and (annotation := _parameter_annotation(function, receiver.id)) is not None
        ):
            return _queue_type(module, annotation)
        return _queue_value(module, function, module.resolve(receiver))
    return False


def _queue_value(module: Module, method: Any, value: ast.AST | None, info: ClassInfo | None = None) -> bool:
    if isinstance(value, ast.Name) and isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
        annotation = _parameter_annotation(method, value.id)
        if annotation is not None:
            return _queue_type(module, annotation)
        return (
            info is not None and method.name == "__init__" and _queue_passed(module, info, method, value.id)
        )
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name | ast.Attribute):
        return False
    if _queue_type(module, value.func):
        return True
    # `ctx.Queue()` of `multiprocessing.get_context(...)`, `manager.Queue()` of a `Manager()`
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in QUEUE_CLASSES:
        maker = module.resolve(func.value)
        return isinstance(maker, ast.Call) and (module.qualname(maker.func) or "") in QUEUE_MAKERS
    return False


def _queue_passed(module: Module, info: ClassInfo, init: FunctionDef, parameter: str) -> bool:
    """Every construction of the class in the file hands `parameter` a multiprocessing queue."""
    names = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
    handed = []
    for call in module.calls:
        built = module.resolve_class(call.func)
        if built is None or built.node is not info.node:
            continue
        given = next((k.value for k in call.keywords if k.arg == parameter), None)
        if given is None and parameter in names and names.index(parameter) < len(call.args):
            given = call.args[names.index(parameter)]
        if given is None or any(isinstance(a, ast.Starred) for a in call.args):
            return False
        handed.append(given)
    return bool(handed) and all(_queue_value(module, None, module.resolve(g)) for g in handed)


def _queue_type(module: Module, node: ast.expr) -> bool:
    """`multiprocessing.Queue`, `mp.SimpleQueue`, `torch.multiprocessing.JoinableQueue` (a type or a call)."""
    qualified = module.qualname(node.value if isinstance(node, ast.Subscript) else node) or ""
    module_name, _, name = qualified.rpartition(".")
    return name in QUEUE_CLASSES and module_name.startswith(("multiprocessing", "torch.multiprocessing"))


def _plain_or_plain_generator(
    module: Module, info: ClassInfo, function: FunctionDef, expr: ast.expr, sources: Sources, depth: int
) -> bool:
    if isinstance(expr, ast.Call) and module.qualname(expr.func) == "iter" and expr.args:
        expr = expr.args[0]
    if isinstance(expr, ast.Call):
        callee = in_file_callee(module, info, expr)
        if callee is not None:
            return _streams_plainly(module, info, callee, sources, depth + 1)
    return _plain(module, info, function, expr, sources)


def _plain(module: Module, info: ClassInfo, function: FunctionDef, expr: ast.expr, sources: Sources) -> bool:
    """Whether iterating `expr` reads data the linter can see whole (files, ranges, lists of paths)."""
    if isinstance(expr, ast.List | ast.Tuple):
        return True
    if isinstance(expr, ast.ListComp | ast.GeneratorExp | ast.SetComp):
        return all(_plain(module, info, function, g.iter, sources) for g in expr.generators)
    if isinstance(expr, ast.Call):
        return _plain_call(module, info, function, expr, sources)
    if isinstance(expr, ast.Name):
        return _plain_name(module, info, function, expr, sources)
    if isinstance(expr, ast.Attribute) and is_self_attribute(expr):
        return _plain_attribute(module, info, expr.attr)
    return False


def _plain_call(
    module: Module, info: ClassInfo, function: FunctionDef, call: ast.Call, sources: Sources
) -> bool:
    qualified = module.qualname(call.func)
    if qualified in sources.readers:
        return True
    if qualified in sources.wrappers:
        # A wrapper (sorted, enumerate, zip...) is as plain as what it wraps.
        return bool(call.args) and all(_plain(module, info, function, a, sources) for a in call.args)
    if isinstance(call.func, ast.Attribute) and call.func.attr in PLAIN_METHODS and qualified is None:
        return _plain(module, info, function, call.func.value, sources)
    return False


def _plain_name(
    module: Module, info: ClassInfo, function: FunctionDef, name: ast.Name, sources: Sources
) -> bool:
    for ancestor in module.ancestors(name):
        if isinstance(ancestor, ast.With | ast.AsyncWith):
            for item in ancestor.items:
                if item.optional_vars is not None and name.id in names_in(item.optional_vars):
                    return _plain(module, info, function, item.context_expr, sources)
    bound = module.binding(name)
    if isinstance(bound, ast.expr):
        return _plain(module, info, function, bound, sources)
    return False


def _plain_attribute(module: Module, info: ClassInfo, attr: str) -> bool:
    """`self.x` where every assignment is a list of values (a literal, a comprehension, a typed argument)."""
    values = [a for a in self_assignments(module, info) if a.attr == attr]
    return bool(values) and all(_plain_value(module, a.method, a.value) for a in values)


def _plain_value(module: Module, method: FunctionDef, value: ast.expr | None) -> bool:
    if value is None:
        return False
    if isinstance(value, ast.List | ast.Tuple | ast.ListComp):
        return True
    if isinstance(value, ast.Call):
        return module.qualname(value.func) in {"sorted", "list", "glob.glob", "os.listdir", "tuple"}
    if isinstance(value, ast.Name):
        annotation = _parameter_annotation(method, value.id)
        if annotation is not None:
            base = annotation.value if isinstance(annotation, ast.Subscript) else annotation
            return (dotted(base) or "") in SEQUENCE_ANNOTATIONS
    return False


def _parameter_annotation(method: FunctionDef, name: str) -> ast.expr | None:
    args = method.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.arg == name:
            return arg.annotation
    return None


# ---- DL502 getitem-returns-none ------------------------------------------------------------------


def getitem_returns_none(module: Module, *, collate_names: Sequence[str] = ()) -> Iterator[Match]:
    """`return None` / bare `return` in `__getitem__` of a dataset batched by the default collate."""
    overridden = _overridden_getitems(module)
    for info in module.dataset_classes:
        method = info.methods.get("__getitem__")
        if method is None or method in overridden or _is_stub(method):
            continue
        if not _default_collate(module, info, collate_names):
            continue
        for node in walk_scope(method):
            if isinstance(node, ast.Return) and (node.value is None or _is_none(node.value)):
                yield Match(node, {"cls": info.name})


def _overridden_getitems(module: Module) -> set[ast.AST]:
    """`__getitem__` of in-file base classes whose subclasses define their own, when the base
    itself is used by nobody: not built or read by a loader in its file, not imported by name
    from another file. A subclass's override is no evidence for a base that is used itself."""
    found: set[ast.AST] = set()
    for info in module.classes:
        if "__getitem__" in info.methods:
            for base in module.base_classes(info):
                if "__getitem__" in base.methods and not _used_itself(module, base):
                    found.add(base.methods["__getitem__"])
    return found


def _used_itself(module: Module, info: ClassInfo) -> bool:
    if loaders_of(module, info) or any(module.resolve_class(call.func) is info for call in module.calls):
        return True
    project = module.project
    return (
        project is not None
        and bool(module.module_name)
        and project.is_named(module.qualified_prefix + info.name, "")
    )


def _is_stub(method: FunctionDef) -> bool:
    """A placeholder body (`return None`, `pass`, a docstring): the method is meant to be overridden."""
    body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 0 or (len(body) == 1 and isinstance(body[0], ast.Return | ast.Pass))


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _default_collate(module: Module, info: ClassInfo, collate_names: Sequence[str]) -> bool:
    """A loader of this dataset with the default collate; or no loader here and no collate in sight."""
    loaders = loaders_of(module, info)
    if loaders:
        return any(loader.effective("collate_fn") is None for loader in loaders)
    if _unused_script_class(module, info):
        return False
    if any(name in collate_names or "collat" in name for name in module.inherited_method_names(info)):
        return False  # the dataset brings its own collater (`dataset.collater`), maybe from a base elsewhere
    claimed = _collates_of_other_classes(module, info)
    if any(
        (f.name in collate_names or "collate" in f.name) and f not in claimed and _module_level(module, f)
        for f in module.functions
    ):
        return False  # the file ships a collate for loaders built elsewhere
    return not any(_passes_collate(module, call, info) for call in module.calls)


def _unused_script_class(module: Module, info: ClassInfo) -> bool:
    """A class of a script module (a file outside any package, importable only by the scripts
    beside it) that its own file never builds or names, and that no linted file of the project
    imports by name (nor its module whole): no loader of the project batches it. Only when
    every file beside it is read in this run: otherwise its importers are unknown.

    A package's classes are a library's, handed to loaders the project does not hold; they stay
    reported. Linted alone, with no project, the file's importers are unknown: reported too.
    """
    if module.project is None or not module.module_name or "." in module.module_name:
        return False
    if module.is_package or module.enclosing_class(info.node) is not None:
        return False
    if any(name.id == info.name for name in module.nodes_of(ast.Name)):
        return False  # built, subclassed or handed on in its own file
    if module.project.is_named(module.qualified_prefix + info.name, module.module_name):
        return False
    return module.project.knows_folder(Path(module.path).resolve().parent)


def _collates_of_other_classes(module: Module, info: ClassInfo) -> set[ast.AST]:
    """In-file functions passed as `collate_fn` to loaders of other in-file classes: theirs, not
    evidence for `info`."""
    claimed: set[ast.AST] = set()
    for loader in module.loader_calls:
        dataset = module.loader_dataset_class(loader)
        node = loader.arg("collate_fn").node
        if dataset is None or dataset.node is info.node or node is None:
            continue
        resolved = module.resolve(node)
        if isinstance(resolved, ast.FunctionDef | ast.AsyncFunctionDef):
            claimed.add(resolved)
    return claimed


def _module_level(module: Module, function: FunctionDef) -> bool:
    return module.enclosing_class(function) is None and module.enclosing_function(function) is None


def _passes_collate(module: Module, call: ast.Call, info: ClassInfo) -> bool:
    """A call given `collate_fn=` (or `**options`, which may hold one) that may batch `info`: not a
    loader of another in-file class, not a class of this file being built."""
    if not any(k.arg in {"collate_fn", None} for k in call.keywords):
        return False
    loader = next((loader for loader in module.loader_calls if loader.node is call), None)
    if loader is not None:
        dataset = module.loader_dataset_class(loader)
        return dataset is None or dataset.node is info.node
    # `super().__init__(**kwargs)`, `Base(**options)`: a class of this file is built, nothing batched.
    return module.resolve_class(call.func) is None and not _is_super_call(call)


def _is_super_call(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
    )


# ---- DL503 truncated-images-allowed --------------------------------------------------------------


def truncated_images_allowed(module: Module, *, flags: Sequence[str] = ()) -> Iterator[Match]:
    """`ImageFile.LOAD_TRUNCATED_IMAGES = <truthy literal>`, or the same through setattr."""
    if not imports_any(module, flags):
        return
    for statement in module.nodes_of(ast.Assign):
        if any(module.qualname(t) in flags for t in statement.targets) and _truthy(module, statement.value):
            yield Match(statement)
    for call in module.calls:
        if module.qualname(call.func) == "setattr" and len(call.args) == 3:
            owner, attr, value = call.args
            name = module.literal(attr)
            if (
                isinstance(name, str)
                and f"{module.qualname(owner)}.{name}" in flags
                and _truthy(module, value)
            ):
                yield Match(call)


def _truthy(module: Module, node: ast.expr) -> bool:
    value = module.literal(node)
    return isinstance(value, bool | int) and bool(value)


# ---- DL504 grad-in-dataset -----------------------------------------------------------------------


def grad_in_dataset(
    module: Module,
    *,
    parametric_modules: Sequence[str] = (),
    model_factories: Sequence[str] = (),
    no_grad_contexts: Sequence[str] = (),
) -> Iterator[Match]:
    """requires_grad=True, `.requires_grad_()`, or a call of a module with parameters, in worker code."""
    if not module.worker_functions:
        return
    for call in module.calls:
        if not module.in_worker_code(call) or _without_grad(module, call, no_grad_contexts):
            continue
        what = _grad_source(module, call, parametric_modules, model_factories)
        if what is not None:
            yield Match(call, {"what": what})
    for statement in module.nodes_of(ast.Assign):
        if (
            _sets_requires_grad(module, statement)
            and module.in_worker_code(statement)
            and not _without_grad(module, statement, no_grad_contexts)
        ):
            yield Match(statement, {"what": "`requires_grad = True`"})


def _sets_requires_grad(module: Module, statement: ast.Assign) -> bool:
    targets = any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in statement.targets)
    return targets and module.literal(statement.value) is True


def _turns_grad_on(module: Module, call: ast.Call) -> bool:
    """`.requires_grad_()` with no flag, or one that is literally True; a flag read from a value
    (`requires_grad_(requires_grad=t.requires_grad)`, restoring an input's own flag) is unknown."""
    flags = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "requires_grad")]
    return not flags or module.literal(flags[0]) is True


def _grad_source(
    module: Module, call: ast.Call, parametric: Sequence[str], factories: Sequence[str]
) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == "requires_grad" and module.literal(keyword.value) is True:
            return "`requires_grad=True`"
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "requires_grad_" and module.qualname(func) is None:
        return "`.requires_grad_()`" if _turns_grad_on(module, call) else None
    if is_self_attribute(func):
        assert isinstance(func, ast.Attribute)
        owner = module.enclosing_class(call)
        if owner is not None and _parametric_attribute(
            module, module.class_of(owner), func.attr, parametric, factories
        ):
            return f"calling the module `self.{func.attr}`"
    return None


def _parametric_attribute(
    module: Module, info: ClassInfo, attr: str, parametric: Sequence[str], factories: Sequence[str]
) -> bool:
    """`self.x` holds a module with trainable parameters that nothing froze."""
    values = [a.value for a in self_assignments(module, info) if a.attr == attr]
    if not values or any(v is None for v in values):
        return False
    if _frozen(module, info, attr):
        return False
    return all(_parametric_value(module, v, parametric, factories) for v in values if v is not None)


def _parametric_value(
    module: Module, value: ast.expr, parametric: Sequence[str], factories: Sequence[str]
) -> bool:
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Call)
    ):
        if value.func.attr == "requires_grad_":
            return False
        value = value.func.value  # resnet18(...).eval().to(device)
    if not isinstance(value, ast.Call):
        return False
    qualified = module.qualname(value.func) or ""
    if qualified in parametric or any(qualified == f or qualified.startswith(f + ".") for f in factories):
        return True
    local = module.resolve_class(value.func)
    return local is not None and _local_parametric(module, local, parametric)


def _local_parametric(module: Module, info: ClassInfo, parametric: Sequence[str]) -> bool:
    init = module.method(info, "__init__")
    if init is None:
        return False
    return any(isinstance(n, ast.Call) and module.qualname(n.func) in parametric for n in walk_scope(init))


def _frozen(module: Module, info: ClassInfo, attr: str) -> bool:
    """`self.x.requires_grad_(False)`, or `p.requires_grad = False` over `self.x.parameters()`."""
    for owner in (info, *module.base_classes(info)):
        for method in owner.methods.values():
            for node in walk_scope(method):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"requires_grad_", "parameters"}
                    and is_self_attribute(node.func.value, attr)
                ):
                    return True
    return False


def _without_grad(module: Module, node: ast.AST, contexts: Sequence[str]) -> bool:
    """Inside `with torch.no_grad():`, a function decorated with it, or detached right away."""
    parent = module.parent(node)
    if isinstance(parent, ast.Attribute) and parent.attr == "detach":
        return True
    for ancestor in module.ancestors(node):
        if isinstance(ancestor, ast.With | ast.AsyncWith):
            guards = [item.context_expr for item in ancestor.items]
        elif isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef):
            guards = ancestor.decorator_list
        else:
            continue
        if any(_grad_context(module, guard, contexts) for guard in guards):
            return True
    return False


def _grad_context(module: Module, expr: ast.expr, contexts: Sequence[str]) -> bool:
    call = expr if isinstance(expr, ast.Call) else None
    qualified = module.qualname(call.func if call is not None else expr)
    if qualified is None or qualified not in contexts:
        return False
    if qualified.endswith("set_grad_enabled"):
        return call is not None and bool(call.args) and module.literal(call.args[0]) is False
    return True


# ---- DL505 unsafe-torch-load ---------------------------------------------------------------------


def unsafe_torch_load(module: Module, *, loaders: Sequence[str] = ()) -> Iterator[Match]:
    """`torch.load` without `weights_only=True` in dataset methods and in code the workers run."""
    if not module.dataset_classes and not module.worker_functions:
        return
    for call in module.calls:
        if module.qualname(call.func) not in loaders:
            continue
        if not (module.in_worker_code(call) or _in_dataset_class(module, call)):
            continue
        if not full_pickle_load(module, call):
            continue  # weights_only=True, options the linter cannot see, or a custom unpickler
        weights_only = next((k.value for k in call.keywords if k.arg == "weights_only"), None)
        source = f"`{module.segment(call.args[0])}`" if call.args else "a file"
        how = (
            "relies on the `weights_only` default, which is full pickle (running any code the file carries) "
            "before PyTorch 2.6"
            if weights_only is None
            else "with `weights_only=False` unpickles everything, running any code the file carries"
        )
        yield Match(call, {"source": source, "how": how})


def _in_dataset_class(module: Module, node: ast.AST) -> bool:
    for ancestor in module.ancestors(node):
        if isinstance(ancestor, ast.ClassDef):
            return module.is_dataset(module.class_of(ancestor))
    return False


# ---- DL506 private-collate-import ----------------------------------------------------------------

PRIVATE_PACKAGE = "torch.utils.data._utils"
PRIVATE_OWNER = "/torch/utils/data/"


def private_collate_import(
    module: Module, *, public_names: Mapping[str, str] | None = None
) -> Iterator[Match]:
    """Imports from torch.utils.data._utils of names that torch.utils.data exports publicly."""
    public_names = public_names or {}
    if PRIVATE_OWNER in module.path.replace("\\", "/"):
        return  # torch.utils.data's own modules: private to the package is not private to itself
    for node in module.nodes_of(ast.ImportFrom):
        if node.level or not node.module:
            continue
        private = [
            f"{node.module}.{alias.name}"
            for alias in node.names
            if f"{node.module}.{alias.name}" in public_names
        ]
        if private:
            yield _private_match(node, private, public_names)
        elif _imports_private_module(node) and (used := _private_uses(module, public_names)):
            yield _private_match(node, used, public_names)
    for node in module.nodes_of(ast.Import):
        if any(alias.name.startswith(PRIVATE_PACKAGE) for alias in node.names):
            used = _private_uses(module, public_names)
            if used:
                yield _private_match(node, used, public_names)


def _imports_private_module(node: ast.ImportFrom) -> bool:
    assert node.module is not None
    if node.module.startswith(PRIVATE_PACKAGE):
        return True
    return node.module == "torch.utils.data" and any(alias.name == "_utils" for alias in node.names)


def _private_uses(module: Module, public_names: Mapping[str, str]) -> list[str]:
    used = {q for n in module.nodes_of(ast.Attribute) if (q := module.qualname(n)) and q in public_names}
    return sorted(used)


def _private_match(node: ast.stmt, private: list[str], public_names: Mapping[str, str]) -> Match:
    names = ", ".join(dict.fromkeys(p.rpartition(".")[2] for p in private))
    public = ", ".join(dict.fromkeys(public_names[p] for p in private))
    return Match(node, {"name": names, "public": public})


# ---- DL507 missing-dataset-protocol --------------------------------------------------------------


def missing_dataset_protocol(
    module: Module, *, map_style_bases: Sequence[str] = (), length_samplers: Sequence[str] = ()
) -> Iterator[Match]:
    """A map-style Dataset subclass without `__getitem__`, or without `__len__` where a sampler needs it."""
    subclassed = {base.node for info in module.classes for base in module.base_classes(info)}
    for info in module.dataset_classes:
        if (
            info.node in subclassed
            or module.subclassed_elsewhere(info)
            or not _plain_map_style(module, info, map_style_bases)
            or _abstract(module, info)
        ):
            continue
        if _defines(module, info, "__getattr__"):
            continue
        if not _defines(module, info, "__getitem__") and not _defines(module, info, "__getitems__"):
            problem = (
                "has no `__getitem__`: the DataLoader's first batch raises `NotImplementedError`; "
                "define `__getitem__`, or derive from IterableDataset if it is a stream."
            )
            yield Match(info.node, {"cls": info.name, "problem": problem})
        elif not _defines(module, info, "__len__") and _length_needed(module, info, length_samplers):
            problem = (
                "has no `__len__`, but its loader's sampler calls `len(dataset)`: iterating raises "
                "`TypeError: object of type ... has no len()`; define `__len__` "
                "or pass a sampler that needs none."
            )
            yield Match(info.node, {"cls": info.name, "problem": problem})


def _defines(module: Module, info: ClassInfo, name: str) -> bool:
    return module.method(info, name) is not None


def _plain_map_style(module: Module, info: ClassInfo, map_style_bases: Sequence[str]) -> bool:
    """Every base outside the file is a plain map-style Dataset (or neutral), and at least one is."""
    external = _external_base_names(module, info)
    if any(name is None or (name not in map_style_bases and name not in NEUTRAL_BASES) for name in external):
        return False
    return any(name in map_style_bases for name in external)


def _abstract(module: Module, info: ClassInfo) -> bool:
    """Declared abstract, or shaped like a base: no state of its own (no `__init__` anywhere in
    its in-file ancestry) and never built in this file, so its subclasses, maybe in other files,
    complete it."""
    if module.method(info, "__init__") is None and not any(
        module.resolve_class(call.func) is info for call in module.calls
    ):
        return True
    for owner in (info, *module.base_classes(info)):
        for keyword in owner.node.keywords:
            if keyword.arg == "metaclass":
                return True
        for method in owner.methods.values():
            if any(
                (module.qualname(d) or dotted(d) or "").endswith("abstractmethod")
                for d in method.decorator_list
            ):
                return True
    return False


def _length_needed(module: Module, info: ClassInfo, length_samplers: Sequence[str]) -> bool:
    for loader in loaders_of(module, info):
        if loader.effective("sampler") is None and loader.effective("batch_sampler") is None:
            return True
    for call in module.calls:
        if module.qualname(call.func) in length_samplers and call.args:
            built = module.resolve(call.args[0])
            cls = module.resolve_class(built.func) if isinstance(built, ast.Call) else None
            if cls is not None and cls.node is info.node:
                return True
    return False


# ---- DL508 len-of-unsized-iterable ---------------------------------------------------------------


def len_of_unsized_iterable(module: Module, *, unsized_bases: Sequence[str] = ()) -> Iterator[Match]:
    """`len(x)` where x is surely a loader over (or an instance of) an IterableDataset with no `__len__`."""
    unsized = [info for info in module.dataset_classes if _certainly_unsized(module, info, unsized_bases)]
    if not unsized:
        return
    loaders = {id(loader.node): loader for loader in module.loader_calls}
    for call in module.calls:
        if module.qualname(call.func) != "len" or len(call.args) != 1:
            continue
        value = module.resolve(call.args[0])
        if not isinstance(value, ast.Call):
            continue
        loader = loaders.get(id(value))
        built = (
            module.loader_dataset_class(loader) if loader is not None else module.resolve_class(value.func)
        )
        if built is not None and any(built.node is info.node for info in unsized):
            yield Match(call, {"call": module.segment(call), "cls": built.name})


def _certainly_unsized(module: Module, info: ClassInfo, unsized_bases: Sequence[str]) -> bool:
    """No `__len__` in the class or its in-file bases, and every outside base is known to have none."""
    if module.method(info, "__len__") is not None or module.method(info, "__getattr__") is not None:
        return False
    external = _external_base_names(module, info)
    return bool(external) and all(name in unsized_bases for name in external)


def _external_base_names(module: Module, info: ClassInfo) -> list[str | None]:
    """Qualified names of the bases outside the file (None for one the linter cannot name)."""
    names: list[str | None] = []
    for owner in (info, *module.base_classes(info)):
        for base in owner.bases:
            expr = base.value if isinstance(base, ast.Subscript) else base
            if module.resolve_class(expr) is None:
                names.append(module.qualname(expr) or dotted(expr))
    return names


MATCHERS: dict[str, Any] = {
    "iterable-without-sharding": iterable_without_sharding,
    "getitem-returns-none": getitem_returns_none,
    "truncated-images-allowed": truncated_images_allowed,
    "grad-in-dataset": grad_in_dataset,
    "unsafe-torch-load": unsafe_torch_load,
    "private-collate-import": private_collate_import,
    "missing-dataset-protocol": missing_dataset_protocol,
    "len-of-unsized-iterable": len_of_unsized_iterable,
}

"""Matchers for handles, threads, devices and processes that do not survive the trip into a worker.

DL201 (a handle opened in `__init__`), DL202 (OpenCV's thread pool in workers), DL203 (CUDA in
workers), DL204 (processes started from workers), DL205 (a fast tokenizer used before the fork),
DL206 (a handle opened at import and used by forked workers).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from typing import Any

from datalint.lint.matchers.common import full_pickle_load, walk_scope
from datalint.lint.matchers.pickling import (
    STATE_HOOKS,
    FunctionDefs,
    loader_start_method,
)
from datalint.lint.module import (
    START_METHODS,
    ClassInfo,
    LoaderCall,
    Match,
    Module,
    WorkerFunction,
    self_attribute,
    self_attribute_writes,
)
from datalint.records import record

HOOKS: tuple[str, ...] = ("collate_fn", "worker_init_fn")
FRESH_INTERPRETERS: tuple[str, ...] = ("spawn", "forkserver")

# ---- shared helpers ------------------------------------------------------------------------------


def runs_in_workers(module: Module, node: ast.AST) -> WorkerFunction | None:
    """The worker function around `node`, unless it is only reached through loaders without workers.

    With `num_workers=0` a `collate_fn` runs in the training process, where CUDA and pools are fine;
    a hook knows its loader (`WorkerFunction.loader`), a method its class.
    """
    worker = module.worker_function_of(node)
    if worker is None:
        return None
    owner = module.enclosing_class(worker.node)
    if owner is not None and module.read_only_without_workers(module.class_of(owner)):
        return None
    if worker.loader is not None and worker.loader.workers_known_zero:
        return None
    return worker


def hooked_loaders(module: Module, function: ast.AST, hooks: Sequence[str] = HOOKS) -> tuple[LoaderCall, ...]:
    """The loaders that pass `function` as one of `hooks`, directly or as `functools.partial(function)`."""
    found = []
    for loader in module.loader_calls:
        for hook in hooks:
            node = loader.arg(hook).node
            resolved = module.resolve(node) if node is not None else None
            if (
                isinstance(resolved, ast.Call)
                and module.qualname(resolved.func) == "functools.partial"
                and resolved.args
            ):
                resolved = module.resolve(resolved.args[0])
            if resolved is function:
                found.append(loader)
                break
    return tuple(found)


def class_family(module: Module, info: ClassInfo) -> set[ast.ClassDef]:
    """The class, its in-file bases and its in-file subclasses: the objects its methods may act on."""
    family = {info.node, *(base.node for base in module.base_classes(info))}
    family.update(c.node for c in module.classes if info.node in {b.node for b in module.base_classes(c)})
    return family


def loaders_reaching(module: Module, worker: WorkerFunction) -> tuple[LoaderCall, ...]:
    """The file's loaders whose workers run `worker`: those of its class (and the class's in-file
    subclasses), or those it is a hook of; () when the file does not tell."""
    owner = module.enclosing_class(worker.node)
    if owner is not None:
        info = module.class_of(owner)
        subclasses = [c for c in module.classes if owner in {b.node for b in module.base_classes(c)}]
        return tuple(loader for c in (info, *subclasses) for loader in module.loaders_of(c))
    found = {id(loader.node): loader for loader in hooked_loaders(module, worker.node)}
    if worker.loader is not None:
        found.setdefault(id(worker.loader.node), worker.loader)
    return tuple(found.values())


def process_start_method(module: Module) -> str | None:
    """The start method `set_start_method(...)` chooses for the whole process, if the file says one."""
    methods = {
        site.method
        for site in module.start_method_sites
        if site.via == "set_start_method" and site.method in START_METHODS
    }
    return methods.pop() if len(methods) == 1 else None


def start_method_of(module: Module, loaders: Sequence[LoaderCall]) -> str | None:
    """The start method the workers of these loaders use, when the code decides it: the one each
    loader names (`multiprocessing_context=`), else the process's (`set_start_method`); else None.

    One loader's `multiprocessing_context="spawn"` decides that loader only, not the file.
    """
    process = process_start_method(module)
    if not loaders:
        return process
    methods = {loader_start_method(module, loader) or process for loader in loaders}
    return methods.pop() if len(methods) == 1 else None


def forks_workers(module: Module, worker: WorkerFunction) -> bool:
    """Whether the workers that run `worker` may be forked (not known to start a fresh interpreter).

    A helper that no class or loader of the file names as its own (called from a method, say)
    may run in any of the file's workers: the start method the file asks for, if one, decides it.
    """
    loaders = loaders_reaching(module, worker)
    if not loaders and module.enclosing_class(worker.node) is None:
        return module.start_method not in FRESH_INTERPRETERS
    return start_method_of(module, loaders) not in FRESH_INTERPRETERS


def is_generator_function(function: ast.AST) -> bool:
    """A def whose own body yields (nested defs and lambdas do not count)."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            pending.extend(ast.iter_child_nodes(node))
    return False


# ---- DL201 handle-opened-in-init ---------------------------------------------------------------------


def handle_opened_in_init(
    module: Module, *, calls: Sequence[str] = ("open",), npz_calls: Sequence[str] = ("numpy.load",)
) -> Iterator[Match]:
    """A Dataset's `__init__` (or a helper only it calls) storing a handle on self."""
    reported: set[ast.stmt] = set()  # a base's `__init__` reached from several subclasses: once
    for info in module.dataset_classes:
        init = info.methods.get("__init__")
        if init is None or any(module.method(info, hook) for hook in STATE_HOOKS):
            continue
        if module.read_only_without_workers(info):
            continue  # no worker ever receives the handle: it stays in the process that opened it
        init_methods = _init_methods(module, info, init)
        for method in init_methods:
            for attribute, value, statement in self_attribute_writes(method):
                handle = _stored_handle(module, info, value, calls, npz_calls)
                if handle is None or _released(module, info, init_methods, attribute, statement):
                    continue
                if _reassigned_elsewhere(module, info, init_methods, attribute):
                    continue  # re-opened lazily, in __setstate__, or by a worker_init_fn
                if statement not in reported:
                    reported.add(statement)
                    yield Match(statement, {"attribute": attribute, "call": handle})


def _init_methods(
    module: Module, info: ClassInfo, init: ast.FunctionDef | ast.AsyncFunctionDef
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """`__init__` and the methods of the class it calls (`self._open()`) that never run in workers."""
    found = [init]
    for function in found:
        for node in ast.walk(function):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if self_attribute(node.func) is not None:
                method = module.method(info, node.func.attr)
            else:
                method = _base_method(module, info, node.func)
            if method is not None and method not in found and not module.in_worker_code(method):
                found.append(method)
    return found


def _base_method(
    module: Module, info: ClassInfo, func: ast.Attribute
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """`super().__init__(...)` or `Mixin.__init__(self, ...)`: the in-file base's method it runs
    (a mixin that is no Dataset itself may open the handle the Dataset keeps)."""
    bases = list(module.base_classes(info))
    owner = func.value
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
        return next((b.methods[func.attr] for b in bases if func.attr in b.methods), None)
    named = module.resolve_class(owner) if isinstance(owner, ast.Name) else None
    if named is None or all(named.node is not b.node for b in bases):
        return None
    return module.method(named, func.attr)


def _stored_handle(
    module: Module, info: ClassInfo, value: ast.expr, calls: Sequence[str], npz_calls: Sequence[str]
) -> str | None:
    """What handle `value` stores: `h5py.File`, "a generator", ... (also inside lists and comprehensions)."""
    for part in _stored_parts(module, value, 0):
        if isinstance(part, ast.GeneratorExp):
            return "a generator expression"
        if not isinstance(part, ast.Call):
            continue
        name = module.qualname(part.func)
        if name in calls:
            return name
        if name in npz_calls and _loads_npz(module, part):
            return f"{name} of an .npz archive"
        function = _called_function(module, info, part)
        if function is not None and is_generator_function(function):
            return f"the generator `{function.name}()`"
        if function is not None and (returned := _returned_handle(module, function, calls)) is not None:
            return f"{returned} (via `{function.name}()`)"
    return None


def _stored_parts(module: Module, expr: ast.expr, depth: int) -> Iterator[ast.expr]:
    """`expr` and the elements of containers and comprehensions it builds, through sole bindings."""
    if depth > 4:
        return
    if isinstance(expr, ast.Name):
        resolved = module.resolve(expr)
        if resolved is not expr and isinstance(resolved, ast.expr):
            yield from _stored_parts(module, resolved, depth + 1)
        return
    yield expr
    children: list[ast.expr] = []
    if isinstance(expr, ast.List | ast.Tuple | ast.Set):
        children = list(expr.elts)
    elif isinstance(expr, ast.Dict):
        children = list(expr.values)
    elif isinstance(expr, ast.ListComp | ast.SetComp):
        children = [expr.elt]
    elif isinstance(expr, ast.DictComp):
        children = [expr.value]
    elif isinstance(expr, ast.IfExp):
        children = [expr.body, expr.orelse]
    for child in children:
        yield from _stored_parts(module, child, depth + 1)


def _loads_npz(module: Module, call: ast.Call) -> bool:
    """`np.load("x.npz")`, `np.load(root / "x.npz")`, `np.load(f"{name}.npz")`: a lazy zip archive."""
    if not call.args:
        return False
    for node in ast.walk(call.args[0]):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".npz"):
            return True
    return False


def _called_function(
    module: Module, info: ClassInfo, call: ast.Call
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The in-file function (`helper()`) or method of the class (`self.helper()`) a call runs."""
    if isinstance(call.func, ast.Name):
        bound = module.binding(call.func)
        return bound if isinstance(bound, FunctionDefs) else None
    if self_attribute(call.func) is not None and isinstance(call.func, ast.Attribute):
        return module.method(info, call.func.attr)
    return None


def _returned_handle(
    module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef, calls: Sequence[str]
) -> str | None:
    """The handle factory a helper returns (`return lmdb.open(path)`, or `cap = cv2.VideoCapture(src)`
    ... `return cap` through the name's sole binding), if any. A function nested in the helper that
    opens the handle when called is returned unopened: only the helper's own returns count."""
    for node in walk_scope(function):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = module.resolve(node.value)
        if isinstance(value, ast.Call) and (name := module.qualname(value.func)) in calls:
            return name
    return None


def _released(
    module: Module, info: ClassInfo, init_methods: Sequence[ast.AST], attribute: str, opened: ast.stmt
) -> bool:
    """`self.x = None`, `del self.x`, or (when this class's workers fork) `self.x.close()` after opening.

    A closed handle object still fails to pickle under spawn; which start method applies is
    decided by the class's own loaders (or the process), not by another loader of the file.
    """
    opened_in = module.enclosing_function(opened)
    chosen = start_method_of(module, module.loaders_of(info))
    closing_is_enough = (chosen or module.default_start_method) == "fork"
    for method in init_methods:
        for node in ast.walk(method):
            if method is opened_in and getattr(node, "lineno", 0) <= opened.lineno:
                continue  # only what happens after the handle was opened releases it
            if _clears(node, attribute) or (closing_is_enough and _closes(node, attribute)):
                return True
    return False


def _clears(node: ast.AST, attribute: str) -> bool:
    """`self.x = None` or `del self.x`."""
    if isinstance(node, ast.Delete):
        return any(self_attribute(target) == attribute for target in node.targets)
    return (
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and node.value.value is None
        and any(self_attribute(target) == attribute for target in node.targets)
    )


def _closes(node: ast.AST, attribute: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "close"
        and self_attribute(node.func.value) == attribute
    )


def _reassigned_elsewhere(
    module: Module, info: ClassInfo, init_methods: Sequence[ast.AST], attribute: str
) -> bool:
    """Whether code outside `__init__` re-sets the attribute on this class's objects.

    `self.x = ...` counts only in a method of the class itself or of its in-file bases and
    subclasses: a sibling class's lazy re-open fixes that sibling, not this one. `obj.x = ...`
    elsewhere (a `worker_init_fn` setting `get_worker_info().dataset.x`) counts unless it certainly
    acts on other objects: `obj` is built from another class, or the function is a hook only of
    loaders whose datasets are other classes of the file.
    """
    family = class_family(module, info)
    for node in module.nodes_of(ast.Assign, ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        hits = [t for t in targets if isinstance(t, ast.Attribute) and t.attr == attribute]
        if not hits:
            continue
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            continue  # a `close()` method that clears the handle does not re-open it
        function = module.enclosing_function(node)
        if function is None or function in init_methods:
            continue
        owner = module.enclosing_class(node)
        on_self = all(isinstance(t.value, ast.Name) and t.value.id == "self" for t in hits)
        if on_self and owner is not None:
            if owner in family:
                return True
        elif _may_reach(module, family, function, hits):
            return True
    return False


def _may_reach(
    module: Module, family: set[ast.ClassDef], function: ast.AST, targets: Sequence[ast.Attribute]
) -> bool:
    """Whether `obj.x = ...` in `function` may act on an object of one of the `family` classes."""
    for target in targets:
        built = module.resolve(target.value)
        made = module.resolve_class(built.func) if isinstance(built, ast.Call) else None
        if made is not None and made.node not in family:
            continue  # `other = Other(); other.x = ...`
        loaders = hooked_loaders(module, function, ("worker_init_fn",))
        if loaders and all(
            (dataset := module.loader_dataset_class(loader)) is not None and dataset.node not in family
            for loader in loaders
        ):
            continue  # the worker_init_fn of other classes' loaders only
        return True
    return False


# ---- DL202 opencv-threads-in-workers -------------------------------------------------------------------


def opencv_threads_in_workers(
    module: Module,
    *,
    package: str = "cv2",
    limit_calls: Sequence[str] = ("cv2.setNumThreads",),
    ignored_calls: Sequence[str] = (),
) -> Iterator[Match]:
    """The first OpenCV call in worker code that no thread limit covers.

    A limit at module level, or in code that runs in the parent (inherited by forked workers),
    covers the whole file. A limit in worker code covers only what shares its workers: in a
    `worker_init_fn`, the loaders that pass it and their datasets; in a method, the class.
    """
    prefix = f"{package}."
    if not any(target == package or target.startswith(prefix) for target in module.imports.values()):
        return
    limits = _ThreadLimits.of(module, limit_calls)
    if limits.file_wide:
        return
    first: ast.Call | None = None
    for call in module.calls:
        name = module.qualname(call.func) or ""
        if not name.startswith(prefix) or name in ignored_calls or name in limit_calls:
            continue
        worker = runs_in_workers(module, call)
        if worker is None or limits.cover(module, worker):
            continue
        if worker.chain and _limited_elsewhere(module, worker, limit_calls):
            continue  # reached from another file, where the threads are limited before workers start
        if first is None or (call.lineno, call.col_offset) < (first.lineno, first.col_offset):
            first = call
    if first is not None:
        yield Match(first, {"call": f"{module.segment(first.func)}(...)"})


def _limited_elsewhere(module: Module, worker: WorkerFunction, limit_calls: Sequence[str]) -> bool:
    """A limit at module level or in a top-level function of a linted file (a training script, its
    `main()`, a `worker_init_fn`: which workers it reaches is not known, so it may be these), or in
    the `__init__` of a base in another file of the class whose method this is (as in one file)."""
    project = module.project
    if project is None:
        return False
    if any(project.called_at_module_level(c) for c in limit_calls):
        return True
    owner = module.enclosing_class(worker.node)
    bases = module.project_bases_of(module.class_of(owner)) if owner is not None else ()
    return any(c in ref.summary.init_calls for ref in bases for c in limit_calls)


@record
class _ThreadLimits:
    """Where a file limits a library's threads: everywhere, or for some classes and loaders."""

    file_wide: bool
    classes: frozenset[ast.ClassDef]  # a limit in a method: the class and its in-file relatives
    loaders: frozenset[int]  # ids of loader calls whose worker_init_fn limits
    unknown: bool  # a worker_init_fn limit of a loader whose dataset the file does not name

    @classmethod
    def of(cls, module: Module, limit_calls: Sequence[str]) -> _ThreadLimits:
        classes: set[ast.ClassDef] = set()
        loaders: set[int] = set()
        unknown = False
        for call in module.calls:
            if module.qualname(call.func) not in limit_calls:
                continue
            worker = module.worker_function_of(call)
            if worker is None:
                return cls(True, frozenset(), frozenset(), False)  # module level or the parent
            owner = module.enclosing_class(worker.node)
            hooked = loaders_reaching(module, worker) if owner is None else ()
            if owner is not None:
                classes.update(class_family(module, module.class_of(owner)))
            elif hooked:
                loaders.update(id(loader.node) for loader in hooked)
                unknown = unknown or any(module.loader_dataset_class(loader) is None for loader in hooked)
            else:  # a helper the file's loaders do not name: whose workers run it is not known
                return cls(True, frozenset(), frozenset(), False)
        return cls(False, frozenset(classes), frozenset(loaders), unknown)

    def cover(self, module: Module, worker: WorkerFunction) -> bool:
        """Whether the limits run in the workers that run `worker`."""
        owner = module.enclosing_class(worker.node)
        reaching = loaders_reaching(module, worker)
        if owner is not None and owner in self.classes:
            return True
        if reaching:
            return all(id(loader.node) in self.loaders for loader in reaching)
        # Workers the file does not name (a dataset read by another file's loader, a helper):
        # only a limit of a loader whose dataset is unknown may be theirs.
        return self.unknown or (owner is None and bool(self.classes or self.loaders))


# ---- DL203 cuda-in-worker -----------------------------------------------------------------------------


def cuda_in_worker(
    module: Module,
    *,
    cuda_modules: Sequence[str] = ("torch.cuda",),
    harmless_calls: Sequence[str] = (),
    load_calls: Sequence[str] = ("torch.load",),
) -> Iterator[Match]:
    """CUDA in worker code, CUDA tensors stored in a Dataset's `__init__`, loads without map_location."""
    if not module.has_data_code:
        return
    for call in module.calls:
        worker = runs_in_workers(module, call)
        if worker is None:
            continue
        where = f"in DataLoader workers (`{worker.reason}`)"
        what = _cuda_use(module, call, cuda_modules, harmless_calls)
        if what:
            yield Match(call, {"what": f"{what} uses CUDA", "where": where})
        elif (
            module.qualname(call.func) in load_calls
            and not _has_map_location(call)
            and not _holds_only_numpy(module, call)
            and not full_pickle_load(module, call)  # DL505's, whose fix adds map_location too
        ):
            what = (
                f"`{module.segment(call.func)}(...)` without `map_location` "
                "restores tensors on the GPU they were saved from"
            )
            yield Match(call, {"what": what, "where": where})
    for info in module.dataset_classes:
        init = info.methods.get("__init__")
        if init is None or module.read_only_without_workers(info):
            continue
        for attribute, value, _statement in self_attribute_writes(init):
            for node in ast.walk(value):
                what = (
                    _cuda_use(module, node, cuda_modules, harmless_calls)
                    if isinstance(node, ast.Call)
                    else ""
                )
                if what:
                    where = f"puts a CUDA tensor in `self.{attribute}`, which every worker receives"
                    yield Match(node, {"what": what, "where": where})


def _cuda_use(
    module: Module, call: ast.Call, cuda_modules: Sequence[str], harmless_calls: Sequence[str]
) -> str:
    """How a call uses CUDA (`.cuda()`, `.to("cuda")`, `device="cuda"`, `torch.cuda.*`), or ""."""
    name = module.qualname(call.func) or ""
    if any(name.startswith(f"{prefix}.") for prefix in cuda_modules):
        return "" if name in harmless_calls else f"`{module.segment(call.func)}()`"
    if isinstance(call.func, ast.Attribute) and not name:
        if call.func.attr == "cuda":
            return "`.cuda()`"
        if call.func.attr == "to" and call.args and _is_cuda_device(module, call.args[0]):
            return f"`.to({module.segment(call.args[0])})`"
    for keyword in call.keywords:
        if keyword.arg == "device" and _is_cuda_device(module, keyword.value):
            return f"`device={module.segment(keyword.value)}`"
    return ""


def _is_cuda_device(module: Module, expr: ast.expr) -> bool:
    """`"cuda"`, `"cuda:0"`, `torch.device("cuda")`, or a name bound once to one of those."""
    value = module.literal(expr)
    if isinstance(value, str):
        return value.startswith("cuda")
    resolved = module.resolve(expr)
    if isinstance(resolved, ast.Call) and module.qualname(resolved.func) == "torch.device" and resolved.args:
        inner = module.literal(resolved.args[0])
        return isinstance(inner, str) and inner.startswith("cuda")
    return False


def _holds_only_numpy(module: Module, load: ast.Call) -> bool:
    """The loaded value is only ever handed to `torch.from_numpy` (whole or indexed): it holds numpy
    arrays, which `torch.load` never puts on a GPU (`from_numpy` refuses a tensor)."""
    if _into_from_numpy(module, load):
        return True
    uses = module.uses_of_assigned(load)
    return bool(uses) and all(_into_from_numpy(module, use) for use in uses)


def _into_from_numpy(module: Module, node: ast.expr) -> bool:
    """`torch.from_numpy(node)` or `torch.from_numpy(node[key])`."""
    parent = module.parent(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        node, parent = parent, module.parent(parent)
    return (
        isinstance(parent, ast.Call)
        and parent.args[:1] == [node]
        and module.qualname(parent.func) == "torch.from_numpy"
    )


def _has_map_location(call: ast.Call) -> bool:
    """`map_location=` given, positionally (second argument), or possibly through `**kwargs`."""
    if len(call.args) >= 2 or any(isinstance(a, ast.Starred) for a in call.args):
        return True
    return any(keyword.arg in ("map_location", None) for keyword in call.keywords)


# ---- DL204 multiprocessing-in-worker --------------------------------------------------------------------


def multiprocessing_in_worker(
    module: Module,
    *,
    calls: Sequence[str] = ("multiprocessing.Pool",),
    context_methods: Sequence[str] = ("Pool", "Process"),
) -> Iterator[Match]:
    """Process pools, processes or loaders with workers created in worker code."""
    loaders = {id(loader.node): loader for loader in module.loader_calls}
    for call in module.calls:
        if runs_in_workers(module, call) is None:
            continue
        loader = loaders.get(id(call))
        if (
            module.qualname(call.func) in calls
            or _context_method(module, call, context_methods)
            or (loader is not None and loader.workers_known_positive)
        ):
            yield Match(call, {"call": f"{module.segment(call.func)}(...)"})


def _context_method(module: Module, call: ast.Call, context_methods: Sequence[str]) -> bool:
    """`mp.get_context("spawn").Pool(4)`, or `ctx.Process(...)` with `ctx = get_context(...)`."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in context_methods:
        return False
    owner = module.resolve(call.func.value)
    return isinstance(owner, ast.Call) and (module.qualname(owner.func) or "").endswith(".get_context")


# ---- DL205 tokenizer-fork-parallelism ------------------------------------------------------------------


def tokenizer_fork_parallelism(
    module: Module,
    *,
    factories: Sequence[str] = (),
    fast_class_suffix: str = "TokenizerFast",
    use_methods: Sequence[str] = ("encode", "__call__"),
    environment_variable: str = "TOKENIZERS_PARALLELISM",
) -> Iterator[Match]:
    """A fast tokenizer called in the parent and in workers, with its parallelism left undecided."""
    # The variable is the process's: code that sets it anywhere decides it for every tokenizer.
    if _names_in_code(module, environment_variable):
        return
    holders = _tokenizer_holders(module, factories, fast_class_suffix)
    if not holders:
        return
    uses: dict[tuple[Any, ...], list[ast.Call]] = {}
    for call in module.calls:
        holder = _used_holder(module, call, holders, use_methods)
        if holder is not None:
            uses.setdefault(holder, []).append(call)
    for calls in uses.values():
        parent = [c for c in calls if runs_in_workers(module, c) is None]
        # Fork-only: a worker whose own loader (or the process) asks for a fresh interpreter
        # re-creates the tokenizer instead of inheriting a used one.
        workers = [w for c in calls if (w := runs_in_workers(module, c)) is not None]
        forked = [w for w in workers if forks_workers(module, w)]
        if parent and forked:
            first = min(parent, key=lambda c: (c.lineno, c.col_offset))
            yield Match(first, {"call": f"{module.segment(first.func)}(...)"})


def _names_in_code(module: Module, name: str) -> bool:
    """Whether code (not a comment or a docstring) names `name`: `os.environ["NAME"] = ...`,
    `os.environ.setdefault("NAME", ...)`, `os.environ.update(NAME=...)`."""
    if name not in module.source:
        return False  # the cheap test first
    for node in module.nodes_of(ast.Constant):
        if node.value == name and not isinstance(module.parent(node), ast.Expr):
            return True
    return any(keyword.arg == name for keyword in module.nodes_of(ast.keyword))


def _tokenizer_holders(module: Module, factories: Sequence[str], suffix: str) -> set[tuple[Any, ...]]:
    """Where fast tokenizers are kept: ("name", id of the creating call) or ("self", class, attribute)."""
    holders: set[tuple[Any, ...]] = set()
    for call in module.calls:
        if not _is_fast_tokenizer(module, call, factories, suffix):
            continue
        holders.add(("name", id(call)))
        parent = module.parent(call)
        if isinstance(parent, ast.Assign | ast.AnnAssign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            owner = module.enclosing_class(call)
            for target in targets:
                attribute = self_attribute(target)
                if attribute is not None and owner is not None:
                    holders.add(("self", id(owner), attribute))
    return holders


def _used_holder(
    module: Module, call: ast.Call, holders: set[tuple[Any, ...]], use_methods: Sequence[str]
) -> tuple[Any, ...] | None:
    """Which fast tokenizer a call uses: `tok(...)`, `tok.encode(...)`, `self.tok(...)`; else None."""
    target = call.func
    if isinstance(target, ast.Attribute) and target.attr in use_methods and self_attribute(target) is None:
        target = target.value
    if isinstance(target, ast.Name):
        key: tuple[Any, ...] = ("name", id(module.resolve(target)))
    else:
        attribute = self_attribute(target)
        owner = module.enclosing_class(call) if attribute is not None else None
        if owner is None:
            return None
        key = ("self", id(owner), attribute)
    return key if key in holders else None


def _is_fast_tokenizer(module: Module, call: ast.Call, factories: Sequence[str], suffix: str) -> bool:
    name = module.qualname(call.func) or ""
    if not name or any(k.arg == "use_fast" and module.literal(k.value) is False for k in call.keywords):
        return False
    if name in factories:
        return True
    owner = name.rpartition(".")[0] if name.endswith(".from_pretrained") else name
    return owner.endswith(suffix)


# ---- DL206 module-handle-in-worker ---------------------------------------------------------------------


def module_handle_in_worker(
    module: Module, *, calls: Sequence[str] = ("open",), npz_calls: Sequence[str] = ("numpy.load",)
) -> Iterator[Match]:
    """A handle opened at import time (module level) and used by worker code: shared by forked workers."""
    for statement in module.tree.body:
        if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call)):
            continue
        name = module.qualname(statement.value.func)
        is_handle = name in calls or (name in npz_calls and _loads_npz(module, statement.value))
        targets = [t for t in statement.targets if isinstance(t, ast.Name)]
        if not is_handle or len(targets) != 1:
            continue
        if _used_in_workers(module, targets[0]):
            yield Match(statement, {"name": targets[0].id, "call": name})


def _used_in_workers(module: Module, target: ast.Name) -> bool:
    for node in module.nodes_of(ast.Name):
        if (
            node.id == target.id
            and isinstance(node.ctx, ast.Load)
            and (worker := runs_in_workers(module, node)) is not None
            and forks_workers(module, worker)  # a spawned worker re-imports and opens its own
        ):
            bound = module.binding(node)
            if bound is not None and module.parent(bound) is module.parent(target):
                return True
    return False


MATCHERS: dict[str, Any] = {
    "handle-opened-in-init": handle_opened_in_init,
    "opencv-threads-in-workers": opencv_threads_in_workers,
    "cuda-in-worker": cuda_in_worker,
    "multiprocessing-in-worker": multiprocessing_in_worker,
    "tokenizer-fork-parallelism": tokenizer_fork_parallelism,
    "module-handle-in-worker": module_handle_in_worker,
}

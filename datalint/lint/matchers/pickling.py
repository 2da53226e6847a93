"""Matchers for what must pickle to start workers under spawn/forkserver (DL101-DL104).

Under spawn and forkserver a worker receives the dataset, `collate_fn` and `worker_init_fn`
pickled, and re-imports the main script as `__mp_main__`. Pickle stores functions and classes
by qualified name, so lambdas, functions or classes defined inside functions, and anything
defined under `if __name__ == "__main__":` cannot reach a worker. The sampler stays in the
parent and is never pickled.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from datalint.lint.matchers.common import FunctionDef, dotted, parameter_defaults, walk_scope
from datalint.lint.matchers.loader_usage import (
    assigned_name,
    call_name,
    iterated_operands,
    iterating_call_operand,
    loader_for,
)
from datalint.lint.module import (
    START_METHODS,
    ClassInfo,
    LoaderCall,
    Match,
    Module,
    Related,
    self_attribute_writes,
)
from datalint.lint.project import HandOver, Link

FunctionDefs = (ast.FunctionDef, ast.AsyncFunctionDef)
# Methods through which a class decides itself what pickling keeps.
STATE_HOOKS: tuple[str, ...] = ("__getstate__", "__reduce__", "__reduce_ex__")

# Calls that look at a loader, or file it away, without starting its workers.
INSPECTING_CALLS: frozenset[str] = frozenset(
    {"len", "print", "repr", "str", "id", "type", "isinstance", "hasattr", "getattr", "setattr", "vars"}
    | {"append", "extend", "insert", "add", "update", "setdefault", "dict"}
)


# ---- shared helpers ------------------------------------------------------------------------------


def loader_start_method(module: Module, loader: LoaderCall) -> str | None:
    """The start method a loader names itself: `multiprocessing_context="fork"` or `get_context("fork")`."""
    arg = loader.arg("multiprocessing_context")
    if isinstance(arg.value, str):
        return arg.value if arg.value in START_METHODS else None
    if arg.node is None:
        return None
    resolved = module.resolve(arg.node)
    if isinstance(resolved, ast.Call) and (module.qualname(resolved.func) or "").endswith(".get_context"):
        method = module.literal(resolved.args[0]) if resolved.args else None
        return method if isinstance(method, str) and method in START_METHODS else None
    return None


def is_nested(module: Module, definition: ast.AST) -> bool:
    """Defined inside a function or method: pickle cannot find it by its qualified name."""
    return module.enclosing_function(definition) is not None


def unpicklable_callable(module: Module, expr: ast.expr, partial_calls: Sequence[str], depth: int = 0) -> str:
    """What makes a callable unpicklable: "a lambda", "the nested function `f`", "a partial of ...", or ""."""
    resolved = module.resolve(expr)
    if isinstance(resolved, ast.Lambda):
        return "a lambda"
    if isinstance(resolved, FunctionDefs) and is_nested(module, resolved):
        return f"the nested function `{resolved.name}`"
    is_partial = isinstance(resolved, ast.Call) and module.qualname(resolved.func) in partial_calls
    if is_partial and isinstance(resolved, ast.Call) and resolved.args and depth < 3:
        inner = unpicklable_callable(module, resolved.args[0], partial_calls, depth + 1)
        return f"a partial of {inner}" if inner else ""
    return ""


def looks_like_class(module: Module, call: ast.Call) -> bool:
    """A constructor call: an in-file class, or a CapWords name (`Compose`, `T.Lambda`)."""
    if module.resolve_class(call.func) is not None:
        return True
    name = module.qualname(call.func) or dotted(call.func) or ""
    last = name.rpartition(".")[2]
    return bool(last) and last[0].isupper() and not last.isupper()


def pickles_by_value(module: Module, call: ast.Call) -> bool:
    """A constructor of a class that pickles its contents itself: in-file with `__getstate__` /
    `__reduce__`, or named for it (`CloudpickleWrapper`, `wrap_non_picklable_objects`)."""
    info = module.resolve_class(call.func)
    if info is not None:
        return any(module.method(info, hook) for hook in STATE_HOOKS)
    name = (module.qualname(call.func) or dotted(call.func) or "").lower()
    return "pickl" in name.rpartition(".")[2]


def stored_leaves(
    module: Module, expr: ast.expr, storing_calls: Sequence[str], depth: int = 0
) -> Iterator[ast.expr]:
    """The lambdas and names whose value ends up inside `expr`'s value.

    Containers, conditional expressions and constructor arguments keep their parts
    (`Compose([Lambda(f)])` holds `f`); other calls only use theirs (`sorted(xs, key=f)`).
    """
    if depth > 6:
        return
    if isinstance(expr, ast.Lambda):
        yield expr
    elif isinstance(expr, ast.Name):
        yield expr
        resolved = module.resolve(expr)
        if resolved is not expr and isinstance(resolved, ast.expr):
            yield from stored_leaves(module, resolved, storing_calls, depth + 1)
    elif isinstance(expr, ast.List | ast.Tuple | ast.Set):
        for element in expr.elts:
            yield from stored_leaves(module, element, storing_calls, depth + 1)
    elif isinstance(expr, ast.Dict):
        for part in (*expr.keys, *expr.values):
            if part is not None:
                yield from stored_leaves(module, part, storing_calls, depth + 1)
    elif isinstance(expr, ast.Starred):
        yield from stored_leaves(module, expr.value, storing_calls, depth + 1)
    elif isinstance(expr, ast.IfExp):
        yield from stored_leaves(module, expr.body, storing_calls, depth + 1)
        yield from stored_leaves(module, expr.orelse, storing_calls, depth + 1)
    elif isinstance(expr, ast.BoolOp):
        for value in expr.values:
            yield from stored_leaves(module, value, storing_calls, depth + 1)
    elif isinstance(expr, ast.ListComp | ast.SetComp | ast.GeneratorExp):
        yield from stored_leaves(module, expr.elt, storing_calls, depth + 1)
    elif isinstance(expr, ast.DictComp):
        yield from stored_leaves(module, expr.value, storing_calls, depth + 1)
    elif isinstance(expr, ast.Call) and pickles_by_value(module, expr):
        return  # a wrapper such as cloudpickle's sends what it holds by value
    elif isinstance(expr, ast.Call) and module.unpicklable_return(expr) is not None:
        yield expr  # a factory in another file that returns a lambda or a closure
    elif isinstance(expr, ast.Call) and (factory := _in_file_factory(module, expr)) is not None:
        for returned in _returned_values(factory):  # `make_reader(root)` returning its nested `read`
            yield from stored_leaves(module, returned, storing_calls, depth + 1)
    elif isinstance(expr, ast.Call) and (
        module.qualname(expr.func) in storing_calls or looks_like_class(module, expr)
    ):
        for part in (*expr.args, *(keyword.value for keyword in expr.keywords)):
            yield from stored_leaves(module, part, storing_calls, depth + 1)


def _in_file_factory(module: Module, call: ast.Call) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The module-level function of this file that `helper(...)` runs, or None."""
    if not isinstance(call.func, ast.Name):
        return None
    bound = module.binding(call.func)
    if isinstance(bound, FunctionDefs) and not is_nested(module, bound):
        return bound
    return None


def _returned_values(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    """What the function's own `return` statements give back (not those of the functions it nests)."""
    for node in walk_scope(function):
        if isinstance(node, ast.Return) and node.value is not None:
            yield node.value


def stored_unpicklable(module: Module, expr: ast.expr, storing_calls: Sequence[str]) -> str:
    """What unpicklable function `expr`'s value holds ("a lambda", "the nested function `f`"), or ""."""
    for leaf in stored_leaves(module, expr, storing_calls):
        if isinstance(leaf, ast.Lambda):
            return "a lambda"
        if isinstance(leaf, ast.Call) and (made := module.unpicklable_return(leaf)) is not None:
            link, what = made
            return f"{what} that `{link.name}()` returns ({display(link)})"
        resolved = module.resolve(leaf)
        if isinstance(resolved, FunctionDefs) and is_nested(module, resolved):
            return f"the nested function `{resolved.name}`"
        if isinstance(resolved, FunctionDefs) and module.is_notebook:
            # Pickled by its name in `__main__`, which a spawned worker never has: the kernel's.
            return f"the function `{resolved.name}` defined in a notebook cell"
    return ""


def factory_places(module: Module, expr: ast.expr, storing_calls: Sequence[str]) -> tuple[Related, ...]:
    """The functions in other files whose unpicklable return value `expr` stores (related places)."""
    places = []
    for leaf in stored_leaves(module, expr, storing_calls):
        if isinstance(leaf, ast.Call) and (made := module.unpicklable_return(leaf)) is not None:
            link, what = made
            places.append(Related(link.path, link.line, f"`{link.name}()` returns {what}"))
    return tuple(places)


def display(link: Link) -> str:
    """`path:line` of a place in another file, relative to the current folder when inside it."""
    path = Path(link.path)
    if path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())
    return f"{path.as_posix()}:{link.line}"


def main_guard_or_function(module: Module, definition: ast.AST) -> str:
    """Where a definition hides from pickle: "inside `f()`", "under `if __name__ == ...`", or ""."""
    function = module.enclosing_function(definition)
    if isinstance(function, FunctionDefs):
        return f"inside `{function.name}()`"
    if function is not None:
        return "inside a lambda"
    if module.is_main_guarded(definition):
        return 'under `if __name__ == "__main__":`'
    return ""


# ---- DL101 unpicklable-loader-callable ---------------------------------------------------------------


def unpicklable_loader_callable(
    module: Module,
    *,
    arguments: Sequence[str] = ("collate_fn", "worker_init_fn"),
    partial_calls: Sequence[str] = ("functools.partial",),
) -> Iterator[Match]:
    """A lambda, nested function or partial of one as a hook of a loader that may use workers."""
    for loader in module.loader_calls:
        if not loader.may_use_workers():
            continue
        for name in arguments:
            node = loader.arg(name).node
            what = unpicklable_callable(module, node, partial_calls) if node is not None else ""
            if what:
                define = _NOTEBOOK_DEFINE if module.is_notebook else _SCRIPT_DEFINE
                yield Match(
                    loader.node,
                    {"argument": name, "what": what, "define": define},
                    start_method=loader_start_method(module, loader),
                )
    for lambda_node, name, handed in _module_lambdas_handed(module):
        hooks = [h for h in handed if h.to_loader and h.keyword in arguments]
        if hooks:
            what = f"the module-level lambda `{name}` (defined here)"
            fields = {"argument": hooks[0].keyword, "what": what, "define": "define it with `def`"}
            related = tuple(
                Related(h.link.path, h.link.line, f"`{name}` is the `{h.keyword}` of this `{h.link.name}`")
                for h in hooks
            )
            yield Match(lambda_node, fields, related=related)


_SCRIPT_DEFINE = "define it as a module-level function"
# A function defined in a cell is no better: the workers cannot find the kernel's `__main__` (DL103).
_NOTEBOOK_DEFINE = "define it as a function in a `.py` module beside the notebook and import it"


# ---- DL102 unpicklable-dataset-attribute ---------------------------------------------------------------


def unpicklable_dataset_attribute(
    module: Module,
    *,
    storing_calls: Sequence[str] = ("functools.partial", "collections.defaultdict"),
    stored_keywords: Sequence[str] = ("transform", "target_transform", "transforms", "loader"),
) -> Iterator[Match]:
    """Lambdas and nested functions stored on datasets, on the transforms they hold, or passed to them."""
    for info in _dataset_holders(module, storing_calls):
        if any(module.method(info, hook) for hook in STATE_HOOKS) or module.read_only_without_workers(info):
            continue  # the class decides itself what is pickled, or it is never pickled
        for method in info.methods.values():
            if module.in_worker_code(method):
                continue  # set inside a worker: it never has to be pickled
            for attribute, value, statement in self_attribute_writes(method):
                what = stored_unpicklable(module, value, storing_calls) or _unpicklable_default(
                    module, method, value, storing_calls
                )
                if what:
                    where = f"`self.{attribute} = ...` in `{info.name}.{method.name}`"
                    related = factory_places(module, value, storing_calls)
                    yield Match(statement, _stored(module, where, what), related=related)
    yield from _constructor_arguments(module, storing_calls, stored_keywords)
    yield from _handed_from_here(module, stored_keywords)


def _module_lambdas_handed(module: Module) -> Iterator[tuple[ast.Lambda, str, tuple[HandOver, ...]]]:
    """The module-level lambdas of this file that other linted files hand to a Dataset's
    constructor or a DataLoader, with those hand-overs."""
    if module.project is None or not module.module_name:
        return
    for statement in module.tree.body:
        if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Lambda)):
            continue
        for target in statement.targets:
            if isinstance(target, ast.Name):
                handed = module.project.handed_to_datasets(module.qualified_prefix + target.id)
                if handed:
                    yield statement.value, target.id, handed


def _kept_keyword(keyword: str, stored_keywords: Sequence[str]) -> bool:
    return keyword in stored_keywords or "transform" in keyword


def _handed_from_here(module: Module, stored_keywords: Sequence[str]) -> Iterator[Match]:
    """A module-level lambda of this file that another file hands to a Dataset's constructor as
    an argument it keeps: reported here, at the definition, with the hand-over as related place."""
    for lambda_node, name, handed in _module_lambdas_handed(module):
        kept = [h for h in handed if not h.to_loader and _kept_keyword(h.keyword, stored_keywords)]
        if kept:
            link = kept[0].link
            where = f"`{link.name}(...)` ({display(link)})"
            what = f"the module-level lambda `{name}` (defined here)"
            related = tuple(
                Related(h.link.path, h.link.line, f"`{name}` is handed to `{h.link.name}(...)` here")
                for h in kept
            )
            yield Match(lambda_node, _stored(module, where, what), related=related)


def _stored(module: Module, where: str, what: str) -> dict[str, str]:
    """DL102's message fields; in a notebook a module-level function is no fix (it lives in a cell)."""
    instead = (
        "a function or transform class from a `.py` module beside the notebook"
        if module.is_notebook
        else "a module-level function or a transform class"
    )
    return {"where": where, "what": what, "instead": instead}


def _unpicklable_default(
    module: Module, method: FunctionDef, value: ast.expr, storing_calls: Sequence[str]
) -> str:
    """`self.augment = augment` of a parameter defaulting to `lambda audio: audio`: every caller
    that leaves the argument out stores that lambda."""
    if not isinstance(value, ast.Name):
        return ""
    default = parameter_defaults(method).get(value.id)
    rebound = any(
        isinstance(node, ast.Name) and node.id == value.id and not isinstance(node.ctx, ast.Load)
        for node in walk_scope(method)
    )
    if default is None or rebound:
        return ""  # no default, or the name is rebound in the method: the default may not be what is kept
    what = stored_unpicklable(module, default, storing_calls)
    return f"{what} (the default of `{value.id}`)" if what else ""


def _dataset_holders(module: Module, storing_calls: Sequence[str]) -> list[ClassInfo]:
    """The file's datasets, and the in-file classes (transforms) they store, transitively."""
    holders = {id(info.node): info for info in module.dataset_classes}
    queue = list(holders.values())
    while queue:
        info = queue.pop()
        for method in info.methods.values():
            for _attribute, value, _statement in self_attribute_writes(method):
                for node in ast.walk(value):
                    held = module.resolve_class(node.func) if isinstance(node, ast.Call) else None
                    if held is not None and id(held.node) not in holders:
                        holders[id(held.node)] = held
                        queue.append(held)
    return list(holders.values())


def _constructor_arguments(
    module: Module, storing_calls: Sequence[str], stored_keywords: Sequence[str]
) -> Iterator[Match]:
    """Dataset constructor calls given a lambda that the dataset keeps."""
    calls: dict[int, tuple[ast.Call, ClassInfo | None]] = {}
    datasets = module.dataset_classes
    for call in module.calls:
        info = module.resolve_class(call.func)
        if info is not None and any(info.node is known.node for known in datasets):
            calls[id(call)] = (call, info)
        elif info is None and (call.keywords or call.args) and module.dataset_forward(call) is not None:
            calls[id(call)] = (call, None)
    for loader in module.loader_calls:
        node = loader.arg("dataset").node
        dataset = module.split_source(node) if node is not None else None
        if isinstance(dataset, ast.Call) and module.resolve_class(dataset.func) is None:
            calls.setdefault(id(dataset), (dataset, None))
    for call, info in calls.values():
        if _read_only_without_workers(module, call) or module.constructed_for_this_process(call):
            continue
        if info is None and (forward := module.dataset_forward(call)) is not None:
            yield from _forwarded_arguments(module, call, forward, stored_keywords, storing_calls)
            continue
        init = module.method(info, "__init__") if info is not None else None
        for argument in _kept_arguments(module, call, init, stored_keywords, storing_calls):
            what = stored_unpicklable(module, argument, storing_calls)
            if what:
                name = info.name if info is not None else module.segment(call.func)
                related = factory_places(module, argument, storing_calls)
                yield Match(call, _stored(module, f"`{name}(...)`", what), related=related)
                break


def _forwarded_arguments(
    module: Module,
    call: ast.Call,
    forward: tuple[Link, tuple[str, ...], tuple[tuple[str, str, str], ...]],
    stored_keywords: Sequence[str],
    storing_calls: Sequence[str],
) -> Iterator[Match]:
    """`make_dataset(..., transform=lambda ...)` of a helper in another file that hands the argument
    on to a Dataset constructor as a keyword the dataset keeps."""
    link, positional, handed = forward

    def kept(keyword: str) -> bool:
        return keyword in stored_keywords or "transform" in keyword

    by_parameter: dict[str, str] = {}  # helper parameter -> the dataset class it reaches
    swallowing: dict[str, str] = {}  # `**parameter` -> the dataset class it is spread into
    for dataset, handed_as, parameter in handed:
        if handed_as == "**":
            swallowing[parameter] = dataset
        elif kept(handed_as):
            by_parameter[parameter] = dataset
    arguments: list[tuple[ast.expr, str]] = []
    for index, argument in enumerate(call.args):
        if isinstance(argument, ast.Starred):
            break
        if index < len(positional) and positional[index] in by_parameter:
            arguments.append((argument, by_parameter[positional[index]]))
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        if keyword.arg in by_parameter:
            arguments.append((keyword.value, by_parameter[keyword.arg]))
        elif keyword.arg not in positional and swallowing and kept(keyword.arg):
            arguments.append((keyword.value, next(iter(swallowing.values()))))
    for argument, dataset in arguments:
        what = stored_unpicklable(module, argument, storing_calls)
        if what:
            name = module.segment(call.func)
            target = dataset.rpartition(".")[2]
            where = f"`{name}(...)` (through `{target}(...)` in {display(link)})"
            handed_on = Related(link.path, link.line, f"`{link.name}()` passes it on to `{target}(...)`")
            related = (handed_on, *factory_places(module, argument, storing_calls))
            yield Match(call, _stored(module, where, what), related=related)
            return


def _read_only_without_workers(module: Module, construction: ast.Call) -> bool:
    """Every reader of the file (loader, Trainer, loader factory) that reads this dataset object
    certainly runs without workers."""
    readers = [reader for reader in module.dataset_readers if _reads(module, reader.dataset, construction)]
    return bool(readers) and all(reader.workers_zero for reader in readers)


def _reads(module: Module, dataset: ast.expr, construction: ast.Call) -> bool:
    """The reader reads the constructed object, or a part of it (`DataLoader(ds.inner_dataset)`:
    a part that calls back into the dataset pickles it whole for workers)."""
    source = module.split_source(dataset)
    for _ in range(4):
        if not isinstance(source, ast.Attribute):
            break
        source = module.split_source(source.value)
    return source is construction


def _kept_arguments(
    module: Module,
    call: ast.Call,
    init: ast.FunctionDef | ast.AsyncFunctionDef | None,
    stored_keywords: Sequence[str],
    storing_calls: Sequence[str],
) -> Iterator[ast.expr]:
    """Arguments the constructed dataset keeps: by its in-file `__init__`, else by keyword name."""
    if init is None:
        for keyword in call.keywords:
            if keyword.arg is not None and (keyword.arg in stored_keywords or "transform" in keyword.arg):
                yield keyword.value
        return
    kept = _kept_parameters(module, init, storing_calls)
    positional = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]  # drop self
    for index, argument in enumerate(call.args):
        if isinstance(argument, ast.Starred):
            break
        if index < len(positional) and positional[index] in kept:
            yield argument
    for keyword in call.keywords:
        if keyword.arg is not None and keyword.arg in kept:
            yield keyword.value


def _kept_parameters(
    module: Module, init: ast.FunctionDef | ast.AsyncFunctionDef, storing_calls: Sequence[str]
) -> set[str]:
    """Parameters of `__init__` whose value is stored on self or handed to a base `__init__`."""
    parameters = {a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)}
    kept: set[str] = set()
    for _attribute, value, _statement in self_attribute_writes(init):
        kept.update(
            leaf.id for leaf in stored_leaves(module, value, storing_calls) if isinstance(leaf, ast.Name)
        )
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
        ):
            for part in (*node.args, *(k.value for k in node.keywords)):
                kept.update(n.id for n in ast.walk(part) if isinstance(n, ast.Name))
    return kept & parameters


# ---- DL103 local-dataset-class ------------------------------------------------------------------------


def local_dataset_class(
    module: Module, *, arguments: Sequence[str] = ("collate_fn", "worker_init_fn")
) -> Iterator[Match]:
    """A dataset class defined in a function or the `__main__` block, or a hook defined in that
    block; in a notebook, any of them defined in a cell (spawned workers never see the kernel's
    `__main__`: `Can't get attribute 'X' on <module '__main__' (built-in)>`)."""
    reported: set[int] = set()
    for loader in module.loader_calls:
        if not loader.may_use_workers():
            continue
        start_method = loader_start_method(module, loader)
        for definition in _loader_definitions(module, loader, arguments):
            where = main_guard_or_function(module, definition)
            if module.is_notebook and not where:
                where = "in a notebook cell"
            if where and id(definition) not in reported:
                reported.add(id(definition))
                move = _NOTEBOOK_MOVE if module.is_notebook else _SCRIPT_MOVE
                fields = {"name": definition.name, "where": where, "move": move}
                yield Match(definition, fields, start_method=start_method)


_SCRIPT_MOVE = "move the definition to module level, outside the `__main__` block"
_NOTEBOOK_MOVE = "move it to a `.py` module beside the notebook and import it from there"


def _loader_definitions(
    module: Module, loader: LoaderCall, arguments: Sequence[str]
) -> Iterator[ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef]:
    """The in-file dataset class of a loader, and its hook functions that are not nested in a function.

    Hooks nested in a function are DL101's (reported at the loader); here only those defined in
    the `__main__` block remain.
    """
    dataset = module.loader_dataset_class(loader)
    if dataset is not None:
        yield dataset.node
    for name in arguments:
        node = loader.arg(name).node
        resolved = module.resolve(node) if node is not None else None
        if isinstance(resolved, FunctionDefs) and not is_nested(module, resolved):
            yield resolved


# ---- DL104 unguarded-worker-start -----------------------------------------------------------------------


def unguarded_worker_start(module: Module) -> Iterator[Match]:
    """Module-level code that iterates a loader with workers, outside the `__main__` guard.

    Not in a notebook: its cells never run again in a worker (a spawned worker starts from the
    kernel's own main module, not from the cells), so no guard is needed there; what does break,
    a class or hook defined in a cell, is DL103's."""
    if not module.loader_calls or module.is_notebook:
        return
    memo: dict[int, bool] = {}
    for statement in _module_level_statements(module, module.tree.body):
        if isinstance(statement, ast.For | ast.AsyncFor):
            loader = _iterated_loader(module, statement.iter)
            if loader is not None:
                what = f"`for ... in {module.segment(statement.iter)}:`"
                yield Match(statement, {"what": what}, start_method=loader_start_method(module, loader))
                continue
        for node in _own_expressions(statement):
            if not isinstance(node, ast.Call):
                continue
            operand = iterating_call_operand(module, node)
            loader = loader_for(module, operand) if operand is not None else None
            if loader is not None and loader.may_use_workers():
                what = f"`{module.segment(node)}`"
                yield Match(node, {"what": what}, start_method=loader_start_method(module, loader))
                break
            function = _in_file_function(module, node)
            if function is not None and _starts_workers(module, function, memo, 0):
                what = f"`{module.segment(node)}`, which iterates a DataLoader with workers,"
                yield Match(node, {"what": what})
                break


def _iterated_loader(module: Module, expr: ast.expr) -> LoaderCall | None:
    for operand in iterated_operands(module, expr):
        loader = loader_for(module, operand)
        if loader is not None and loader.may_use_workers():
            return loader
    return None


def _module_level_statements(module: Module, body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run on import: not in defs or classes, not under the `__main__` guard."""
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(statement, ast.If) and module.is_main_guarded(statement.body[0]):
            continue
        yield statement
        for field in ("body", "orelse", "finalbody"):
            yield from _module_level_statements(module, getattr(statement, field, []))
        for handler in getattr(statement, "handlers", []):
            yield from _module_level_statements(module, handler.body)


def _own_expressions(statement: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of one statement, without its nested statements and lambdas."""
    pending = [child for child in ast.iter_child_nodes(statement) if not isinstance(child, ast.stmt)]
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.Lambda):
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _in_file_function(module: Module, call: ast.Call) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    if not isinstance(call.func, ast.Name):
        return None
    bound = module.binding(call.func)
    return bound if isinstance(bound, FunctionDefs) else None


def _starts_workers(
    module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef, memo: dict[int, bool], depth: int
) -> bool:
    """Whether calling `function` iterates (or hands on to be iterated) a loader that may use workers."""
    key = id(function)
    if key in memo:
        return memo[key]
    memo[key] = False  # recursion guard
    result = False
    for node in ast.walk(function):
        if isinstance(node, ast.For | ast.AsyncFor) and _iterated_loader(module, node.iter) is not None:
            result = True
        elif isinstance(node, ast.Call):
            operand = iterating_call_operand(module, node)
            loader = loader_for(module, operand) if operand is not None else None
            if loader is not None and loader.may_use_workers():
                result = True
            elif depth < 6 and (callee := _in_file_function(module, node)) is not None:
                result = _starts_workers(module, callee, memo, depth + 1)
        if result:
            break
    if not result:
        result = any(_handed_on(module, loader) for loader in _loaders_inside(module, function))
    memo[key] = result
    return result


def _loaders_inside(module: Module, function: ast.AST) -> Iterator[LoaderCall]:
    for loader in module.loader_calls:
        if loader.may_use_workers() and module.enclosing_function(loader.node) is function:
            yield loader


def _handed_on(module: Module, loader: LoaderCall) -> bool:
    """The loader (or the name it is bound to) is passed to a call that may iterate it (`fit(model, dl)`)."""
    name = assigned_name(module, loader.node)
    function = module.enclosing_function(loader.node)
    candidates: list[ast.AST] = [loader.node]
    if name is not None and function is not None:
        candidates.extend(
            n for n in ast.walk(function) if isinstance(n, ast.Name | ast.Attribute) and dotted(n) == name
        )
    for candidate in candidates:
        parent = module.parent(candidate)
        if isinstance(parent, ast.keyword):
            parent = module.parent(parent)
        # A constructor only wraps the loader (`DeviceLoader(loader)`); `fit(model, loader)` runs it.
        if (
            isinstance(parent, ast.Call)
            and candidate is not parent.func
            and call_name(module, parent) not in INSPECTING_CALLS
            and not looks_like_class(module, parent)
        ):
            return True
    return False


MATCHERS: dict[str, Any] = {
    "unpicklable-loader-callable": unpicklable_loader_callable,
    "unpicklable-dataset-attribute": unpicklable_dataset_attribute,
    "local-dataset-class": local_dataset_class,
    "unguarded-worker-start": unguarded_worker_start,
}

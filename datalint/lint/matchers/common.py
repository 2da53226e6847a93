"""Queries about one parsed file that several matcher families share.

Assignments to `self.x` in a class, the loaders built of a dataset class, the classes whose
methods run in workers, loop unwrapping, and small name helpers. The memory (DL3xx),
randomness (DL4xx) and contract (DL5xx) matchers use them; they sit here, once, rather than
in one family's module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from datalint.lint.module import ClassInfo, LoaderCall, Module, dotted
from datalint.records import record

__all__ = [
    "NESTED_SCOPES",
    "FunctionDef",
    "SelfAssignment",
    "dotted",
    "full_pickle_load",
    "imports_any",
    "in_file_callee",
    "is_self_attribute",
    "loaders_of",
    "names_in",
    "qualified_in",
    "self_assignments",
    "unwrap_iterable",
    "walk_scope",
    "worker_classes",
]

FunctionDef = ast.FunctionDef | ast.AsyncFunctionDef
NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@record
class SelfAssignment:
    """One `self.<attr> = value` (or `+=`, or a tuple target) inside a method of a class."""

    method: FunctionDef
    statement: ast.stmt
    attr: str
    value: ast.expr | None  # None when the value cannot be told apart (tuple targets, `+=`)
    target: ast.Attribute  # `self.<attr>` itself: where a finding about this attribute points


def self_assignments(module: Module, info: ClassInfo) -> list[SelfAssignment]:
    """Every assignment to an attribute of `self` in the class and its in-file bases, in source order."""
    found: list[SelfAssignment] = []
    for owner in (info, *module.base_classes(info)):
        for method in owner.methods.values():
            for statement in walk_scope(method):
                found.extend(_assignments_in(method, statement))
    return found


def _assignments_in(method: FunctionDef, statement: ast.AST) -> Iterator[SelfAssignment]:
    if isinstance(statement, ast.Assign):
        for target in statement.targets:
            if is_self_attribute(target):
                assert isinstance(target, ast.Attribute)
                value = statement.value if len(statement.targets) == 1 else None
                yield SelfAssignment(method, statement, target.attr, value, target)
            elif isinstance(target, ast.Tuple | ast.List):
                # `self.a, self.b = a, b`: each element gets its own value when the shapes match.
                values = statement.value.elts if isinstance(statement.value, ast.Tuple | ast.List) else None
                paired = (
                    values is not None and len(values) == len(target.elts) and len(statement.targets) == 1
                )
                for index, element in enumerate(target.elts):
                    if isinstance(element, ast.Attribute) and is_self_attribute(element):
                        value = values[index] if paired and values is not None else None
                        yield SelfAssignment(method, statement, element.attr, value, element)
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign) and is_self_attribute(statement.target):
        assert isinstance(statement.target, ast.Attribute)
        value = statement.value if isinstance(statement, ast.AnnAssign) else None
        yield SelfAssignment(method, statement, statement.target.attr, value, statement.target)


def walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes inside a function's own body: nested functions, lambdas and classes are skipped."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, NESTED_SCOPES):
            stack.extend(ast.iter_child_nodes(child))


def parameter_defaults(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict[str, ast.expr]:
    """Each parameter's default value, by name (positional and keyword-only)."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    with_defaults = positional[len(positional) - len(arguments.defaults) :]
    defaults = {a.arg: d for a, d in zip(with_defaults, arguments.defaults, strict=True)}
    defaults.update(
        {a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is not None}
    )
    return defaults


def is_self_attribute(node: ast.AST, attr: str | None = None) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and (attr is None or node.attr == attr)
    )


def loaders_of(module: Module, info: ClassInfo) -> list[LoaderCall]:
    """The in-file DataLoader calls whose dataset is an instance of `info`."""
    return list(module.loaders_of(info))


def worker_classes(module: Module) -> list[ClassInfo]:
    """Datasets, and in-file classes whose methods run in workers (transforms the dataset holds)."""
    found = {info.node: info for info in module.dataset_classes}
    for worker in module.worker_functions:
        owner = module.enclosing_class(worker.node)
        if owner is not None and owner not in found:
            found[owner] = module.class_of(owner)
    return list(found.values())


def unwrap_iterable(module: Module, expr: ast.expr) -> tuple[ast.expr, bool]:
    """`enumerate(x)`, `tqdm(x)`, `iter(x)` -> (x, whether the loop target is `(index, item)`)."""
    indexed = False
    while isinstance(expr, ast.Call) and expr.args:
        name = module.qualname(expr.func) or ""
        last = name.rpartition(".")[2]
        if last == "enumerate":
            indexed = True
        elif last not in {"tqdm", "iter", "track"}:
            break
        expr = expr.args[0]
    return expr, indexed


def names_in(target: ast.AST) -> set[str]:
    """Names bound by an assignment or loop target (`a`, `(a, b)`, `[a, *b]`)."""
    return {node.id for node in ast.walk(target) if isinstance(node, ast.Name)}


def imports_any(module: Module, names: Iterable[str]) -> bool:
    """Whether the file imports one of `names` or something from inside them (a cheap first test)."""
    roots = {name.partition(".")[0] for name in names}
    return any(target.partition(".")[0] in roots for target in module.imports.values())


def qualified_in(module: Module, node: ast.AST, names: Iterable[str]) -> bool:
    """Whether `node` names one of `names` (exactly, or a member of a listed module prefix)."""
    qualified = module.qualname(node)
    if qualified is None:
        return False
    return any(qualified == name or qualified.startswith(name + ".") for name in names)


def in_file_callee(module: Module, info: ClassInfo, call: ast.Call) -> FunctionDef | None:
    """The function or method of `info` that `call` runs (`helper(x)`, `self.load(x)`), if in this file."""
    if isinstance(call.func, ast.Name):
        bound = module.binding(call.func)
        return bound if isinstance(bound, ast.FunctionDef | ast.AsyncFunctionDef) else None
    if is_self_attribute(call.func):
        assert isinstance(call.func, ast.Attribute)
        return module.method(info, call.func.attr)
    return None


def full_pickle_load(module: Module, call: ast.Call) -> bool:
    """`torch.load(...)` that unpickles everything: no `weights_only=True` (absent, or literally
    False), and no option the linter cannot see (`**kwargs`, `pickle_module`, a third argument).
    DL505 reports such a load, and its fix passes `map_location` too, so DL203 leaves it alone."""
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords or "pickle_module" in keywords or len(call.args) > 2:
        return False
    weights_only = keywords.get("weights_only")
    return weights_only is None or module.literal(weights_only) is False

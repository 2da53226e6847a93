"""Matchers for the memory rules (DL3xx): what grows, is copied, or stays open in worker processes.

The queries this family shares with the randomness and contract families live in
`matchers/common.py`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Container, Iterator, Sequence
from typing import Any

from datalint.lint.matchers.common import (
    FunctionDef,
    SelfAssignment,
    dotted,
    imports_any,
    in_file_callee,
    is_self_attribute,
    names_in,
    parameter_defaults,
    qualified_in,
    self_assignments,
    unwrap_iterable,
    walk_scope,
    worker_classes,
)
from datalint.lint.module import ClassInfo, Match, Module, Related, cast_name
from datalint.lint.project import INT_CALLS
from datalint.records import record

# ---- DL301 python-objects-copy-on-read ----------------------------------------------------------

INDEX_FUNCTIONS = frozenset({"int", "abs", "min", "max", "divmod", "round", "operator.index"})
# Calls that make an index map (positions, not samples): `self.keep = np.flatnonzero(mask)`;
# `self.keep[idx]` is then an index too, and what it subscripts is indexed per sample.
INDEX_MAP_CALLS = frozenset(
    {
        "range",
        "numpy.arange",
        "numpy.argsort",
        "numpy.flatnonzero",
        "numpy.nonzero",
        "numpy.where",
        "numpy.random.permutation",
        "torch.arange",
        "torch.randperm",
        "torch.argsort",
        "torch.nonzero",
        "torch.where",
    }
)
# Calls that list file names: strings, whatever the folder holds.
NAME_LISTINGS = frozenset({"glob.glob", "glob.iglob", "os.listdir"})
# Conversions that keep an index map an index map.
INDEX_MAP_CONVERSIONS = frozenset({"list", "sorted", "tuple", "numpy.array", "numpy.asarray", "torch.tensor"})
# Calls whose first argument's positions come back sorted, repeated or tiled: still positions.
INDEX_MAP_REARRANGEMENTS = frozenset({"numpy.sort", "numpy.tile", "numpy.repeat"})


@record
class Builders:
    """What makes a container of Python objects: calls that read data, conversions, list-making methods."""

    calls: frozenset[str]  # json.load, glob.glob, os.listdir ...: always fresh per-sample objects
    conversions: frozenset[str]  # list, sorted, dict ...: as per-sample as what they convert
    methods: frozenset[str]  # .tolist(), .readlines() ...
    tables: frozenset[str] = frozenset()  # pandas.read_csv ...: object columns when they hold text
    # "torchvision.datasets.DatasetFolder.samples": lists a known base builds per sample.
    base_lists: frozenset[str] = frozenset()


def python_objects_copy_on_read(
    module: Module,
    *,
    builder_calls: Sequence[str] = (),
    conversion_calls: Sequence[str] = (),
    builder_methods: Sequence[str] = (),
    table_reads: Sequence[str] = (),
    path_calls: Sequence[str] = (),
    base_lists: Sequence[str] = (),
    array_modules: Sequence[str] = (),
) -> Iterator[Match]:
    """`self.x = <list/dict of Python objects>` in a dataset, subscripted by the sample index."""
    builders = Builders(
        frozenset(builder_calls),
        frozenset(conversion_calls),
        frozenset(builder_methods),
        frozenset(table_reads),
        frozenset(base_lists),
    )
    reported: set[tuple[ast.AST, str]] = set()  # (statement, attribute) pairs already reported
    candidates: list[tuple[ClassInfo, tuple[Related, ...]]] = [(info, ()) for info in module.dataset_classes]
    candidates += [(info, (held,)) for info, held in module.classes_indexed_by_datasets]
    for info, related in candidates:
        if module.read_only_without_workers(info):
            continue
        assignments = self_assignments(module, info)
        for attr in sorted(_attrs_indexed_per_sample(module, info)):
            mine = [a for a in assignments if a.attr == attr]
            # `self.mix = self.mix + other.mix` (an `__add__` joining two sets) is what it extends.
            grown = [a for a in mine if not _extends_itself(a)]
            mine = grown or mine
            kinds = [_assignment_kind(module, info, a, builders) for a in mine]
            mine, kinds = _without_superseded(mine, kinds)
            # `self.paths = paths` of a parameter defaulting to None, beside a branch that builds the
            # list when it is None: the default path builds it (a list the caller hands is the call's).
            kept = [(a, k) for a, k in zip(mine, kinds, strict=True) if k or not _optional_parameter(a)]
            if any(k for _, k in kept):
                # Unknown is not clean: `self.items = load_items(root)` of a helper the linter cannot
                # read leaves the branches it can read (`[json.loads(l) for l in f]`) to decide.
                kept = [(a, k) for a, k in kept if k or not _unread_call(module, a, array_modules)]
            # Any other assignment (np.array(...), a parameter, an unknown call) may make it an array.
            if not kept or not all(k for _, k in kept):
                continue
            mine, kinds = [a for a, _ in kept], [k for _, k in kept]
            if any(kind.startswith("?") for kind in kinds if kind) and not _sized_by(module, info, attr):
                continue  # `tuple(transforms)`: a conversion of unknown size, and not the dataset's length
            if TABLE in kinds and not _opens_what_it_reads(module, info, attr, frozenset(path_calls)):
                continue  # a table read from a file may be all numbers: only paths opened per sample tell
            # One statement may bind several attributes (`self.paths, self.labels = load()`): each is
            # reported, at its own target; a subclass does not report its in-file base's binding again.
            if (mine[0].statement, attr) not in reported:
                reported.add((mine[0].statement, attr))
                fields = {"attr": attr, "kind": (kinds[0] or "").lstrip("?")}
                yield Match(mine[0].target, fields, related=related)
    yield from _lists_handed_to_datasets(module, builders)


def _unread_call(module: Module, assignment: SelfAssignment, array_modules: Sequence[str]) -> bool:
    """The assignment's value is a call of another package's function that the linter cannot
    follow (not a builtin, not a package that makes arrays, not code of this file)."""
    value = assignment.value
    if not isinstance(value, ast.Call) or is_self_attribute(value.func):
        return False
    qualified = module.qualname(value.func) or ""
    top, dot, _rest = qualified.partition(".")
    return bool(dot) and top not in array_modules and not top[:1].isupper()


def _extends_itself(assignment: SelfAssignment) -> bool:
    """`self.x = self.x + y`, `self.x = y + self.x` or `self.x += y`: a concatenation succeeds only
    with another of the same kind, so the result is whatever `self.x` already is; so is a
    repetition (`self.x = n * self.x`) and a selection of its own entries (`self.rows =
    self.rows[:n]`, `self.frame = self.frame[self.frame["length"] > n]`)."""
    statement, value = assignment.statement, assignment.value
    if isinstance(statement, ast.AugAssign):
        return isinstance(statement.op, ast.Add | ast.Mult)
    if isinstance(value, ast.Subscript):
        return is_self_attribute(value.value, assignment.attr)
    return (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.Add | ast.Mult)
        and any(is_self_attribute(side, assignment.attr) for side in (value.left, value.right))
    )


def _without_superseded(
    mine: list[SelfAssignment], kinds: list[str | None]
) -> tuple[list[SelfAssignment], list[str | None]]:
    """The bindings of one attribute without those a later one in the same method overrides:
    `self.paths = load(...)` (a helper the linter cannot read) followed, at the top level of the
    method, by `self.paths = list(chain(...))` leaves a list whatever `load` returned. Only a
    binding that always runs (not inside a branch or loop), of a known kind, and not built from
    the attribute's own kind (`self.x = self.x + y`) overrides."""
    overriding = [
        (a.method, _position(a.statement))
        for a, kind in zip(mine, kinds, strict=True)
        if kind and a.statement in a.method.body and not _extends_itself(a)
    ]
    kept = [
        (a, kind)
        for a, kind in zip(mine, kinds, strict=True)
        if not any(a.method is method and _position(a.statement) < at for method, at in overriding)
    ]
    return [a for a, _ in kept], [kind for _, kind in kept]


def _optional_parameter(assignment: SelfAssignment) -> bool:
    """`self.x = x` where `x` is a parameter of the method with the default None."""
    value = assignment.value
    if not isinstance(value, ast.Name):
        return False
    default = parameter_defaults(assignment.method).get(value.id)
    return isinstance(default, ast.Constant) and default.value is None


def _lists_handed_to_datasets(module: Module, builders: Builders) -> Iterator[Match]:
    """`SFTDataset(data=examples)`: a list of Python objects built here and passed to a project
    Dataset whose `__init__` keeps that parameter and whose `__getitem__` indexes it per sample."""
    project, root = module.project, module.source_root
    if project is None or root is None:
        return
    for call in module.calls:
        qualified = _class_qualname(module, call)
        ref = project.sample_parameters(qualified, root) if qualified else None
        if ref is None or module.constructed_for_this_process(call):
            continue
        owner = module.enclosing_class(call)
        info = module.class_of(owner) if owner is not None else _NO_CLASS
        function = module.enclosing_function(call)
        for parameter, position, attr in ref.summary.sample_parameters:
            argument = _argument(call, parameter, position)
            if argument is None or not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            kind = _container_kind(module, info, function, argument, builders, 0)
            if kind and not kind.startswith("?") and not _no_per_sample_objects(module, argument):
                kept = f"`{ref.summary.name}` keeps `{parameter}` as `self.{attr}` and indexes it per sample"
                related = (Related(str(ref.path), ref.summary.line, kept),)
                yield Match(call, {"attr": attr, "kind": kind}, related=related)
                break


def _no_per_sample_objects(module: Module, argument: ast.expr) -> bool:
    """A list that may hold no object per sample, so the caller's list is left alone (unknown is
    silent): `[int(x) for x in lines]`, labels and ids that are mostly small ints, which CPython
    shares (and, from 3.12 on, never counts references to); `[text for _ in range(n)]`, one
    object repeated."""
    value = module.resolve(argument)
    if isinstance(argument, ast.Name) and _empty_list(module, value):
        appended = _appended_values(module, argument)
        return bool(appended) and all(_int_valued(module, v, 0) for v in appended)
    if not isinstance(value, ast.ListComp):
        return False
    element = value.elt
    if _int_valued(module, element, 0):
        return True
    targets = {n.id for g in value.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    return not any(isinstance(n, ast.Name) and n.id in targets for n in ast.walk(element))


def _empty_list(module: Module, value: ast.AST) -> bool:
    if isinstance(value, ast.List):
        return not value.elts
    return isinstance(value, ast.Call) and module.qualname(value.func) == "list" and not value.args


def _appended_values(module: Module, name: ast.Name) -> list[ast.expr]:
    """What `name.append(v)` adds in the function that binds `name` (empty when it grows otherwise)."""
    function = module.enclosing_function(name)
    values: list[ast.expr] = []
    for node in walk_scope(function) if function is not None else ():
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            continue
        if node.value.id != name.id:
            continue
        call = module.parent(node)
        if node.attr != "append" or not isinstance(call, ast.Call) or len(call.args) != 1:
            return []  # `.extend(...)`, `.insert(...)`, or handed on: not followed
        values.append(call.args[0])
    return values


def _int_valued(module: Module, expr: ast.expr, depth: int) -> bool:
    """`int(x)`, `len(x)`, `ord(c) - ord("A")`, `i + 1`: an int (mostly small, which CPython shares),
    directly or through a name's assignments."""
    if depth > 3:
        return False
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int)
    if isinstance(expr, ast.Call):
        return module.qualname(expr.func) in INT_CALLS
    if isinstance(expr, ast.BinOp) and not isinstance(expr.op, ast.Div):
        return _int_valued(module, expr.left, depth + 1) and _int_valued(module, expr.right, depth + 1)
    if isinstance(expr, ast.UnaryOp):
        return _int_valued(module, expr.operand, depth + 1)
    if isinstance(expr, ast.Name):
        values = module.assigned_values(expr)
        return bool(values) and all(_int_valued(module, v, depth + 1) for v in values)
    return False


_NO_CLASS = ClassInfo(ast.ClassDef(name="", bases=[], keywords=[], body=[], decorator_list=[]), "", (), {})


def _class_qualname(module: Module, call: ast.Call) -> str | None:
    local = module.resolve_class(call.func)
    if local is not None:
        return module.qualified_prefix + local.name if module.module_name else None
    return module.absolute_qualname(call.func)


def _argument(call: ast.Call, parameter: str, position: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == parameter:
            return keyword.value
    before = call.args[: position + 1]
    if 0 <= position < len(call.args) and not any(isinstance(a, ast.Starred) for a in before):
        return call.args[position]
    return None


def _assignment_kind(
    module: Module, info: ClassInfo, assignment: SelfAssignment, builders: Builders
) -> str | None:
    """The container kind of one assignment: its value, or, for `self.a, self.b = self._load()`,
    the matching element of every tuple the in-file helper returns."""
    if assignment.value is not None:
        kind = _container_kind(module, info, assignment.method, assignment.value, builders, 0)
        if kind is None and isinstance(assignment.statement, ast.AnnAssign):
            return _annotated_kind(module, assignment.statement.annotation)
        return kind
    transposed = _transposed_rows(assignment.statement)
    if transposed is not None:
        # `self.paths, self.labels = zip(*rows)`: each attribute is one column of the rows, a tuple
        # of one object per sample when the rows are.
        rows = _container_kind(module, info, assignment.method, transposed, builders, 0)
        return "list" if rows in PER_SAMPLE_COLUMNS else None
    unpacked = _unpacked_from_helper(module, info, assignment)
    if unpacked is None:
        # `self.paths, self.labels = load_lists(root)` of a helper in another project file.
        return "list" if _project_tuple_list(module, assignment.statement, assignment.target) else None
    helper, elements = unpacked
    kinds = [_container_kind(module, info, helper, element, builders, 1) for element in elements]
    return kinds[0] if kinds and all(k == kinds[0] for k in kinds) else None


def _transposed_rows(statement: ast.stmt) -> ast.expr | None:
    """`a, b = zip(*rows)` or `a, b = list(zip(*rows))`: `rows`."""
    value = statement.value if isinstance(statement, ast.Assign) else None
    if isinstance(value, ast.Call) and cast_name(value) == "list" and value.args:
        value = value.args[0]
    if not (isinstance(value, ast.Call) and cast_name(value) == "zip"):
        return None
    starred = value.args[0] if len(value.args) == 1 else None
    return starred.value if isinstance(starred, ast.Starred) else None


# A list annotated as holding numbers (mostly small ints, which CPython shares) is reported only
# where its value shows it: the annotation alone says too little.
_SCALAR_ITEMS = frozenset({"int", "bool", "float"})


def _annotated_kind(module: Module, annotation: ast.expr) -> str | None:
    """`self.clips: List[ClipInfo] = sampler(...)`: what the author declares the value to be, when
    the value itself cannot be followed; `List[int]` and unsubscripted names say too little."""
    if not isinstance(annotation, ast.Subscript):
        return None
    container = (module.qualname(annotation.value) or "").rpartition(".")[2].lower()
    if container not in {"list", "dict"}:
        return None
    items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if container == "list" and all(isinstance(i, ast.Name) and i.id in _SCALAR_ITEMS for i in items):
        return None
    return container


def _unpacked_from_helper(
    module: Module, info: ClassInfo, assignment: SelfAssignment
) -> tuple[FunctionDef, list[ast.expr]] | None:
    """(helper, the returned elements that land in this attribute) for a tuple target unpacking
    a call of an in-file function or method whose every return is a tuple of the same length."""
    statement = assignment.statement
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None
    target, value = statement.targets[0], statement.value
    if not isinstance(target, ast.Tuple | ast.List) or not isinstance(value, ast.Call):
        return None
    if any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    position = next((i for i, e in enumerate(target.elts) if is_self_attribute(e, assignment.attr)), None)
    helper = in_file_callee(module, info, value)
    if position is None or helper is None:
        return None
    returns = [r.value for r in walk_scope(helper) if isinstance(r, ast.Return) and r.value is not None]
    if not returns or not all(isinstance(r, ast.Tuple) and len(r.elts) == len(target.elts) for r in returns):
        return None
    return helper, [r.elts[position] for r in returns if isinstance(r, ast.Tuple)]


def _unpacked_name(
    module: Module, info: ClassInfo, function: FunctionDef, name: ast.Name
) -> tuple[FunctionDef, list[ast.expr]] | None:
    """(helper, its returned elements for `name`) when the one binding of `name` in `function` is
    `a, name, c = helper(...)` of an in-file function or method whose every return is such a tuple."""
    found = _tuple_binding(module, function, name)
    if found is None:
        return None
    statement, bound = found
    assert isinstance(statement.value, ast.Call) and isinstance(statement.targets[0], ast.Tuple | ast.List)
    target = statement.targets[0]
    helper = in_file_callee(module, info, statement.value)
    if helper is None or helper is function:
        return None
    position = target.elts.index(bound)
    returns = [r.value for r in walk_scope(helper) if isinstance(r, ast.Return) and r.value is not None]
    if not returns or not all(isinstance(r, ast.Tuple) and len(r.elts) == len(target.elts) for r in returns):
        return None
    return helper, [r.elts[position] for r in returns if isinstance(r, ast.Tuple)]


def _tuple_binding(
    module: Module, function: FunctionDef, name: ast.Name
) -> tuple[ast.Assign, ast.Name] | None:
    """(the statement, the element bound) when the one binding of `name` in `function` is an element
    of `a, name, c = call(...)`."""
    bindings = [
        node for node in walk_scope(function) if isinstance(node, ast.Name) and _binds(node, name.id)
    ]
    if len(bindings) != 1:
        return None
    target = module.parent(bindings[0])
    statement = module.parent(target) if target is not None else None
    if not isinstance(target, ast.Tuple | ast.List) or not isinstance(statement, ast.Assign):
        return None
    if statement.targets != [target] or not isinstance(statement.value, ast.Call):
        return None
    if any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    return statement, bindings[0]


def _project_tuple_list(module: Module, statement: ast.stmt, element: ast.expr) -> bool:
    """`element` is bound by `a, b = helper(...)` to a position of the tuple that a function of
    another project file returns a list built from data at (`FileSummary.tuple_list_returns`)."""
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return False
    target, call = statement.targets[0], statement.value
    if not isinstance(target, ast.Tuple | ast.List) or not isinstance(call, ast.Call):
        return False
    if element not in target.elts or any(isinstance(e, ast.Starred) for e in target.elts):
        return False
    found = module.tuple_list_return(call)
    return found is not None and target.elts.index(element) in found[1]


def _sized_by(module: Module, info: ClassInfo, attr: str) -> bool:
    """`__len__` returns `len(self.<attr>)`: the container holds one entry per sample."""
    method = module.method(info, "__len__")
    if method is None:
        return False
    return any(
        isinstance(node, ast.Call)
        and module.qualname(node.func) == "len"
        and bool(node.args)
        and is_self_attribute(node.args[0], attr)
        for node in walk_scope(method)
    )


def _attrs_indexed_per_sample(module: Module, info: ClassInfo) -> set[str]:
    found: set[str] = set()
    maps = _index_maps(module, info)
    for name in ("__getitem__", "__getitems__"):
        method = module.method(info, name)
        if method is not None:
            params = [a.arg for a in (*method.args.posonlyargs, *method.args.args)][1:2]
            _collect_indexed(module, info, method, set(params), found, depth=0, maps=maps)
    if module.method(info, "__getitem__") is None:
        # `__getitem__` of a base in another project file: the attributes it indexes per sample
        # are what this class's own assignments fill.
        owner = next((r for r in module.project_bases_of(info) if "__getitem__" in r.summary.methods), None)
        if owner is not None:
            found.update(owner.summary.indexed)
            # `self._load_data(index)` there: this class's `_load_data` gets the sample index.
            for name, position in owner.summary.index_hooks:
                hook = module.method(info, name)
                params = [a.arg for a in (*hook.args.posonlyargs, *hook.args.args)][1:] if hook else []
                if hook is not None and position < len(params):
                    _collect_indexed(module, info, hook, {params[position]}, found, depth=1, maps=maps)
    return found


def _index_maps(module: Module, info: ClassInfo) -> frozenset[str]:
    """Attributes every assignment of which is an index map (`np.flatnonzero(mask)`,
    `list(range(n))`, `[i for i, r in enumerate(rows) if r.ok]`): subscripting one with the
    sample index gives another index (`self.rows[self._raw_idx[idx]]`)."""
    return _always_assigned(module, info, lambda value, attr: _is_index_map(module, value, 0, attr))


def _always_assigned(
    module: Module,
    info: ClassInfo,
    holds: Callable[[ast.expr, str], bool],
    among: Container[str] | None = None,
) -> frozenset[str]:
    """The attributes (of `among`, when given) every assignment of which is a value that `holds`
    (called with the value and the attribute's name)."""
    values: dict[str, list[ast.expr | None]] = {}
    for assignment in self_assignments(module, info):
        if among is None or assignment.attr in among:
            values.setdefault(assignment.attr, []).append(assignment.value)
    return frozenset(
        attr for attr, found in values.items() if all(v is not None and holds(v, attr) for v in found)
    )


def _is_index_map(module: Module, expr: ast.expr, depth: int, itself: str | None = None) -> bool:
    """`expr` gives sample positions. `itself`: the attribute being bound, whose own value (in
    `self.order = np.sort(self.order[:n])`) is an index map when its other bindings are."""
    if depth > 4:
        return False
    if itself is not None and is_self_attribute(expr, itself):
        return True
    if isinstance(expr, ast.Subscript):  # `np.where(mask)[0]`, `order[:n]`
        return _is_index_map(module, expr.value, depth + 1, itself)
    if isinstance(expr, ast.Name):
        resolved = module.resolve(expr)
        return (
            resolved is not expr
            and isinstance(resolved, ast.expr)
            and _is_index_map(module, resolved, depth + 1, itself)
        )
    if isinstance(expr, ast.ListComp):
        return _enumerates_positions(module, expr)
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    if isinstance(func, ast.Attribute) and func.attr == "tolist" and not expr.args:
        return _is_index_map(module, func.value, depth + 1, itself)
    qualified = module.qualname(func)
    if qualified in INDEX_MAP_CALLS:
        return True
    if qualified in INDEX_MAP_REARRANGEMENTS:  # `np.tile(order, 2)`: the same positions, repeated
        return bool(expr.args) and _is_index_map(module, expr.args[0], depth + 1, itself)
    return (
        qualified in INDEX_MAP_CONVERSIONS
        and len(expr.args) == 1
        and _is_index_map(module, expr.args[0], depth + 1, itself)
    )


def _enumerates_positions(module: Module, comprehension: ast.ListComp) -> bool:
    """`[i for i in range(n) if ...]`, `[i for i, row in enumerate(rows) if ...]`."""
    if len(comprehension.generators) != 1 or not isinstance(comprehension.elt, ast.Name):
        return False
    generator = comprehension.generators[0]
    source = generator.iter
    if not isinstance(source, ast.Call):
        return False
    name = module.qualname(source.func)
    target = generator.target
    if name == "range":
        return isinstance(target, ast.Name) and target.id == comprehension.elt.id
    return (
        name == "enumerate"
        and isinstance(target, ast.Tuple)
        and bool(target.elts)
        and isinstance(target.elts[0], ast.Name)
        and target.elts[0].id == comprehension.elt.id
    )


def _collect_indexed(
    module: Module,
    info: ClassInfo,
    function: FunctionDef,
    tainted: set[str],
    found: set[str],
    depth: int,
    maps: frozenset[str] = frozenset(),
) -> None:
    """Attributes `self.x` subscripted by an expression computed from the sample index."""
    tainted = set(tainted)
    aliases: dict[str, str] = {}
    keys: set[str] = set()  # names holding this sample's entry of the per-sample key list
    key_lists = _key_lists(module, info)
    for node in sorted(walk_scope(function), key=_position):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if _index_derived(module, node.value, tainted, maps):
                tainted |= names_in(target)
            elif isinstance(target, ast.Name) and is_self_attribute(node.value):
                assert isinstance(node.value, ast.Attribute)
                aliases[target.id] = node.value.attr
            elif isinstance(target, ast.Name) and _sample_key(module, node.value, tainted, maps, key_lists):
                keys.add(target.id)
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and is_self_attribute(node.iter):
            assert isinstance(node.iter, ast.Attribute)
            aliases[node.target.id] = node.iter.attr  # `for src in self.sources: src[idx]`
        elif isinstance(node, ast.For | ast.comprehension) and (column := _column_of(node)) is not None:
            aliases[column[0]] = column[1]  # `{k: v[idx] for k, v in self.columns.items()}`
        elif isinstance(node, ast.For):
            tainted |= _looped_indices(module, node, tainted, maps)
        elif isinstance(node, ast.While) and _compares_index(module, node.test, tainted, maps):
            tainted |= _stepped_names(node)  # `while offsets[i] > index: i -= 1` finds the sample's slot
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            attr = _subscripted_attr(node, aliases)
            if attr is not None and (
                _index_derived(module, node.slice, tainted, maps)
                or (isinstance(node.slice, ast.Name) and node.slice.id in keys)
                or _sample_key(module, node.slice, tainted, maps, key_lists)
            ):
                found.add(attr)
        elif isinstance(node, ast.Call) and depth < 3 and is_self_attribute(node.func):
            _follow_call(module, info, node, tainted, found, depth, maps)


def _column_of(loop: ast.For | ast.comprehension) -> tuple[str, str] | None:
    """(the loop's value name, the attribute) for a loop over a dict's columns: `for v in
    self.columns.values()` or `for k, v in self.columns.items()`; each `v[idx]` reads one sample."""
    source, target = loop.iter, loop.target
    if not (isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and not source.args):
        return None
    method, owner = source.func.attr, source.func.value
    if not is_self_attribute(owner):
        return None
    assert isinstance(owner, ast.Attribute)
    if method == "values" and isinstance(target, ast.Name):
        return target.id, owner.attr
    if method == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
        value = target.elts[1]
        return (value.id, owner.attr) if isinstance(value, ast.Name) else None
    return None


def _looped_indices(module: Module, loop: ast.For, tainted: set[str], maps: frozenset[str]) -> set[str]:
    """The names a loop over sample indices binds to each index: `for index in indices` and the
    element of `for i, index in enumerate(indices)` (a mosaic of this sample and three others);
    the counter `i` is a position in the loop, not a sample's."""
    source, target = loop.iter, loop.target
    counted = isinstance(source, ast.Call) and module.qualname(source.func) == "enumerate" and source.args
    if counted:
        assert isinstance(source, ast.Call)
        source = source.args[0]
        if not isinstance(target, ast.Tuple) or len(target.elts) != 2:
            return set()
        target = target.elts[1]
    return names_in(target) if _index_derived(module, source, tainted, maps) else set()


KEY_CONVERSIONS = frozenset({"list", "sorted", "tuple"})


def _key_lists(module: Module, info: ClassInfo) -> frozenset[str]:
    """The attributes `__len__` measures (`len(self.ids)`) that hold a mapping's keys
    (`list(infos.keys())`, `sorted(a.keys() & b.keys())`): one unique key per sample. A list of
    labels is measured by `__len__` too, but its entries key a table of classes."""
    method = module.method(info, "__len__")
    if method is None:
        return frozenset()
    measured = {
        node.args[0].attr
        for node in walk_scope(method)
        if isinstance(node, ast.Call)
        and module.qualname(node.func) == "len"
        and len(node.args) == 1
        and is_self_attribute(node.args[0])
        and isinstance(node.args[0], ast.Attribute)
    }
    keys = lambda value, _attr: _mapping_keys(module, value, 0)  # noqa: E731
    return _always_assigned(module, info, keys, among=measured)


def _mapping_keys(module: Module, expr: ast.expr, depth: int) -> bool:
    """`list(d.keys())`, `sorted(a.keys() & b.keys())`, or a name bound to one of those."""
    if depth > 3:
        return False
    if isinstance(expr, ast.Name):
        resolved = module.resolve(expr)
        if resolved is expr or not isinstance(resolved, ast.expr):
            return False
        return _mapping_keys(module, resolved, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitAnd | ast.BitOr | ast.Sub):
        return _mapping_keys(module, expr.left, depth + 1) and _mapping_keys(module, expr.right, depth + 1)
    if not isinstance(expr, ast.Call):
        return False
    if isinstance(expr.func, ast.Attribute) and expr.func.attr == "keys" and not expr.args:
        return depth > 0  # the keys view itself is not a list: a conversion made it one
    return (
        module.qualname(expr.func) in KEY_CONVERSIONS
        and len(expr.args) == 1
        and _mapping_keys(module, expr.args[0], depth + 1)
    )


def _sample_key(
    module: Module, expr: ast.expr, tainted: set[str], maps: frozenset[str], key_lists: frozenset[str]
) -> bool:
    """`self.keys[idx]` itself, of a list `__len__` measures: the sample's own key, so a dict looked
    up with it (`self.files[key]`) holds one entry per sample. A field of the entry
    (`self.rows[idx][0]`, a category) may key a small table, and is not followed."""
    return (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Attribute)
        and is_self_attribute(expr.value)
        and expr.value.attr in key_lists
        and _index_derived(module, expr.slice, tainted, maps)
    )


def _compares_index(module: Module, test: ast.expr, tainted: set[str], maps: frozenset[str]) -> bool:
    """A loop condition that compares something with the sample index (`offsets[i] > index`)."""
    return isinstance(test, ast.Compare) and any(
        _index_derived(module, side, tainted, maps) for side in (test.left, *test.comparators)
    )


def _stepped_names(loop: ast.While) -> set[str]:
    """The names the loop's body steps by arithmetic on themselves: `i -= 1`, `i = i + 1`."""
    stepped: set[str] = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            stepped.add(node.target.id)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(target := node.targets[0], ast.Name)
            and isinstance(node.value, ast.BinOp)
            and any(
                isinstance(side, ast.Name) and side.id == target.id
                for side in (node.value.left, node.value.right)
            )
        ):
            stepped.add(target.id)
    return stepped


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _follow_call(
    module: Module,
    info: ClassInfo,
    call: ast.Call,
    tainted: set[str],
    found: set[str],
    depth: int,
    maps: frozenset[str] = frozenset(),
) -> None:
    """`self.load(index)`: the index flows into the method's parameter."""
    assert isinstance(call.func, ast.Attribute)
    callee = module.method(info, call.func.attr)
    if callee is None:
        return
    params = [a.arg for a in (*callee.args.posonlyargs, *callee.args.args)][1:]
    passed = {
        params[i]
        for i, arg in enumerate(call.args[: len(params)])
        if _index_derived(module, arg, tainted, maps)
    }
    passed |= {
        k.arg for k in call.keywords if k.arg in params and _index_derived(module, k.value, tainted, maps)
    }
    if passed:
        _collect_indexed(module, info, callee, passed, found, depth + 1, maps)


def _subscripted_attr(node: ast.Subscript, aliases: dict[str, str]) -> str | None:
    """`self.x[...]`, `self.x["a"][...]` or `alias[...]` (alias = self.x) -> "x"."""
    base: ast.expr = node.value
    while isinstance(base, ast.Subscript):
        base = base.value
    if isinstance(base, ast.Attribute) and base.attr in TABLE_ACCESSORS and not is_self_attribute(base):
        base = base.value  # `self.frame.iloc[idx]`: the frame's row
    if isinstance(base, ast.Attribute) and is_self_attribute(base):
        return base.attr
    if isinstance(base, ast.Name):
        return aliases.get(base.id)
    return None


def _index_derived(
    module: Module, expr: ast.expr, tainted: set[str], maps: frozenset[str] = frozenset()
) -> bool:
    """Whether `expr` is arithmetic on the sample index, or the index looked up in an index map
    (`self._raw_idx[idx]`); a value looked up *with* it in anything else is not."""

    def derived(part: ast.expr) -> bool:
        return _index_derived(module, part, tainted, maps)

    if isinstance(expr, ast.Name):
        return expr.id in tainted
    if isinstance(expr, ast.BinOp):
        return derived(expr.left) or derived(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return derived(expr.operand)
    if isinstance(expr, ast.IfExp):
        return derived(expr.body) or derived(expr.orelse)
    if isinstance(expr, ast.Tuple | ast.List):  # `[index] + random.choices(self.indices, k=3)`
        return any(derived(e) for e in expr.elts)
    if isinstance(expr, ast.Call) and module.qualname(expr.func) in INDEX_FUNCTIONS:
        return any(derived(a) for a in expr.args)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "item":
        return derived(expr.func.value)  # `self.order[idx].item()`
    if maps and isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute):
        return is_self_attribute(expr.value) and expr.value.attr in maps and derived(expr.slice)
    return False


def _container_kind(
    module: Module,
    info: ClassInfo,
    function: FunctionDef,
    value: ast.expr | None,
    builders: Builders,
    depth: int,
) -> str | None:
    """The kind: "list", "dict", "container" for Python objects; "?list" when it depends on what a
    conversion converts; None when unknown."""
    if value is None or depth > 3:
        return None
    if isinstance(value, ast.ListComp | ast.DictComp) and _builds_datasets(module, value):
        return None  # one sub-dataset per shard (a ConcatDataset's parts), each holding its own data
    if isinstance(value, ast.ListComp):
        return "list"
    if isinstance(value, ast.DictComp):
        return "dict"
    if isinstance(value, ast.Dict) and value.values and None not in value.keys:
        # `{"path": [...], "label": [...]}`: one entry per column, each column a list built from
        # data (`self.labels[key][index]` reads every column per sample).
        kinds = [_container_kind(module, info, function, v, builders, depth + 1) for v in value.values]
        if all(k in PER_SAMPLE_COLUMNS for k in kinds):
            return "dict of lists"
    if isinstance(value, ast.List | ast.Dict):
        # A literal with items is a fixed, small table; an empty one is per-sample if the parent fills it.
        return None if _literal_items(value) else _filled_in_parent(module, info, function, value)
    if isinstance(value, ast.Subscript):  # json.load(f)["annotations"]
        inner = _container_kind(module, info, function, value.value, builders, depth + 1)
        if inner == TABLE:
            return TABLE  # a column of the table: text only if opened as a path
        if inner == "list" and isinstance(value.slice, ast.Slice):
            return "list"  # `self.samples[:n]`: a slice of a list is a list
        return "container" if inner and not inner.startswith("?") else None
    if isinstance(value, ast.Attribute) and is_self_attribute(value):
        # `self.samples` of an ImageFolder: the list its known base built in `super().__init__()`.
        return "list" if _base_list(module, info, value.attr, builders) else None
    if isinstance(value, ast.Name):
        # Every assignment of the name in its scope (if/else branches): all the same kind, or unknown.
        reaching = _reaching_value(module, value)
        if reaching is not None:  # an earlier statement: the hop cannot loop, so it costs no depth
            return _container_kind(module, info, function, reaching, builders, depth)
        assigned = module.assigned_values(value)
        unpacked = None if assigned else _unpacked_name(module, info, function, value)
        if unpacked is not None:  # `paths, labels = self._scan(root)`: what the helper returns there
            helper, elements = unpacked
            kinds = [_container_kind(module, info, helper, e, builders, depth + 1) for e in elements]
            return kinds[0] if kinds and all(k == kinds[0] for k in kinds) else None
        if not assigned and (bound := _tuple_binding(module, function, value)) is not None:
            # `train, valid = read_file_lists(args)` of a helper in another project file.
            return "list" if _project_tuple_list(module, *bound) else None
        # `x = sorted(x, key=...)` re-sorts what `x` already is: it keeps the other values' kind.
        values = [v for v in assigned if not _converts_name(module, v, value.id, builders)]
        kinds = [_container_kind(module, info, function, v, builders, depth + 1) for v in values]
        return kinds[0] if kinds and all(k == kinds[0] for k in kinds) else None
    if isinstance(value, ast.Call):
        return _call_kind(module, info, function, value, builders, depth)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult) and _repeats_one_slot(value):
        # `[None] * n`: one slot per sample, holding what the parent later puts there (decoded images).
        return _filled_in_parent(module, info, function, value)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        # `list(found) + [extra]`: the concatenation holds what its list part holds.
        parts = [p for p in (value.left, value.right) if not isinstance(p, ast.List)]
        kinds = [_container_kind(module, info, function, p, builders, depth + 1) for p in parts]
        return "list" if kinds and all(k == "list" for k in kinds) else None
    return None


def _base_list(module: Module, info: ClassInfo, attr: str, builders: Builders) -> bool:
    """`attr` is a per-sample list that the class's known third-party base builds (the catalog's
    `base-lists`, e.g. `torchvision.datasets.DatasetFolder.samples`)."""
    fact = module.dataset_fact(info)
    if fact is None or not builders.base_lists:
        return False
    return f"{fact.base}.{attr}" in builders.base_lists


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _builds_datasets(module: Module, comprehension: ast.ListComp | ast.DictComp) -> bool:
    element = comprehension.elt if isinstance(comprehension, ast.ListComp) else comprehension.value
    return isinstance(element, ast.Call) and module.constructs_dataset(element)


def _reaching_value(module: Module, name: ast.Name) -> ast.expr | None:
    """The value of the last plain assignment to `name` before its use in the same block of
    statements (`a, b = list(a), list(b)` pairs its elements), which no branch can bypass; None
    when a compound statement in between may bind it too, or none is found there."""
    statement: ast.AST | None = name
    while statement is not None and not isinstance(statement, ast.stmt):
        statement = module.parent(statement)
    block_owner = module.parent(statement) if statement is not None else None
    if statement is None or block_owner is None:
        return None
    blocks = [getattr(block_owner, field, None) or [] for field in ("body", "orelse", "finalbody")]
    block = next((b for b in blocks if statement in b), None)
    if block is None:
        return None
    for earlier in reversed(block[: block.index(statement)]):
        if isinstance(earlier, ast.Assign) and len(earlier.targets) == 1:
            found = _paired_value(earlier.targets[0], earlier.value, name.id)
            if found is not None:
                return found
        if any(_binds(node, name.id) for node in ast.walk(earlier)):
            return None  # bound in a way not followed (a loop, a branch, `with ... as`)
    return None


def _binds(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load)


def _paired_value(target: ast.expr, value: ast.expr, name: str) -> ast.expr | None:
    if isinstance(target, ast.Name):
        return value if target.id == name else None
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        for element, part in zip(target.elts, value.elts, strict=True):
            if isinstance(element, ast.Name) and element.id == name and not isinstance(part, ast.Starred):
                return part
    return None


def _converts_name(module: Module, value: ast.expr | None, name: str, builders: Builders) -> bool:
    return (
        isinstance(value, ast.Call)
        and module.qualname(value.func) in builders.conversions
        and bool(value.args)
        and isinstance(value.args[0], ast.Name)
        and value.args[0].id == name
    )


def _call_kind(
    module: Module, info: ClassInfo, function: FunctionDef, call: ast.Call, builders: Builders, depth: int
) -> str | None:
    qualified = module.qualname(call.func)
    if qualified == "pandas.Series":
        return "object-dtype Series" if _series_of_names(module, call) else None
    if qualified in builders.tables and not any(k.arg in ("dtype", "dtype_backend") for k in call.keywords):
        return TABLE  # reported only where a sample's entry is opened as a path (`_opens_what_it_reads`)
    if qualified is not None and qualified in builders.calls | builders.conversions:
        if not call.args and not call.keywords:
            # `list()`, `OrderedDict()`: empty, like `[]`; what fills it, and where, decides.
            return _filled_in_parent(module, info, function, call)
        kind = _kind_of(qualified)
        if qualified == "list":
            return kind  # `list(anything)` holds Python objects, whatever they are
        if not call.args and qualified not in builders.calls:
            return None  # `dict(input_ids=ids, labels=labels)`: what the keywords hold decides, unread
        if qualified in builders.calls or _fresh_objects(
            module, info, function, call.args[0], builders, depth
        ):
            return kind
        return f"?{kind}"
    if isinstance(call.func, ast.Attribute) and call.func.attr in builders.methods and qualified is None:
        return "list"
    helper = in_file_callee(module, info, call)
    if helper is not None and depth < 3:
        # `return None` on a failure path gives nothing to index: the other returns decide.
        returns = [
            r.value
            for r in walk_scope(helper)
            if isinstance(r, ast.Return) and r.value is not None and not _is_none(r.value)
        ]
        kinds = [_container_kind(module, info, helper, r, builders, depth + 1) for r in returns]
        if kinds and all(kinds):
            return kinds[0]
    if helper is None and module.list_return(call) is not None:
        return "list"  # a helper of another project file that returns the list it fills
    if helper is None and is_self_attribute(call.func):
        # `self.select(self.db)` of a base in another project file that returns the list it fills.
        assert isinstance(call.func, ast.Attribute)
        name = call.func.attr
        if any(name in ref.summary.list_methods for ref in module.project_bases_of(info)):
            return "list"
    return None


TABLE = "table of strings (pandas object dtype)"
# What a column of a dict literal must be for the dict to hold per-sample lists: lists read or
# built from data (a literal list with items is a fixed table, and stays None).
PER_SAMPLE_COLUMNS = frozenset({"list", "container"})
TABLE_ACCESSORS = frozenset({"iloc", "loc", "iat", "at"})


def _opens_what_it_reads(module: Module, info: ClassInfo, attr: str, path_calls: frozenset[str]) -> bool:
    """A sample method hands a value read from `self.<attr>` to a call that takes a path
    (`sf.read(row["mixture_path"])`, `Image.open(str(self.images.iloc[idx]))`): the column holds
    strings, so the table's column has the object dtype, one Python str per sample."""
    for name, method in info.methods.items():
        if name == "__init__":
            continue
        derived: set[str] = set()
        for node in sorted(walk_scope(method), key=_position):
            if isinstance(node, ast.Assign) and _reads_attr(node.value, attr, derived):
                derived.update(*(names_in(target) for target in node.targets))
            elif isinstance(node, ast.For) and _reads_attr(node.iter, attr, derived):
                derived |= names_in(node.target)
            elif (
                isinstance(node, ast.Call)
                and module.qualname(node.func) in path_calls
                and node.args
                and _reads_attr(node.args[0], attr, derived)
            ):
                return True
    return False


def _reads_attr(expr: ast.expr, attr: str, derived: set[str]) -> bool:
    return any(
        is_self_attribute(node, attr) or (isinstance(node, ast.Name) and node.id in derived)
        for node in ast.walk(expr)
    )


def _series_of_names(module: Module, call: ast.Call) -> bool:
    """`pd.Series(sorted(os.listdir(root)))`: file names are strings, so the column has the object
    dtype (one Python object per entry); a `dtype=` given, or other data, may not."""
    if len(call.args) != 1 or call.keywords:
        return False
    source = module.resolve(call.args[0])
    while isinstance(source, ast.Call) and module.qualname(source.func) in {"sorted", "list"} and source.args:
        source = module.resolve(source.args[0])
    return isinstance(source, ast.Call) and module.qualname(source.func) in NAME_LISTINGS


def _kind_of(qualified: str) -> str:
    last = qualified.rpartition(".")[2].lower()
    is_list = last in {"list", "tuple"} or last.endswith("sorted")  # `sorted`, `natsorted`
    return "dict" if "dict" in last else "list" if is_list else "container"


def _fresh_objects(
    module: Module, info: ClassInfo, function: FunctionDef, source: ast.expr, builders: Builders, depth: int
) -> bool:
    """What a conversion converts is data read here (a call, a comprehension, another builder)."""
    if isinstance(source, ast.Call | ast.ListComp | ast.GeneratorExp | ast.DictComp | ast.SetComp):
        return True
    if isinstance(source, ast.Attribute) and is_self_attribute(source):
        # `self.paths = natsorted(self.paths)` converts what the other assignments made.
        values = [
            a
            for a in self_assignments(module, info)
            if a.attr == source.attr and not _converts_itself(a)
        ]
        return bool(values) and all(
            (kind := _container_kind(module, info, a.method, a.value, builders, depth + 1))
            and not kind.startswith("?")
            for a in values
        )
    kind = _container_kind(module, info, function, source, builders, depth + 1)
    return kind is not None and not kind.startswith("?")


def _converts_itself(assignment: SelfAssignment) -> bool:
    """`self.x = f(self.x, ...)`: a call on the attribute's own earlier value."""
    value = assignment.value
    return (
        isinstance(value, ast.Call)
        and bool(value.args)
        and is_self_attribute(value.args[0], assignment.attr)
    )


def _literal_items(value: ast.List | ast.Dict) -> bool:
    return bool(value.elts if isinstance(value, ast.List) else value.keys)


def _repeats_one_slot(value: ast.BinOp) -> bool:
    """`[None] * n` or `n * [None]`: a list literal of one item, repeated."""
    return any(isinstance(side, ast.List) and len(side.elts) == 1 for side in (value.left, value.right))


def _filled_in_parent(module: Module, info: ClassInfo, function: FunctionDef, value: ast.expr) -> str | None:
    """The kind ("list", "dict") of an empty container (or `[None] * n` slots) bound here and
    filled outside worker code."""
    key = _bound_to(module, value)
    if key is None:
        return None
    fills = [
        node
        for method in (*info.methods.values(), function)
        for node in walk_scope(method)
        if _fills(node, key)
    ]
    if not fills or any(module.in_worker_code(node) for node in fills):
        return None
    is_list = isinstance(value, ast.List | ast.BinOp) or (
        isinstance(value, ast.Call) and module.qualname(value.func) == "list"
    )
    return "list" if is_list else "dict"


def _bound_to(module: Module, value: ast.expr) -> str | None:
    """The dotted name `value` is assigned to: `self.x = value`, `self.x: T = value`, or its element
    of `self.a, self.b = value, other`."""
    parent = module.parent(value)
    if isinstance(parent, ast.Tuple) and value in parent.elts:
        statement = module.parent(parent)
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            return None
        target = statement.targets[0]
        if not isinstance(target, ast.Tuple) or len(target.elts) != len(parent.elts):
            return None
        return dotted(target.elts[parent.elts.index(value)])
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        return dotted(parent.targets[0])
    if isinstance(parent, ast.AnnAssign):
        return dotted(parent.target)
    return None


def _fills(node: ast.AST, key: str | None) -> bool:
    """`key.append(...)` and the like, `key[i] = ...` (also one element of a tuple target), `key += ...`."""
    if key is None:
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        filling = node.func.attr in {"append", "extend", "insert", "update", "setdefault"}
        return filling and dotted(node.func.value) == key
    if isinstance(node, ast.Assign):
        targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple | ast.List) else [t])]
        return any(isinstance(t, ast.Subscript) and dotted(t.value) == key for t in targets)
    if isinstance(node, ast.AugAssign):
        return isinstance(node.op, ast.Add) and dotted(node.target) == key
    return False


# ---- DL302 unbounded-cache-in-dataset ------------------------------------------------------------


def unbounded_cache_in_dataset(
    module: Module,
    *,
    unbounded_caches: Sequence[str] = (),
    sized_caches: Sequence[str] = (),
    dict_factories: Sequence[str] = (),
    eviction_methods: Sequence[str] = (),
) -> Iterator[Match]:
    """Unbounded cache decorators/wrappers on dataset methods, and per-sample dicts never evicted."""
    if not module.has_data_code:
        return
    last_names = {name.rpartition(".")[2] for name in (*unbounded_caches, *sized_caches)}
    for function in module.functions:
        if (
            function.decorator_list
            and _takes_arguments(module, function)
            and _is_data_function(module, function)
            and not _called_with_fixed_arguments(module, function)
        ):
            for decorator in function.decorator_list:
                if _unbounded(module, decorator, unbounded_caches, sized_caches):
                    yield Match(decorator, {"what": f"The cache on `{function.name}`"})
    for call in module.calls:
        # Cheap name test first: qualifying every call of a large file is the expensive part.
        func = call.func.func if isinstance(call.func, ast.Call) else call.func
        if (dotted(func) or "").rpartition(".")[2] not in last_names:
            continue
        wrapped = _wrapped_by_unbounded_cache(module, call, unbounded_caches, sized_caches)
        if wrapped and (module.in_worker_code(call) or _in_dataset(module, call)):
            yield Match(call, {"what": f"The cache around `{module.segment(wrapped)}`"})
    for info in worker_classes(module):
        if not module.read_only_without_workers(info):
            yield from _dicts_filled_in_workers(module, info, dict_factories, eviction_methods)


def _takes_arguments(module: Module, function: FunctionDef) -> bool:
    """A cached function of no argument (besides self) holds one value: it is bounded."""
    args = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    if module.enclosing_class(function) is not None and args and args[0].arg in {"self", "cls"}:
        args = args[1:]
    return bool(args or function.args.vararg or function.args.kwarg)


def _called_with_fixed_arguments(module: Module, function: FunctionDef) -> bool:
    """Every use of the function is a call whose arguments are the same for every sample.

    `get_vocab(self.vocab_path)` caches one entry per worker, however many samples ask: the
    cache is bounded by the dataset's settings, not by its length. A function passed around
    uncalled, or called with anything else, may be called per sample.
    """
    uses = _uses_of(module, function)
    return bool(uses) and all(_fixed_call(module, use) for use in uses)


def _uses_of(module: Module, function: FunctionDef) -> list[ast.expr]:
    """Loads of the function's name (a module-level function) or of `self.<name>` (a method)."""
    owner = module.enclosing_class(function)
    if owner is None:
        return [
            n
            for n in module.nodes_of(ast.Name)
            if n.id == function.name and isinstance(n.ctx, ast.Load) and module.binding(n) is function
        ]
    return [
        n
        for n in module.nodes_of(ast.Attribute)
        if n.attr == function.name and is_self_attribute(n) and module.enclosing_class(n) is owner
    ]


def _fixed_call(module: Module, use: ast.expr) -> bool:
    call = module.parent(use)
    if not isinstance(call, ast.Call) or call.func is not use:
        return False
    return all(_fixed(module, a) for a in (*call.args, *(k.value for k in call.keywords)))


def _fixed(module: Module, argument: ast.expr) -> bool:
    """A constant, an attribute chain on `self` (`self.cfg.vocab`, not an item of one), or a
    module-level name."""
    if isinstance(argument, ast.Constant):
        return True
    base = argument
    while isinstance(base, ast.Attribute):
        base = base.value
    if isinstance(base, ast.Name) and base is not argument:
        return base.id == "self"
    if isinstance(argument, ast.Name):
        bound = module.binding(argument)
        return bound is not None and module.scope_of(bound) is module.tree
    return False


def _is_data_function(module: Module, function: FunctionDef) -> bool:
    return module.in_worker_code(function) or _in_dataset(module, function)


def _in_dataset(module: Module, node: ast.AST) -> bool:
    owner = module.enclosing_class(node)
    return owner is not None and module.is_dataset(module.class_of(owner))


def _unbounded(module: Module, decorator: ast.expr, unbounded: Sequence[str], sized: Sequence[str]) -> bool:
    if module.qualname(decorator) in unbounded:
        return True
    if isinstance(decorator, ast.Call):
        if module.qualname(decorator.func) in unbounded:
            return True
        if module.qualname(decorator.func) in sized:
            size = decorator.args[0] if decorator.args else _keyword(decorator, "maxsize")
            return size is not None and isinstance(size, ast.Constant) and size.value is None
    return False


def _wrapped_by_unbounded_cache(
    module: Module, call: ast.Call, unbounded: Sequence[str], sized: Sequence[str]
) -> ast.expr | None:
    """`functools.cache(f)` or `lru_cache(maxsize=None)(f)` -> f."""
    if not call.args:
        return None
    if module.qualname(call.func) in unbounded:
        return call.args[0]
    if isinstance(call.func, ast.Call) and _unbounded(module, call.func, unbounded, sized):
        return call.args[0]
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dicts_filled_in_workers(
    module: Module, info: ClassInfo, dict_factories: Sequence[str], eviction_methods: Sequence[str]
) -> Iterator[Match]:
    assignments = self_assignments(module, info)
    candidates = {
        a.attr
        for a in assignments
        if a.method.name == "__init__"
        and a.value is not None
        and _empty_dict(module, a.value, dict_factories)
    }
    for attr in sorted(candidates):
        others = [a for a in assignments if a.attr == attr and a.method.name != "__init__"]
        if others or _evicted(module, info, attr, eviction_methods):
            continue
        stores = [node for node in _class_nodes(module, info) if _stores_into(node, attr)]
        in_workers = [node for node in stores if module.in_worker_code(node)]
        if in_workers:
            first = min(in_workers, key=lambda n: (n.lineno, n.col_offset))
            yield Match(first, {"what": f"`self.{attr}`, filled in `__getitem__` and never evicted,"})


def _empty_dict(module: Module, value: ast.expr, factories: Sequence[str]) -> bool:
    if isinstance(value, ast.Dict):
        return not value.keys
    return isinstance(value, ast.Call) and module.qualname(value.func) in factories and not value.args[1:]


def _class_nodes(module: Module, info: ClassInfo) -> Iterator[Any]:
    for owner in (info, *module.base_classes(info)):
        for method in owner.methods.values():
            yield from walk_scope(method)


def _stores_into(node: ast.AST, attr: str) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Subscript) and is_self_attribute(t.value, attr) for t in node.targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in {"setdefault", "update", "__setitem__"} and is_self_attribute(
            node.func.value, attr
        )
    return False


def _evicted(module: Module, info: ClassInfo, attr: str, eviction_methods: Sequence[str]) -> bool:
    """`del self.x[k]`, `self.x.pop(...)`, or any `len(self.x)` (a size check bounds it)."""
    for node in _class_nodes(module, info):
        if isinstance(node, ast.Delete) and any(
            isinstance(t, ast.Subscript) and is_self_attribute(t.value, attr) for t in node.targets
        ):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in eviction_methods
                and is_self_attribute(func.value, attr)
            ):
                return True
            if module.qualname(func) == "len" and node.args and is_self_attribute(node.args[0], attr):
                return True
    return False


# ---- DL303 caching-closure -----------------------------------------------------------------------


def caching_closure(
    module: Module,
    *,
    container_factories: Sequence[str] = (),
    store_methods: Sequence[str] = (),
    data_keywords: Sequence[str] = (),
    transform_wrappers: Sequence[str] = (),
) -> Iterator[Match]:
    """A lambda or nested def used for data that writes into a mutable default or closed-over container."""
    if not imports_any(module, ("torch", *transform_wrappers)):
        return
    for function in (*module.functions, *module.nodes_of(ast.Lambda)):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) and not _nested(module, function):
            continue
        store = _memo_store(module, function, container_factories, store_methods)
        if store is None:
            continue
        if _used_for_data(module, function, data_keywords, transform_wrappers):
            name = function.name if not isinstance(function, ast.Lambda) else "lambda"
            yield Match(function, {"func": name, "store": store})


def _nested(module: Module, function: FunctionDef) -> bool:
    """Defined directly inside a function (not a method of a class)."""
    for ancestor in module.ancestors(function):
        if isinstance(ancestor, ast.ClassDef):
            return False
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return True
    return False


def _memo_store(
    module: Module,
    function: FunctionDef | ast.Lambda,
    factories: Sequence[str],
    store_methods: Sequence[str],
) -> str | None:
    """The name of the mutable default or closed-over container the function writes to, if any."""
    memos = _mutable_defaults(module, function, factories)
    for node in walk_scope(function) if not isinstance(function, ast.Lambda) else ast.walk(function.body):
        name = _stored_name(node, store_methods)
        if name is None:
            continue
        if name in memos:
            return name
        if _closed_over_container(module, function, node, name, factories):
            return name
    return None


def _mutable_defaults(
    module: Module, function: FunctionDef | ast.Lambda, factories: Sequence[str]
) -> set[str]:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    return {arg.arg for arg, default in pairs if _new_container(module, default, factories)}


def _new_container(module: Module, expr: ast.AST, factories: Sequence[str]) -> bool:
    if isinstance(expr, ast.List | ast.Dict | ast.Set):
        return True
    return isinstance(expr, ast.Call) and module.qualname(expr.func) in factories


def _stored_name(node: ast.AST, store_methods: Sequence[str]) -> str | None:
    """`cache[k] = v` or `cache.setdefault(...)` -> "cache"."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                return target.value.id
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in store_methods
    ) and isinstance(node.func.value, ast.Name):
        return node.func.value.id
    return None


def _closed_over_container(
    module: Module, function: FunctionDef | ast.Lambda, node: ast.AST, name: str, factories: Sequence[str]
) -> bool:
    """`name` is bound in an enclosing *function* (not here, not at module level) to a new container."""
    probe = next(
        (
            n
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ),
        None,
    )
    if probe is None:
        return False
    bound = module.binding(probe)
    if bound is None or not _new_container(module, bound, factories):
        return False
    owner = module.enclosing_function(bound)
    return owner is not None and owner is not function and owner in set(module.ancestors(function))


def _used_for_data(
    module: Module,
    function: FunctionDef | ast.Lambda,
    data_keywords: Sequence[str],
    transform_wrappers: Sequence[str],
) -> bool:
    if module.in_worker_code(function) and not isinstance(function, ast.Lambda):
        return True
    for use in _references(module, function):
        if _data_position(module, use, data_keywords, transform_wrappers):
            return True
    return False


def _references(module: Module, function: FunctionDef | ast.Lambda) -> Iterator[ast.expr]:
    """The lambda itself, or every load of the def's name that binds to it."""
    if isinstance(function, ast.Lambda):
        yield function
        return
    for name in module.nodes_of(ast.Name):
        if name.id != function.name or not isinstance(name.ctx, ast.Load):
            continue
        parent = module.parent(name)
        if isinstance(parent, ast.Call) and parent.func is name:
            continue  # called right here: its result is used, not the function
        if module.binding(name) is function:
            yield name


def _data_position(
    module: Module, use: ast.expr, data_keywords: Sequence[str], transform_wrappers: Sequence[str]
) -> bool:
    """Passed to a loader, a dataset or a transform wrapper, as a data keyword, or stored on a dataset."""
    node: ast.AST = use
    for parent in module.ancestors(use):
        if isinstance(parent, ast.keyword) and parent.arg in data_keywords:
            return True
        if (
            isinstance(parent, ast.Call)
            and node is not parent.func
            and _data_callee(module, parent, transform_wrappers)
        ):
            return True
        if isinstance(parent, ast.Assign) and node is parent.value:
            return any(is_self_attribute(t) for t in parent.targets) and _in_dataset(module, parent)
        if isinstance(parent, ast.stmt):
            return False
        node = parent
    return False


def _data_callee(module: Module, call: ast.Call, transform_wrappers: Sequence[str]) -> bool:
    if any(loader.node is call for loader in module.loader_calls):
        return True
    built = module.resolve_class(call.func)
    if built is not None and module.is_dataset(built):
        return True
    return qualified_in(module, call.func, transform_wrappers)


# ---- DL304 batches-kept-alive --------------------------------------------------------------------


@record
class Sharing:
    """Calls that keep a batch's shared-memory storage alive, and calls that add to a container."""

    methods: frozenset[str]  # batch.cpu(), .numpy(), .view(...): same storage
    calls: frozenset[str]  # np.asarray(batch): same storage
    appends: frozenset[str]  # kept.append(...), .extend(...)


def batches_kept_alive(
    module: Module,
    *,
    sharing_methods: Sequence[str] = (),
    sharing_calls: Sequence[str] = (),
    append_methods: Sequence[str] = (),
    file_system_strategy: Sequence[str] = (),
) -> Iterator[Match]:
    """Inside `for batch in loader:`, `kept.append(batch ...)` into a list that outlives the loop.

    Only a loop over a DataLoader the file builds, one that may use workers, counts: a loader
    known only by a parameter's name is unknown (it may have no workers, or not be a loader at
    all), and unknown is silent.
    """
    if not module.has_data_code or _uses_file_system_strategy(module, file_system_strategy):
        return
    sharing = Sharing(frozenset(sharing_methods), frozenset(sharing_calls), frozenset(append_methods))
    for loop in module.nodes_of(ast.For, ast.AsyncFor):
        iterable, indexed = unwrap_iterable(module, loop.iter)
        if not _may_be_worker_loader(module, iterable):
            continue
        target = loop.target
        if indexed and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]  # `for step, batch in enumerate(loader)`
        yield from _kept_batches(module, loop, names_in(target), sharing)


def _uses_file_system_strategy(module: Module, calls: Sequence[str]) -> bool:
    return any(
        module.qualname(call.func) in calls and call.args and module.literal(call.args[0]) == "file_system"
        for call in module.calls
    )


def _may_be_worker_loader(module: Module, iterable: ast.expr) -> bool:
    resolved = module.resolve(iterable)
    for loader in module.loader_calls:
        if loader.node is resolved:
            return loader.may_use_workers()
    return False


def _kept_batches(
    module: Module, loop: ast.For | ast.AsyncFor, batch_names: set[str], sharing: Sharing
) -> Iterator[Match]:
    """Appends of the batch (or names bound to views of it, in source order) to outliving containers."""
    derived = set(batch_names)
    local = names_assigned_in(loop.body)
    nodes = [n for s in loop.body for n in (s, *walk_scope(s)) if isinstance(n, ast.Assign | ast.Call)]
    for node in sorted(nodes, key=_position):
        if isinstance(node, ast.Assign):
            for target, value in _pairs(node):
                bound = names_in(target)
                derived = (
                    derived | bound if _shares_batch(module, value, derived, sharing) else derived - bound
                )
        elif _appends_batch(module, node, derived, local, sharing):
            assert isinstance(node.func, ast.Attribute)
            yield Match(node, {"container": module.segment(node.func.value)})


def _pairs(assign: ast.Assign) -> list[tuple[ast.expr, ast.expr]]:
    """`a, b = x, y` -> [(a, x), (b, y)]; any other assignment -> [(target, value), ...]."""
    pairs: list[tuple[ast.expr, ast.expr]] = []
    value = assign.value
    for target in assign.targets:
        if _same_shape(target, value):
            assert isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
            pairs.extend(zip(target.elts, value.elts, strict=True))
        else:
            pairs.append((target, value))
    return pairs


def _same_shape(target: ast.expr, value: ast.expr) -> bool:
    return (
        isinstance(target, ast.Tuple)
        and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
        and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))
    )


def _appends_batch(
    module: Module, call: ast.Call, derived: set[str], local: set[str], sharing: Sharing
) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in sharing.appends or not call.args:
        return False
    container = func.value
    if isinstance(container, ast.Name) and container.id in local:
        return False  # rebuilt in every iteration: it dies with it
    if not isinstance(container, ast.Name) and not is_self_attribute(container):
        return False
    return _shares_batch(module, call.args[-1], derived, sharing)


def names_assigned_in(body: Sequence[ast.stmt]) -> set[str]:
    """Names assigned anywhere in `body` (a list created there does not outlive an iteration)."""
    found: set[str] = set()
    for statement in body:
        for node in (statement, *walk_scope(statement)):
            if isinstance(node, ast.Assign):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def _shares_batch(module: Module, expr: ast.expr, derived: set[str], sharing: Sharing) -> bool:
    """Whether `expr` is (a view of) the batch: the name, an item of it, or a storage-sharing call."""
    if isinstance(expr, ast.Name):
        return expr.id in derived
    if isinstance(expr, ast.Subscript | ast.Attribute):
        return _shares_batch(module, expr.value, derived, sharing)
    if isinstance(expr, ast.Tuple | ast.List):
        return any(_shares_batch(module, e, derived, sharing) for e in expr.elts)
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in sharing.methods and module.qualname(func) is None:
            return _shares_batch(module, func.value, derived, sharing)
        if module.qualname(func) in sharing.calls and expr.args:
            return _shares_batch(module, expr.args[0], derived, sharing)
    return False


# ---- DL305 lazy-image-handle ---------------------------------------------------------------------

COMPREHENSIONS = (ast.ListComp, ast.DictComp, ast.SetComp)


@record
class ImageUses:
    """Which uses of an opened image leave it lazy, and which add it to a container."""

    header_attributes: frozenset[str]
    container_methods: frozenset[str]
    follow_returns: bool = True  # False while asking whether a caller keeps what a helper returns
    # How a caller in another file decodes a returned image at once: "method:convert", "call:numpy.array".
    decoding_uses: frozenset[str] = frozenset()


def lazy_image_handle(
    module: Module,
    *,
    openers: Sequence[str] = (),
    header_attributes: Sequence[str] = (),
    container_methods: Sequence[str] = (),
    decoding_methods: Sequence[str] = (),
    decoding_calls: Sequence[str] = (),
) -> Iterator[Match]:
    """`Image.open(path)` whose still-lazy result is stored, returned or put in a container that is."""
    if not imports_any(module, openers):
        return
    decoding = frozenset({*(f"method:{m}" for m in decoding_methods), *(f"call:{c}" for c in decoding_calls)})
    uses = ImageUses(frozenset(header_attributes), frozenset(container_methods), decoding_uses=decoding)
    for call in module.calls:
        if module.qualname(call.func) not in openers or _opens_file_object(module, call):
            continue
        where = _kept_where(module, call, uses)
        if where is not None:
            yield Match(call, {"where": where})


def _opens_file_object(module: Module, call: ast.Call) -> bool:
    """`Image.open(f)` on a file object or buffer: Pillow does not own that descriptor."""
    if not call.args:
        return True
    source = call.args[0]
    if isinstance(source, ast.Call):
        return (module.qualname(source.func) or "").rpartition(".")[2] in {"open", "BytesIO"}
    if isinstance(source, ast.Name):
        for ancestor in module.ancestors(call):
            if isinstance(ancestor, ast.With | ast.AsyncWith) and any(
                item.optional_vars is not None and source.id in names_in(item.optional_vars)
                for item in ancestor.items
            ):
                return True
        bound = module.binding(source)
        if isinstance(bound, ast.Call):
            return (module.qualname(bound.func) or "").rpartition(".")[2] in {"open", "BytesIO"}
    return False


def _kept_where(module: Module, call: ast.Call, uses: ImageUses) -> str | None:
    """How the open image escapes while still lazy ("it is returned unloaded", ...), or None."""
    node: ast.AST = call
    parent = module.parent(node)
    container = many = False
    while isinstance(parent, (ast.List, ast.Tuple, ast.Dict, ast.Set, *COMPREHENSIONS)):
        if isinstance(parent, COMPREHENSIONS):
            if node is not getattr(parent, "elt", getattr(parent, "value", None)):
                return None  # the image is what the comprehension iterates over, not what it keeps
            many = many or not all(_literal_sequence(module.resolve(g.iter)) for g in parent.generators)
        node, parent, container = parent, module.parent(parent), True
    return _escape(module, node, parent, container, uses, many)


def _literal_sequence(expr: ast.AST) -> bool:
    """`(a, b)`, `[x, y]`, `range(3)` (or a name bound to one): a count fixed in the code, not one
    per file found."""
    if isinstance(expr, ast.Tuple | ast.List | ast.Set):
        return True
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "range"
        and all(isinstance(a, ast.Constant) for a in expr.args)
    )


def _in_loop(module: Module, node: ast.AST) -> bool:
    """`node` runs once per iteration of a loop of its own function."""
    function = module.enclosing_function(node)
    for ancestor in module.ancestors(node):
        if ancestor is function:
            return False
        if isinstance(ancestor, ast.For | ast.AsyncFor | ast.While):
            return True
    return False


def _escape(
    module: Module,
    node: ast.AST,
    parent: ast.AST | None,
    container: bool,
    uses: ImageUses,
    many: bool = False,
) -> str | None:
    """Where `node` (the image, or a container of images) goes from its `parent`. `many`: the
    container holds one open image per item of a loop or a comprehension over found paths."""
    if isinstance(parent, ast.Return):
        return RETURNED if container else _returned_escape(module, parent, uses)
    if isinstance(parent, ast.Call) and node is not parent.func:
        if isinstance(parent.func, ast.Attribute) and parent.func.attr in uses.container_methods:
            return _container_escape(module, parent.func.value, uses, _in_loop(module, parent))
        return None  # handed to code that may decode it
    if isinstance(parent, ast.Assign) and node is parent.value and len(parent.targets) == 1:
        target = parent.targets[0]
        local = _local_container(module, target)
        if local is not None:
            # `sample["img"] = Image.open(p)` into a dict built here: kept only if the dict is.
            return _name_escape(module, local[0], local[1], True, uses, _in_loop(module, parent))
        if isinstance(target, ast.Subscript) and _handed_on_after(module, target, parent):
            # `sample["images"] = images`, then `sample = self.resize(sample)`: it may decode them.
            return None
        if isinstance(target, ast.Attribute | ast.Subscript):
            return f"it is stored in `{module.segment(target)}`"
        if isinstance(target, ast.Name):
            return _name_escape(module, parent, target.id, container, uses, many)
    return None


RETURNED = "it is returned unloaded"


def _returned_escape(module: Module, statement: ast.Return, uses: ImageUses) -> str | None:
    """One lazy image returned by a helper is kept unless every caller the file shows decodes it at once
    (`load(p).convert("RGB")`, `np.array(load(p))`). With no caller in sight, a file with no Dataset,
    no loader and no worker code hands it to callers elsewhere (a web handler, a script) the linter
    cannot read: silent."""
    function = module.enclosing_function(statement)
    if not uses.follow_returns or not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        return RETURNED
    callers = _in_file_callers(module, function)
    # Callers in other files of the project count only when each decodes the image at once: what
    # they do later with a name bound to it is not followed there.
    elsewhere = _uses_elsewhere(module, function)
    if not callers and not elsewhere:
        outside = (
            not module.dataset_classes and not module.loader_calls and not module.in_worker_code(function)
        )
        return None if outside else RETURNED
    if not elsewhere <= uses.decoding_uses:
        return RETURNED
    asked = ImageUses(uses.header_attributes, uses.container_methods, follow_returns=False)
    kept = [line for call in callers if (line := _kept_where(module, call, asked)) is not None]
    return RETURNED if kept else None


def _uses_elsewhere(module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """How the project's other files first use what the top-level `function` returns
    (`Project.result_uses`)."""
    if module.project is None or not module.module_name or module.parent(function) is not module.tree:
        return frozenset()
    return module.project.result_uses(module.qualified_prefix + function.name)


def _in_file_callers(module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call]:
    """`helper(...)` of a module-level function, `self.helper(...)` of a method of the same class."""
    owner = module.enclosing_class(function)
    found = []
    for call in module.calls:
        func = call.func
        if owner is None and isinstance(func, ast.Name) and func.id == function.name:
            if module.binding(func) is function:
                found.append(call)
        elif (
            owner is not None
            and isinstance(func, ast.Attribute)
            and func.attr == function.name
            and isinstance(func.value, ast.Name)
            and func.value.id in {"self", "cls"}
            and module.enclosing_class(call) is owner
        ):
            found.append(call)
    return found


def _handed_on_after(module: Module, target: ast.Subscript, statement: ast.Assign) -> bool:
    """`name[k] = images` followed, in the same function, by a call handed `name` itself: the code
    it calls may decode what the container holds, as for an image handed to a call directly."""
    base = target.value
    while isinstance(base, ast.Subscript):
        base = base.value
    function = module.enclosing_function(statement)
    if not isinstance(base, ast.Name) or function is None:
        return False
    for node in walk_scope(function):
        if isinstance(node, ast.Call) and node.lineno > statement.lineno:
            values = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(v, ast.Name) and v.id == base.id for v in values):
                return True
    return False


def _local_container(module: Module, target: ast.expr) -> tuple[ast.Assign, str] | None:
    """For `name[...] = ...` where `name` is bound once in this function by `name = <expr>`: that
    assignment and the name; else None (a parameter, a global, an attribute: it may outlive us)."""
    base = target
    while isinstance(base, ast.Subscript):
        base = base.value
    if base is target or not isinstance(base, ast.Name):
        return None
    bound = module.binding(base)
    assignment = module.parent(bound) if bound is not None else None
    if not isinstance(assignment, ast.Assign) or module.enclosing_function(assignment) is None:
        return None
    if module.enclosing_function(assignment) is not module.enclosing_function(target):
        return None
    return assignment, base.id


def _container_escape(module: Module, receiver: ast.expr, uses: ImageUses, many: bool) -> str | None:
    """`receiver.append(image)`: kept if the receiver is stored, or a local that is returned or stored."""
    if isinstance(receiver, ast.Attribute | ast.Subscript):
        return f"it is put in `{module.segment(receiver)}`"
    if isinstance(receiver, ast.Name):
        bound = module.binding(receiver)
        assignment = module.parent(bound) if bound is not None else None
        if isinstance(assignment, ast.Assign):
            return _name_escape(module, assignment, receiver.id, True, uses, many)
    return None


def _name_escape(
    module: Module, assignment: ast.Assign, name: str, container: bool, uses: ImageUses, many: bool = False
) -> str | None:
    """Follow `image = Image.open(p)` (or a list of them): kept if returned or stored, never decoded.
    A list of one image per path found, decoded only by a later loop over it, held them all open."""
    scope = module.enclosing_function(assignment) or module.tree
    kept: str | None = None
    until = _next_binding_line(module, assignment, name)
    for use in walk_scope(scope):
        if not (isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load)):
            continue
        if use.lineno < assignment.lineno or use.lineno > until:
            continue  # before this binding, or after the name is bound to something else
        parent = module.parent(use)
        if isinstance(parent, ast.Attribute | ast.Subscript):
            if container or (isinstance(parent, ast.Attribute) and parent.attr in uses.header_attributes):
                continue  # `images.sort()`, `image.size`: the files stay open
            return None  # `image.convert(...)`, `.load()`, `.close()`: decoded or closed
        if isinstance(parent, ast.withitem):
            return None
        if many and _iterated_by(module, parent, use):
            kept = kept or f"every image is opened into `{name}` before a later loop decodes any"
            continue
        escape = _escape(module, use, parent, container, uses)
        if escape is None and isinstance(parent, ast.Call):
            return None
        kept = escape or kept
    return kept


ITERATION_WRAPPERS = frozenset({"enumerate", "zip", "reversed", "sorted", "list", "iter"})


def _iterated_by(module: Module, parent: ast.AST | None, use: ast.expr) -> bool:
    """`for image in images:`, `[f(image) for image in images]`, `for i, image in enumerate(images):`:
    a loop reads the list."""
    if (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in ITERATION_WRAPPERS
        and use in parent.args
    ):
        return _iterated_by(module, module.parent(parent), parent)
    return isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension) and parent.iter is use


def _next_binding_line(module: Module, assignment: ast.Assign, name: str) -> float:
    """The line where a later statement of the same block binds `name` again (the uses after it
    belong to that binding, not to this one); infinity when none does."""
    parent = module.parent(assignment)
    block = next(
        (
            body
            for field in ("body", "orelse", "finalbody")
            if isinstance(body := getattr(parent, field, None), list) and assignment in body
        ),
        None,
    )
    if block is None:
        return float("inf")
    for statement in block[block.index(assignment) + 1 :]:
        if not isinstance(statement, ast.Assign) or not any(_rebinds(t, name) for t in statement.targets):
            continue
        # `image = image.resize(...)` reads this binding before replacing it: it is a use, not an end.
        if not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(statement.value)):
            return statement.lineno
    return float("inf")


def _rebinds(target: ast.expr, name: str) -> bool:
    """`name = ...`, `name, other = ...`: not `name[k] = ...`, which stores into the same object."""
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, ast.Starred):
        return _rebinds(target.value, name)
    if isinstance(target, ast.Tuple | ast.List):
        return any(_rebinds(e, name) for e in target.elts)
    return False


MATCHERS: dict[str, Any] = {
    "python-objects-copy-on-read": python_objects_copy_on_read,
    "unbounded-cache-in-dataset": unbounded_cache_in_dataset,
    "caching-closure": caching_closure,
    "batches-kept-alive": batches_kept_alive,
    "lazy-image-handle": lazy_image_handle,
}

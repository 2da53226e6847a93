"""Who reads a dataset in a file, and with how many worker processes.

A dataset reaches worker processes only through a reader that starts them. Three readers are
known: a DataLoader (its `num_workers`), a Hugging Face Trainer (`train_dataset=` and
`eval_dataset=`, read with `args.dataloader_num_workers`, default 0), and a loader factory of the
file (`create_dataloader(ds, opt)`) whose branch the call's literal arguments choose. Each reader
either certainly starts no workers or may start some; what the code does not pin down is the
latter, so an unknown worker count never silences a rule. `Module.read_only_without_workers` is
the one question the rules ask of these readers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from datalint.lint.module import LOADER_POSITIONAL, UNKNOWN, ClassInfo, _is_number
from datalint.records import record

if TYPE_CHECKING:
    from datalint.lint.module import LoaderCall, Module
    from datalint.lint.project import TrainerNames

_MAX_PATHS = 32  # a factory with more branches than this is unknown
_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)


@record
class DatasetReader:
    """A call that reads the samples of the dataset handed to it."""

    node: ast.Call  # the DataLoader, the Trainer or the factory call
    dataset: ast.expr  # the dataset as written in the call
    workers_zero: bool  # True only when it certainly starts no worker processes


def dataset_readers(module: Module) -> tuple[DatasetReader, ...]:
    """Every reader of the file: its DataLoader calls, Trainer calls and calls of its loader factories."""
    found = [
        DatasetReader(loader.node, dataset, loader.workers_known_zero)
        for loader in module.loader_calls
        if (dataset := loader.arg("dataset").node) is not None
    ]
    found += _trainer_readers(module)
    found += _factory_readers(module)
    return tuple(found)


# ---- Hugging Face Trainer -------------------------------------------------------------------------


def _trainer_readers(module: Module) -> Iterator[DatasetReader]:
    from datalint.lint.project import known_trainers

    names = known_trainers()
    tops = {name.partition(".")[0] for name in names.trainers}
    if not any(target.partition(".")[0] in tops for target in module.imports.values()):
        return  # the cheap test first: no file that never imports them builds a Trainer
    for call in module.calls:
        if not _is_trainer(module, call, names):
            continue
        zero = _trainer_workers_zero(module, call, names)
        for keyword in call.keywords:
            if keyword.arg in names.dataset_keywords:
                for dataset in _datasets_in(keyword.value):
                    yield DatasetReader(call, dataset, zero)


def _is_trainer(module: Module, call: ast.Call, names: TrainerNames) -> bool:
    """A known Trainer, or an in-file subclass that builds no loader of its own."""
    if module.qualname(call.func) in names.trainers:
        return True
    info = module.resolve_class(call.func)
    if info is None:
        return False
    chain: tuple[ClassInfo, ...] = (info, *module.base_classes(info))
    if any(method in c.methods for c in chain for method in names.loader_methods):
        return False
    return any(module.qualname(base) in names.trainers for c in chain for base in c.bases)


def _datasets_in(value: ast.expr) -> list[ast.expr]:
    """`eval_dataset={"a": ds_a, "b": ds_b}` hands each value; anything else is one dataset."""
    if isinstance(value, ast.Dict):
        return [v for v in value.values if v is not None]
    return [value]


def _trainer_workers_zero(module: Module, call: ast.Call, names: TrainerNames) -> bool:
    """Whether the Trainer's arguments certainly leave `dataloader_num_workers` at 0."""
    if any(k.arg is None for k in call.keywords):
        return False  # `**kwargs` may carry `args`
    args = next((k.value for k in call.keywords if k.arg == "args"), None)
    if args is None and len(call.args) > 1:
        args = call.args[1]  # Trainer(model, args, ...)
    if args is None or (isinstance(args, ast.Constant) and args.value is None):
        return not _workers_set_elsewhere(module, names)  # the Trainer builds default arguments
    built = module.resolve(args)
    if not isinstance(built, ast.Call) or module.qualname(built.func) not in names.arguments:
        return False  # a parser's dataclasses, a config: unknown
    if len(built.args) > 1 or any(k.arg is None for k in built.keywords):
        return False
    if _workers_set_elsewhere(module, names):
        return False
    given = next((k.value for k in built.keywords if k.arg == names.workers_field), None)
    if given is None:
        return True  # TrainingArguments' default
    value = module.literal(given)
    if value is UNKNOWN and isinstance(given, ast.Name):
        value = module.agreed_literal(given)
    return value is not UNKNOWN and _is_number(value) and value == 0


def _workers_set_elsewhere(module: Module, names: TrainerNames) -> bool:
    """`args.dataloader_num_workers = 4` or `args.set_dataloader(num_workers=4)` anywhere in the
    file: which arguments object it changes is not followed, so any such change makes all unknown."""
    for node in module.nodes_of(ast.Attribute):
        if node.attr == names.workers_field and not isinstance(node.ctx, ast.Load):
            return True
        if node.attr == "set_dataloader":
            return True
    return any(isinstance(call.func, ast.Name) and call.func.id == "setattr" for call in module.calls)


# ---- loader factories -----------------------------------------------------------------------------


@record
class _Passed:
    """A factory's parameter: its name, and what the caller's argument evaluates to."""

    parameter: str
    value: Any


def _factory_readers(module: Module) -> Iterator[DatasetReader]:
    """`create_dataloader(val_set, {"phase": "val"})` of a top-level function of the file that
    builds its loader with `num_workers=0` on the branch the call's literal arguments choose."""
    loaders = {loader.node: loader for loader in module.loader_calls}
    factories = {
        f.name: f
        for f in module.tree.body
        if isinstance(f, ast.FunctionDef) and any(n in loaders for n in ast.walk(f))
    }
    if not factories:
        return
    for call in module.calls:
        if not isinstance(call.func, ast.Name):
            continue
        function = factories.get(call.func.id)
        if function is None or module.binding(call.func) is not function:
            continue
        env = _bind_arguments(module, function, call)
        if env is None:
            continue
        reads = _factory_reads(module, function, env, loaders)
        for parameter, zero in (reads or {}).items():
            dataset = env[parameter]
            if isinstance(dataset, _Passed) and isinstance(
                node := _argument(function, call, parameter), ast.expr
            ):
                yield DatasetReader(call, node, zero and _only_handed_to_loaders(function, parameter))


def _bind_arguments(module: Module, function: ast.FunctionDef, call: ast.Call) -> dict[str, Any] | None:
    """The factory's parameters, each bound to what the call passes (UNKNOWN where it passes
    nothing the code pins down); None for `*args` / `**kwargs` on either side."""
    spec = function.args
    if spec.vararg or spec.kwarg or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if any(k.arg is None for k in call.keywords):
        return None
    env: dict[str, Any] = {}
    for parameter in (*spec.posonlyargs, *spec.args, *spec.kwonlyargs):
        node = _argument(function, call, parameter.arg)
        value = _caller_value(module, node) if node is not None else _default(function, parameter.arg)
        env[parameter.arg] = _Passed(parameter.arg, value)
    return env


def _argument(function: ast.FunctionDef, call: ast.Call, parameter: str) -> ast.expr | None:
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if parameter in positional and positional.index(parameter) < len(call.args):
        return call.args[positional.index(parameter)]
    return next((k.value for k in call.keywords if k.arg == parameter), None)


def _default(function: ast.FunctionDef, parameter: str) -> Any:
    spec = function.args
    positional = [a.arg for a in (*spec.posonlyargs, *spec.args)]
    defaults: dict[str, ast.expr | None] = dict(
        zip(positional[len(positional) - len(spec.defaults) :], spec.defaults, strict=True)
    )
    defaults.update(zip((a.arg for a in spec.kwonlyargs), spec.kw_defaults, strict=True))
    default = defaults.get(parameter)
    return _constant(default) if default is not None else UNKNOWN


def _caller_value(module: Module, node: ast.expr) -> Any:
    """What the caller passes: a literal, or a dict literal (`{"phase": "val"}`, `dict(phase=...)`)
    whose values are literals or UNKNOWN; else UNKNOWN."""
    resolved = module.resolve(node)
    if isinstance(resolved, ast.expr) and (mapping := _mapping(resolved)) is not None:
        return {key: _caller_value(module, value) for key, value in mapping.items()}
    return module.literal(node)


def _mapping(node: ast.expr) -> Mapping[str, ast.expr] | None:
    if isinstance(node, ast.Dict) and all(
        isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys
    ):
        return {
            str(k.value): v
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant)
        }
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
        and all(k.arg is not None for k in node.keywords)
    ):
        return {k.arg: k.value for k in node.keywords if k.arg is not None}
    return None


def _constant(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _factory_reads(
    module: Module, function: ast.FunctionDef, env: dict[str, Any], loaders: Mapping[ast.Call, LoaderCall]
) -> dict[str, bool] | None:
    """For each parameter a loader of the factory reads, on the paths the arguments allow: whether
    every such loader has no workers. A branch the arguments do not decide is followed both ways;
    None when the paths are too many to follow."""
    reads: dict[str, bool] = {}
    walker = _Walker(loaders, reads)
    if walker.block(function.body, [env]) is None:
        return None
    return reads


class _Walker:
    """Runs a factory's statements over the environments of the paths that reach them."""

    def __init__(self, loaders: Mapping[ast.Call, LoaderCall], reads: dict[str, bool]) -> None:
        self.loaders = loaders
        self.reads = reads
        self.paths = 1

    def block(self, statements: list[ast.stmt], envs: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """The environments that fall through `statements` (a `return` or `raise` ends its path)."""
        for statement in statements:
            after: list[dict[str, Any]] = []
            for env in envs:
                result = self.statement(statement, env)
                if result is None:
                    return None
                after.extend(result)
            envs = after
        return envs

    def statement(self, statement: ast.stmt, env: dict[str, Any]) -> list[dict[str, Any]] | None:
        if isinstance(statement, ast.If):
            return self._branch(statement, env)
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return [{**env, statement.name: UNKNOWN}]
        if isinstance(statement, _COMPOUND):
            # A loop, `with` or `try` is not run statement by statement: what it assigns is unknown,
            # in its loaders and after it.
            env = {**env, **{name: UNKNOWN for name in _assigned(statement)}}
            self._read_loaders(statement, env)
            return [env]
        self._read_loaders(statement, env)
        if isinstance(statement, ast.Return | ast.Raise):
            return []
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            return [{**env, statement.targets[0].id: _evaluate(statement.value, env)}]
        return [{**env, **{name: UNKNOWN for name in _assigned(statement)}}]

    def _branch(self, statement: ast.If, env: dict[str, Any]) -> list[dict[str, Any]] | None:
        self._read_loaders_in(statement.test, env)
        truth = _truth(statement.test, env)
        if truth is not None:
            return self.block(statement.body if truth else statement.orelse, [env])
        self.paths += 1
        if self.paths > _MAX_PATHS:
            return None
        body = self.block(statement.body, [env])
        orelse = self.block(statement.orelse, [env])
        return None if body is None or orelse is None else body + orelse

    def _read_loaders(self, statement: ast.stmt, env: dict[str, Any]) -> None:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and node in self.loaders:
                self._read(self.loaders[node], env)

    def _read_loaders_in(self, expr: ast.expr, env: dict[str, Any]) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and node in self.loaders:
                self._read(self.loaders[node], env)

    def _read(self, loader: LoaderCall, env: dict[str, Any]) -> None:
        """Note which parameter `loader` reads and whether it has workers, on this path."""
        arguments = _loader_arguments(loader.node, env)
        dataset = arguments.get("dataset", UNKNOWN) if arguments is not None else UNKNOWN
        if isinstance(dataset, _Passed):
            workers = arguments.get("num_workers", 0) if arguments is not None else UNKNOWN
            workers = workers.value if isinstance(workers, _Passed) else workers
            zero = loader.signature_known and workers is not UNKNOWN and _is_number(workers) and workers == 0
            self.reads[dataset.parameter] = self.reads.get(dataset.parameter, True) and zero
            return
        # A loader of something built from a parameter (`DataLoader(Wrap(ds))`): workers unknown.
        for name in _names(loader.node):
            value = env.get(name)
            if isinstance(value, _Passed):
                self.reads[value.parameter] = False


def _loader_arguments(call: ast.Call, env: dict[str, Any]) -> dict[str, Any] | None:
    """The loader's arguments as evaluated on this path; None when a `**spread` is not a known dict."""
    found: dict[str, Any] = {}
    for position, node in enumerate(call.args):
        if isinstance(node, ast.Starred) or position >= len(LOADER_POSITIONAL):
            return None
        found[LOADER_POSITIONAL[position]] = _evaluate(node, env)
    for keyword in call.keywords:
        if keyword.arg is not None:
            found[keyword.arg] = _evaluate(keyword.value, env)
            continue
        spread = _evaluate(keyword.value, env)
        if not isinstance(spread, dict):
            return None
        found.update(spread)
    return found


def _evaluate(node: ast.expr, env: dict[str, Any]) -> Any:
    """A value on this path: a literal, a dict of values, a `_Passed` parameter, or UNKNOWN."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, UNKNOWN)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        container = _unwrap(_evaluate(node.value, env))
        if isinstance(container, dict):
            return container.get(node.slice.value, UNKNOWN)
        return UNKNOWN
    mapping = _mapping(node)
    if mapping is not None:
        return {key: _evaluate(value, env) for key, value in mapping.items()}
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_unwrap(_evaluate(e, env)) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
    return UNKNOWN


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, _Passed) else value


def _truth(test: ast.expr, env: dict[str, Any]) -> bool | None:
    """`phase == "train"`, `phase in ["val", "test"]`, `not ...`, `a and b`: True, False or None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, env)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_truth(v, env) for v in test.values]
        decisive = isinstance(test.op, ast.Or)
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left = _unwrap(_evaluate(test.left, env))
    right = _unwrap(_evaluate(test.comparators[0], env))
    if left is UNKNOWN or right is UNKNOWN or isinstance(left, dict) or isinstance(right, dict):
        return None
    op = test.ops[0]
    try:
        if isinstance(op, ast.Eq | ast.NotEq):
            return (left == right) == isinstance(op, ast.Eq)
        if isinstance(op, ast.In | ast.NotIn) and isinstance(right, tuple | str):
            return (left in right) == isinstance(op, ast.In)
    except TypeError:
        return None
    return None


def _assigned(statement: ast.stmt) -> set[str]:
    return {
        node.id
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)
    }


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _only_handed_to_loaders(function: ast.FunctionDef, parameter: str) -> bool:
    """Every read of the dataset parameter goes to a loader: a loader argument, or the value of a
    `dict(dataset=...)` / `{"dataset": ...}` of loader arguments. A factory that also stores it, or
    hands it to another call, may let it reach workers some other way."""
    for node in ast.walk(function):
        if not (isinstance(node, ast.Name) and node.id == parameter and isinstance(node.ctx, ast.Load)):
            continue
        if not _handed_as_dataset(function, node):
            return False
    return True


def _handed_as_dataset(function: ast.FunctionDef, name: ast.Name) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            keyword = any(k.value is name and k.arg == "dataset" for k in node.keywords)
            first = bool(node.args) and node.args[0] is name and _last(node.func) == "DataLoader"
            if keyword or first:
                return True
        if isinstance(node, ast.Dict) and any(
            v is name and isinstance(k, ast.Constant) and k.value == "dataset"
            for k, v in zip(node.keys, node.values, strict=True)
        ):
            return True
    return False


def _last(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""

"""Matchers for the randomness and epoch rules (DL4xx): silent repeats, stale state, shared splits."""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterator, Sequence
from typing import Any

from datalint.lint.matchers.common import (
    SelfAssignment,
    dotted,
    is_self_attribute,
    self_assignments,
    unwrap_iterable,
    walk_scope,
    worker_classes,
)
from datalint.lint.module import UNKNOWN, ClassInfo, LoaderCall, Match, Module, Related, canonical

LOOPS = (ast.For, ast.AsyncFor, ast.While)
# Arithmetic a seed expression may use and still be a constant (`BASE + 1`, `SEED * 2`).
CONSTANT_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
}

# ---- DL401 rng-created-in-init -------------------------------------------------------------------


def rng_created_in_init(
    module: Module,
    *,
    rng_constructors: Sequence[str] = (),
    reseed_names: Sequence[str] = (),
    reseed_methods: Sequence[str] = (),
) -> Iterator[Match]:
    """`self.rng = default_rng(...)` in `__init__`, drawn from in worker code, never reseeded per worker.

    The evidence of a reseed is scoped to the generator: a new generator or a reseed of
    `self.<attr>` in the class, a call handing `self.<attr>` a per-worker seed, or a
    `worker_init_fn` touching `<attr>` on a loader that may read this class. A worker_init_fn of
    another class's loader, or `get_worker_info()` read for sharding, reseeds nothing here.
    """
    for info in worker_classes(module):
        if module.read_only_without_workers(info) or _unknown_worker_init(module, info):
            continue
        assignments = self_assignments(module, info)
        for assignment in assignments:
            if assignment.method.name != "__init__" or assignment.value is None:
                continue
            if not _creates_rng(module, assignment.value, rng_constructors):
                continue
            attr = assignment.attr
            if _reseeded(module, info, attr, assignments, reseed_names, reseed_methods):
                continue
            if _drawn_in_workers(module, info, attr):
                yield Match(assignment.statement, {"attr": attr})


def _creates_rng(module: Module, value: ast.expr, constructors: Sequence[str]) -> bool:
    """`default_rng(0)`, `torch.Generator().manual_seed(0)`, or a local name bound to one."""
    resolved = module.resolve(value)
    while isinstance(resolved, ast.Call):
        if module.qualname(resolved.func) in constructors:
            return True
        if not isinstance(resolved.func, ast.Attribute) or not isinstance(resolved.func.value, ast.Call):
            return False
        resolved = resolved.func.value
    return False


def _reseeded(
    module: Module,
    info: ClassInfo,
    attr: str,
    assignments: list[SelfAssignment],
    reseed_names: Sequence[str],
    reseed_methods: Sequence[str],
) -> bool:
    """Recreated or reseeded outside `__init__`, a per-worker seed read by workers, or a worker_init_fn."""
    if any(a.attr == attr and a.method.name != "__init__" for a in assignments):
        return True
    for owner in (info, *module.base_classes(info)):
        for method in owner.methods.values():
            if method.name == "__init__":
                continue
            if any(_reseeds(node, attr, reseed_methods) for node in walk_scope(method)):
                return True
            if module.in_worker_code(method) and _hands_worker_seed(method, attr, reseed_names):
                return True
    return any(_touches_attr(hook, attr) for hook in _worker_init_functions(module, info))


def _reseeds(node: ast.AST, attr: str, reseed_methods: Sequence[str]) -> bool:
    """`self.rng.seed(...)`, `self.gen.manual_seed(...)`, `self.rng.bit_generator.state = ...`."""
    if isinstance(node, ast.Attribute) and node.attr in reseed_methods:
        return is_self_attribute(node.value, attr)
    return False


def _mentions(node: ast.AST, names: Sequence[str] | set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr in names
    return False


def _hands_worker_seed(method: ast.AST, attr: str, reseed_names: Sequence[str]) -> bool:
    """A call in `method` that is given `self.<attr>` and a per-worker seed (`reseed(self.rng,
    info.seed)`), the seed read directly or through locals assigned from it earlier."""
    seeded: set[str] = set()
    nodes = sorted(
        (n for n in walk_scope(method) if isinstance(n, ast.Assign | ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in nodes:
        if isinstance(node, ast.Assign):
            if _mentions_any(node.value, reseed_names, seeded):
                seeded |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            continue
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if any(is_self_attribute(a, attr) for a in arguments) and any(
            _mentions_any(a, reseed_names, seeded) for a in arguments
        ):
            return True
    return False


def _mentions_any(expr: ast.AST, names: Sequence[str], seeded: set[str]) -> bool:
    return any(_mentions(n, names) or _mentions(n, seeded) for n in ast.walk(expr))


def _touches_attr(function: ast.AST, attr: str) -> bool:
    return any(isinstance(node, ast.Attribute) and node.attr == attr for node in ast.walk(function))


def _worker_init_functions(module: Module, info: ClassInfo | None = None) -> list[ast.AST]:
    """The in-file functions and lambdas passed as `worker_init_fn` (of loaders that may read `info`)."""
    found: list[ast.AST] = []
    for loader in _loaders_reading(module, info):
        node = loader.arg("worker_init_fn").node
        if node is not None:
            resolved = module.resolve(node)
            if isinstance(resolved, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                found.append(resolved)
    return found


def _loaders_reading(module: Module, info: ClassInfo | None) -> list[LoaderCall]:
    """The file's loaders whose dataset is `info`, or a dataset the linter cannot place (a parameter,
    a wrapper from a library): not those that read another class of this file."""
    if info is None:
        return list(module.loader_calls)
    found = []
    for loader in module.loader_calls:
        dataset = module.loader_dataset_class(loader)
        if dataset is None or any(c.node is info.node for c in (dataset, *module.base_classes(dataset))):
            found.append(loader)
    return found


def _unknown_worker_init(module: Module, info: ClassInfo) -> bool:
    """A worker_init_fn the linter cannot read (imported, built by a call), on a loader that may
    read `info`, may reseed anything."""
    for loader in _loaders_reading(module, info):
        arg = loader.arg("worker_init_fn")
        if arg.is_unknown and arg.node is not None:
            resolved = module.resolve(arg.node)
            if not isinstance(resolved, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return True
    return False


def _drawn_in_workers(module: Module, info: ClassInfo, attr: str) -> bool:
    for owner in (info, *module.base_classes(info)):
        for method in owner.methods.values():
            if module.in_worker_code(method) and any(
                isinstance(node, ast.Attribute)
                and is_self_attribute(node, attr)
                and isinstance(node.ctx, ast.Load)
                for node in walk_scope(method)
            ):
                return True
    return False


# ---- DL402 constant-worker-seed ------------------------------------------------------------------

SEED_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Mod, ast.FloorDiv, ast.Pow)
SAME_EVERY_EPOCH = "every worker draws the same numbers, every epoch"
PER_WORKER_EFFECT = (
    "each worker's seed differs but is the same every epoch (workers restart each epoch, and this base "
    "does not change with it): every epoch repeats the same random draws"
)
CONSTANT_ADVICE = "derive the seed from `torch.utils.data.get_worker_info().seed` (or `torch.initial_seed()`)"
EPOCH_ADVICE = (
    "seed from `torch.initial_seed() % 2**32` or `torch.utils.data.get_worker_info().seed`, which change "
    "with the worker and the epoch (seed the loader's `generator=` for reproducible runs)"
)


def constant_worker_seed(
    module: Module, *, seed_calls: Sequence[str] = (), worker_init_names: Sequence[str] = ()
) -> Iterator[Match]:
    """A seed call with a constant argument in a worker_init_fn or in code the workers run."""
    if not module.has_data_code:
        return
    seen: set[ast.AST] = set()
    for function, where, effect in _seeded_functions(module, worker_init_names):
        hook = effect == SAME_EVERY_EPOCH
        per_worker: list[tuple[ast.Call, str]] = []
        for call in walk_scope(function) if not isinstance(function, ast.Lambda) else ast.walk(function):
            if not isinstance(call, ast.Call) or call in seen:
                continue
            seed = _constant_seed(module, call, seed_calls)
            if seed is not None:
                seen.add(call)
                fields = {"call": f"`{module.segment(call.func)}`", "seed": f"the constant {seed}"}
                yield Match(call, fields | {"where": where, "effect": effect, "advice": CONSTANT_ADVICE})
            elif hook and (fixed := _fixed_per_worker_seed(module, function, call, seed_calls)):
                seen.add(call)
                per_worker.append((call, fixed))
        if per_worker:
            # One finding per hook: its seed calls share one base and one fix.
            first, fixed = min(per_worker, key=lambda pair: (pair[0].lineno, pair[0].col_offset))
            more = f" (and {len(per_worker) - 1} more seed calls of the hook)" if len(per_worker) > 1 else ""
            fields = {"call": f"`{module.segment(first.func)}`{more}", "seed": f"`{fixed}`", "where": where}
            yield Match(first, fields | {"effect": PER_WORKER_EFFECT, "advice": EPOCH_ADVICE})


def _seeded_functions(module: Module, worker_init_names: Sequence[str]) -> Iterator[tuple[Any, str, str]]:
    """(function, where, effect) for worker_init_fns and for the functions workers run."""
    hooks: dict[int, Any] = {id(f): f for f in _worker_init_functions(module)}
    for function in module.functions:
        if function.name in worker_init_names and module.enclosing_class(function) is None:
            hooks[id(function)] = function
    for hook in hooks.values():
        name = hook.name if not isinstance(hook, ast.Lambda) else "lambda"
        yield hook, f"the worker_init_fn `{name}`", SAME_EVERY_EPOCH
    for worker in module.worker_functions:
        if worker.node not in set(hooks.values()):
            yield worker.node, f"`{worker.reason}`", "every sample gets the same random draw"


def _constant_seed(module: Module, call: ast.Call, seed_calls: Sequence[str]) -> str | None:
    """The constant seed of `np.random.seed(42)`, `random.Random(SEED)`, `Generator().manual_seed(0)`."""
    qualified = module.qualname(call.func)
    is_seed = qualified in seed_calls or _seeds_new_generator(module, call, seed_calls)
    if not is_seed:
        return None
    argument = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "seed"), None)
    if argument is None:
        return None  # no seed: drawn from OS entropy
    value = _constant(module, argument)
    return None if value is UNKNOWN or value is None else repr(value)


def _fixed_per_worker_seed(
    module: Module, hook: Any, call: ast.Call, seed_calls: Sequence[str]
) -> str | None:
    """`np.random.seed(42 + worker_id)` in a worker_init_fn: the worker id over a base fixed when the
    loader was built (a constant, or a parameter of the hook that `partial` binds), else None."""
    qualified = module.qualname(call.func)
    if not (qualified in seed_calls or _seeds_new_generator(module, call, seed_calls)) or not call.args:
        return None
    positional = [*hook.args.posonlyargs, *hook.args.args]
    if not positional:
        return None
    worker_id = positional[0].arg
    bases = {a.arg for a in (*positional[1:], *hook.args.kwonlyargs) if "epoch" not in a.arg.lower()}
    seed = call.args[0]
    if isinstance(seed, ast.Name) and isinstance(bound := module.binding(seed), ast.expr):
        seed = bound  # `seed = 42 + worker_id` first
    found = list(_seed_leaves(seed))
    leaves = [leaf for leaf in found if leaf is not None]
    if len(leaves) < len(found):
        return None  # a call, a subscript: the linter cannot say what the seed is
    ids = [leaf for leaf in leaves if _is_worker_id(module, leaf, worker_id)]
    fixed = all(
        _is_worker_id(module, leaf, worker_id)
        or (isinstance(leaf, ast.Name) and leaf.id in bases)
        or _constant(module, leaf) is not UNKNOWN
        for leaf in leaves
    )
    return module.segment(seed) if ids and fixed else None


def _seed_leaves(node: ast.expr) -> Iterator[ast.expr | None]:
    """The operands of a seed's arithmetic (`base + worker_id * 10`); None for anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, SEED_OPERATORS):
        yield from _seed_leaves(node.left)
        yield from _seed_leaves(node.right)
    elif isinstance(node, ast.Name | ast.Constant | ast.Attribute):
        yield node
    else:
        yield None


def _is_worker_id(module: Module, node: ast.expr, worker_id: str) -> bool:
    """The hook's worker id parameter, or `.id` of `get_worker_info()`."""
    if isinstance(node, ast.Name):
        return node.id == worker_id
    if isinstance(node, ast.Attribute) and node.attr == "id":
        info = module.resolve(node.value)
        return isinstance(info, ast.Call) and module.qualname(info.func) == "torch.utils.data.get_worker_info"
    return False


def _seeds_new_generator(module: Module, call: ast.Call, seed_calls: Sequence[str]) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in {"manual_seed", "seed"}
        and isinstance(func.value, ast.Call)
        and (module.qualname(func.value.func) or "").rpartition(".")[2]
        in {"Generator", "RandomState", "Random"}
    )


def _constant(module: Module, node: ast.expr) -> Any:
    """A number the code pins down (literals, module constants, arithmetic on them), else UNKNOWN."""
    if isinstance(node, ast.BinOp):
        left, right = _constant(module, node.left), _constant(module, node.right)
        apply = CONSTANT_OPERATORS.get(type(node.op))
        if left is UNKNOWN or right is UNKNOWN or apply is None:
            return UNKNOWN
        try:
            return apply(left, right)
        except ArithmeticError:
            return UNKNOWN
    value = module.literal(node)
    if value is UNKNOWN or isinstance(value, bool) or not isinstance(value, int | float):
        return UNKNOWN
    return value


# ---- DL403 missing-set-epoch ---------------------------------------------------------------------


def missing_set_epoch(
    module: Module, *, samplers: Sequence[str] = (), iteration_wrappers: Sequence[str] = ()
) -> Iterator[Match]:
    """A shuffling DistributedSampler whose loader runs in an epoch loop, and no set_epoch for it.

    The evidence is scoped to the sampler: `set_epoch` on its name (or on `<loader>.sampler`) where
    that name can be this sampler (the same function, or the same class for `self.x`), or any other
    mention of `set_epoch` in the sampler's own function. A fix in another function fixes that one.
    """
    # A training script that only calls a project's loader builders need not import torch itself.
    yield from _returned_loaders_without_epoch(module, samplers, iteration_wrappers)
    if not module.has_data_code:
        return
    built = [c for c in module.calls if module.qualname(c.func) in samplers]
    shuffling = [c for c in built if _shuffles(module, c)]
    for call in shuffling:
        names = _bound_names(module, call)
        loaders = [loader for loader in module.loader_calls if _uses_sampler(module, loader, call, names)]
        others = _other_receivers(module, call, built, loaders)
        for loader in loaders:
            loader_names = _bound_names(module, loader.node)
            if _sets_epoch_of(module, call, names, loader_names, others):
                break
            if _iterated_in_epoch_loop(module, loader.node, loader_names, names, iteration_wrappers):
                yield Match(
                    call, {"sampler": next(iter(sorted(names)), f"{_loader_label(loader_names)}.sampler")}
                )
                break


def _returned_loaders_without_epoch(
    module: Module, samplers: Sequence[str], wrappers: Sequence[str]
) -> Iterator[Match]:
    """`loader = make_loader(...)` of another project file, whose loader has a shuffling sampler
    that function never tells the epoch, iterated here in an epoch loop with no `set_epoch`:
    reported at the call, where the fix goes, the sampler named as related location."""
    if module.project is None:
        return
    iterated = _iterated_in_loops(module)
    if not iterated:
        return
    for call in module.calls:
        if not isinstance(call.func, ast.Name | ast.Attribute):
            continue
        loader_names = _bound_names(module, call)
        if not loader_names & iterated:
            continue  # only a name some loop inside another loop iterates can be an epoch's loader
        fact = module.sampler_return(call)
        if fact is None:
            continue
        link, sampler, shuffles = fact
        if not shuffles or canonical(sampler) not in {canonical(s) for s in samplers}:
            continue
        if _sets_epoch_of(module, call, set(), loader_names, set()):
            continue
        if _iterated_in_epoch_loop(module, call, loader_names, set(), wrappers):
            label = f"{_loader_label(loader_names)}.sampler"
            note = f"`{link.name}` builds the loader's shuffling `{sampler.rpartition('.')[2]}` here"
            yield Match(call, {"sampler": label}, related=(Related(link.path, link.line, note),))


def _loader_label(names: set[str]) -> str:
    return next(iter(sorted(names)), "loader")


def _other_receivers(
    module: Module, sampler: ast.Call, samplers: list[ast.Call], loaders: list[LoaderCall]
) -> set[str]:
    """Names of the other samplers and loaders bound beside this sampler (same function, or same
    class for `self.x`): a `set_epoch` on one of them is evidence for that one, not for this."""
    others: set[str] = set()
    for call in samplers:
        if call is not sampler:
            others |= {n for n in _bound_names(module, call) if _beside(module, call, sampler)}
    mine = {id(loader.node) for loader in loaders}
    for loader in module.loader_calls:
        if id(loader.node) in mine or not _beside(module, loader.node, sampler):
            continue
        for name in _bound_names(module, loader.node):
            others |= {name, f"{name}.sampler", f"{name}.batch_sampler"}
    return others


def _beside(module: Module, node: ast.AST, origin: ast.AST) -> bool:
    home = module.enclosing_function(origin)
    if home is not None and module.enclosing_function(node) is home:
        return True
    owner = module.enclosing_class(origin)
    return owner is not None and module.enclosing_class(node) is owner


def _sets_epoch_of(
    module: Module, sampler: ast.Call, names: set[str], loader_names: set[str], others: set[str]
) -> bool:
    """Whether `set_epoch` reaches this sampler: on its own name, or mentioned in its function
    other than on another sampler or loader bound there."""
    receivers = names | {f"{n}.{a}" for n in loader_names for a in ("sampler", "batch_sampler")}
    home = module.enclosing_function(sampler)
    for node in module.nodes_of(ast.Attribute, ast.Name, ast.FunctionDef, ast.Constant):
        text = getattr(node, "attr", None) or getattr(node, "id", None) or getattr(node, "name", None)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        if text != "set_epoch":
            continue
        receiver = dotted(node.value) if isinstance(node, ast.Attribute) else None
        if receiver is not None and receiver in receivers and same_owner(module, node.value, sampler):
            return True
        # A helper, a hook or getattr(..., "set_epoch") in the sampler's own function: assume handled.
        if (
            receiver not in receivers
            and receiver not in others
            and module.enclosing_function(node) is home
            and home is not None
        ):
            return True
        if home is None and receiver is None:
            return True  # module-level code: no narrower scope to hold the evidence to
    return False


def _shuffles(module: Module, call: ast.Call) -> bool:
    shuffle = next((k.value for k in call.keywords if k.arg == "shuffle"), None)
    if shuffle is None and len(call.args) > 3:
        shuffle = call.args[3]
    if shuffle is None:
        return not any(k.arg is None for k in call.keywords)  # default True, unless **kwargs hides it
    return module.literal(shuffle) is True


def _bound_names(module: Module, value: ast.AST) -> set[str]:
    """`x = value` or `self.x = value` -> {"x"} / {"self.x"}."""
    parent = module.parent(value)
    if isinstance(parent, ast.Assign) and parent.value is value:
        return {d for t in parent.targets if (d := dotted(t)) is not None}
    return set()


def _uses_sampler(module: Module, loader: LoaderCall, sampler: ast.Call, names: set[str]) -> bool:
    node = loader.arg("sampler").node
    if node is None:
        return False
    return node is sampler or (dotted(node) in names and same_owner(module, node, sampler))


def same_owner(module: Module, use: ast.AST, origin: ast.AST) -> bool:
    """Whether a name used at `use` can be the one bound at `origin`.

    Names are matched by their text, and every function of a training script tends to call its
    loader `loader`: a plain name must be used in the function that binds it, `self.x` in the
    class that assigns it.
    """
    root: ast.expr = use if isinstance(use, ast.expr) else ast.Constant(None)
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(use, ast.Attribute) and not (isinstance(root, ast.Name) and root.id != "self"):
        return module.enclosing_class(use) is module.enclosing_class(origin)
    if isinstance(use, ast.Attribute):
        use = root  # `loader.sampler`: the plain name `loader` decides, like `loader` itself
    if isinstance(use, ast.Name) and isinstance(use.ctx, ast.Load) and module.binding(use) is origin:
        return True  # e.g. a module-level loader iterated inside a function
    return module.enclosing_function(use) is module.enclosing_function(origin)


def _iterated_in_epoch_loop(
    module: Module,
    loader: ast.AST,
    loader_names: set[str],
    sampler_names: set[str],
    wrappers: Sequence[str],
) -> bool:
    """The loader built (or returned) at `loader` and bound to `loader_names` is iterated in an
    epoch loop of the same function that hands it to no helper (which might set the epoch)."""
    if _rebound(module, loader, loader_names):
        return False
    return any(
        not _handed_to_helper(module, epoch, loader_names | sampler_names, wrappers)
        for epoch in _epoch_loops(module, loader, loader_names)
    )


def _rebound(module: Module, loader: ast.AST, loader_names: set[str]) -> bool:
    """The loader's name is also assigned something else (`loader = accelerator.prepare(loader)`).

    The loop may then iterate a wrapper that sets the epoch itself: what it iterates is unknown.
    """
    for statement in module.nodes_of(ast.Assign):
        if statement.value is loader:
            continue
        targets = [
            n for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name | ast.Attribute)
        ]
        if any(dotted(t) in loader_names and same_owner(module, t, loader) for t in targets):
            return True
    return False


def _crosses_function(module: Module, inner: ast.AST, outer: ast.AST) -> bool:
    for ancestor in module.ancestors(inner):
        if ancestor is outer:
            return False
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return True
    return True


def _handed_to_helper(module: Module, loop: ast.AST, names: set[str], wrappers: Sequence[str]) -> bool:
    """The loader or sampler passed to a call that is not a plain iteration wrapper (it may set the epoch)."""
    for call in walk_scope(loop):
        if not isinstance(call, ast.Call):
            continue
        name = module.qualname(call.func) or dotted(call.func) or ""
        if name in wrappers or name.rpartition(".")[2] in wrappers:
            continue
        arguments = [*call.args, *(k.value for k in call.keywords)]
        if any(dotted(a) in names for a in arguments):
            return True
    return False


# ---- DL404 stale-worker-state --------------------------------------------------------------------


def stale_worker_state(module: Module, *, mutator_prefixes: Sequence[str] = ()) -> Iterator[Match]:
    """Dataset attributes changed inside the epoch loop of a loader with persistent workers."""
    for loader in module.loader_calls:
        persistent = loader.arg("persistent_workers")
        if not (persistent.is_literal and persistent.value is True) or loader.workers_known_zero:
            continue
        loader_names = _bound_names(module, loader.node)
        dataset = loader.arg("dataset").node
        dataset_name = dotted(dataset) if dataset is not None else None
        targets = {f"{name}.dataset" for name in loader_names} | ({dataset_name} if dataset_name else set())
        for epoch in _epoch_loops(module, loader.node, loader_names):
            for node in walk_scope(epoch):
                hit = _changes(node, targets, mutator_prefixes)
                if hit is not None:
                    yield Match(node, {"target": hit, "loader": _loader_label(loader_names)})


def _iterated_in_loops(module: Module) -> set[str]:
    """Names iterated by a loop or comprehension nested in another loop (`for b in tqdm(loader)`,
    or a wrapper bound to a name first): a cheap first cut before asking the project anything."""
    found: set[str] = set()
    for site in module.nodes_of(ast.For, ast.AsyncFor, ast.comprehension):
        if not any(isinstance(a, LOOPS) for a in module.ancestors(site)):
            continue
        iterable, _ = unwrap_iterable(module, site.iter)
        if isinstance(iterable, ast.Name):
            bound = module.resolve(iterable)
            if isinstance(bound, ast.Call) and bound is not iterable:
                iterable, _ = unwrap_iterable(module, bound)
        name = dotted(iterable)
        if name is not None:
            found.add(name)
    return found


def _epoch_loops(module: Module, loader: ast.AST, loader_names: set[str]) -> list[ast.AST]:
    """Loops around an iteration of the loader (`for b in loader`, `[... for b in loader]`), same function."""
    loops: dict[int, ast.AST] = {}
    if not loader_names:
        return []
    for site in module.nodes_of(ast.For, ast.AsyncFor, ast.comprehension):
        iterable, _ = unwrap_iterable(module, site.iter)
        if isinstance(iterable, ast.Name) and iterable.id not in loader_names:
            # `pbar = tqdm(loader)` ... `for batch in pbar`: the wrapper bound to a name first.
            bound = module.resolve(iterable)
            if isinstance(bound, ast.Call) and bound is not iterable:
                iterable, _ = unwrap_iterable(module, bound)
        if dotted(iterable) in loader_names and same_owner(module, iterable, loader):
            epoch = next((a for a in module.ancestors(site) if isinstance(a, LOOPS)), None)
            if epoch is not None and not _crosses_function(module, site, epoch):
                loops[id(epoch)] = epoch
    return list(loops.values())


def _changes(node: ast.AST, targets: set[str], prefixes: Sequence[str]) -> str | None:
    """`ds.epoch = e`, `ds.level += 1`, `loader.dataset.x = ...`, `ds.set_epoch(e)` -> the text changed."""
    if isinstance(node, ast.Assign | ast.AugAssign):
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if isinstance(target, ast.Attribute) and dotted(target.value) in targets:
                return dotted(target)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        mutates = isinstance(func, ast.Attribute) and any(func.attr.startswith(p) for p in prefixes)
        if mutates and isinstance(func, ast.Attribute) and dotted(func.value) in targets:
            return f"{dotted(func)}(...)"
    return None


# ---- DL405 shared-split-transform ----------------------------------------------------------------


def shared_split_transform(
    module: Module, *, splitters: Sequence[str] = (), subsets: Sequence[str] = ()
) -> Iterator[Match]:
    """`split.dataset.attr = ...` where `split` shares its dataset with another split."""
    if not module.has_data_code:
        return
    for scope, groups in _split_groups(module, splitters, subsets).items():
        for names in groups:
            yield from _assignments_through_dataset(module, scope, names)


def _split_groups(
    module: Module, splitters: Sequence[str], subsets: Sequence[str]
) -> dict[ast.AST, list[set[str]]]:
    """Per scope, sets of names that share one underlying dataset."""
    groups: dict[ast.AST, list[set[str]]] = {}
    by_base: dict[tuple[ast.AST, str], set[str]] = {}
    for assign in module.nodes_of(ast.Assign):
        call = assign.value
        if not isinstance(call, ast.Call) or len(assign.targets) != 1:
            continue
        target = assign.targets[0]
        names = (
            {d for e in target.elts if (d := dotted(e))}
            if isinstance(target, ast.Tuple | ast.List)
            else set()
        )
        if not names and (single := dotted(target)) is not None:
            names = {single}
        scope = _split_scope(module, assign, names)
        qualified = module.qualname(call.func)
        if qualified in splitters and len(names) > 1:
            groups.setdefault(scope, []).append(names)
        elif qualified in subsets and len(names) == 1 and call.args:
            base = dotted(call.args[0])
            if base is not None:
                by_base.setdefault((scope, base), set()).update(names)
    for (owner, _), names in by_base.items():
        if len(names) > 1:  # one Subset alone shares its dataset with nobody in this file
            groups.setdefault(owner, []).append(names)
    return groups


def _split_scope(module: Module, assign: ast.Assign, names: set[str]) -> ast.AST:
    """Where the split names live: the class for `self.train_set, self.val_set = ...`, else the function."""
    owner = module.enclosing_class(assign)
    if owner is not None and names and all(n.startswith("self.") for n in names):
        return owner
    return module.enclosing_function(assign) or module.tree


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    if isinstance(scope, ast.ClassDef):
        for method in scope.body:
            if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk_scope(method)
    else:
        yield from walk_scope(scope)


def _assignments_through_dataset(module: Module, scope: ast.AST, names: set[str]) -> Iterator[Match]:
    copied: set[str] = set()
    statements = [n for n in _scope_nodes(scope) if isinstance(n, ast.Assign | ast.AugAssign)]
    for statement in sorted(statements, key=lambda n: (n.lineno, n.col_offset)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr == "dataset"
                and dotted(target.value) in names
            ):
                copied.add(dotted(target.value) or "")  # `val.dataset = copy(...)`: no longer shared
            elif _through_dataset(target, names) and _still_shared(_split_name(target), names, copied):
                yield Match(statement, {"target": dotted(target), "splits": ", ".join(sorted(names))})


def _still_shared(split: str | None, names: set[str], copied: set[str]) -> bool:
    """The split's dataset is still shared: it was not copied, and another split was not either
    (once `val.dataset` is a copy, the original belongs to `train` alone)."""
    return split not in copied and bool(names - copied - {split})


def _through_dataset(target: ast.expr, names: set[str]) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Attribute)
        and target.value.attr == "dataset"
        and dotted(target.value.value) in names
    )


def _split_name(target: ast.expr) -> str | None:
    assert isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
    return dotted(target.value.value)


MATCHERS: dict[str, Any] = {
    "rng-created-in-init": rng_created_in_init,
    "constant-worker-seed": constant_worker_seed,
    "missing-set-epoch": missing_set_epoch,
    "stale-worker-state": stale_worker_state,
    "shared-split-transform": shared_split_transform,
}

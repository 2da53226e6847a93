"""One parsed source file, computed once and queried by every matcher.

`Module` holds the syntax tree and the facts the rules share: the import table
(local name -> qualified name), classes, which classes are Datasets and which of
those are iterable, the DataLoader calls with each argument classified as
literal / unknown / absent, the functions that run inside worker processes, the
start method the code asks for, and the `# noqa` comment of each line.

Everything but the parse and one walk is computed lazily, on first use, so a
file that never imports torch costs little more than `ast.parse` itself.

The guiding rule: when the code does not say for sure, a fact is *unknown*, and
matchers stay silent on unknowns.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from datalint.records import field, record

if TYPE_CHECKING:
    from datalint.lint.noqa import Directives, Noqa
    from datalint.lint.project import ClassRef, DatasetFact, Link, Project
    from datalint.lint.readers import DatasetReader

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
ScopeNode = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
ArgState = Literal["literal", "unknown", "absent"]
# A parsed file's nodes by type, in `ast.walk` order, and each node's parent (`index_tree`).
NodeIndex = tuple[dict[type, list[ast.AST]], dict[ast.AST, ast.AST]]

START_METHODS: tuple[str, ...] = ("fork", "spawn", "forkserver")

# torch.utils.data re-exports these submodules' public names; qualified names are
# reported in the short public form so rule files list one spelling.
# Calls whose result reads the samples of their first argument: `Subset(ds, idx)` one split,
# `random_split(ds, lengths)` a list of them.
SUBSET_CALLS: frozenset[str] = frozenset({"torch.utils.data.Subset"})
SPLIT_CALLS: frozenset[str] = SUBSET_CALLS | {"torch.utils.data.random_split"}

CANONICAL_MODULES: dict[str, str] = {
    "torch.utils.data.dataloader": "torch.utils.data",
    "torch.utils.data.dataset": "torch.utils.data",
    "torch.utils.data.sampler": "torch.utils.data",
    "torch.utils.data.distributed": "torch.utils.data",
    "torch.utils.data.datapipes.datapipe": "torch.utils.data",
    "torch.utils.data.datapipes": "torch.utils.data",
}

LOADER_CLASSES: frozenset[str] = frozenset({"torch.utils.data.DataLoader"})
# torch's own Dataset bases and their kind; the catalog adds third-party ones
# (`rules/bases/dataset-bases.toml`, read by `datalint.lint.project.known_dataset_bases`).
TORCH_DATASET_BASES: Mapping[str, Literal["map", "iterable"]] = {
    "torch.utils.data.Dataset": "map",
    "torch.utils.data.TensorDataset": "map",
    "torch.utils.data.ConcatDataset": "map",
    "torch.utils.data.Subset": "map",
    "torch.utils.data.StackDataset": "map",
    "torch.utils.data.MapDataPipe": "map",
    "torch.utils.data.IterableDataset": "iterable",
    "torch.utils.data.ChainDataset": "iterable",
    "torch.utils.data.IterDataPipe": "iterable",
}
DATASET_BASES: frozenset[str] = frozenset(TORCH_DATASET_BASES)
ITERABLE_DATASET_BASES: frozenset[str] = frozenset(
    name for name, kind in TORCH_DATASET_BASES.items() if kind == "iterable"
)
DATASET_METHODS: tuple[str, ...] = ("__getitem__", "__getitems__", "__iter__", "__len__")
START_METHOD_CALLS: frozenset[str] = frozenset(
    {
        "multiprocessing.set_start_method",
        "multiprocessing.get_context",
        "torch.multiprocessing.set_start_method",
        "torch.multiprocessing.get_context",
    }
)
PARTIAL_CALLS: frozenset[str] = frozenset({"functools.partial"})
# Lowercase factories that never return None (CapWords callables are assumed to be classes).
NEVER_NONE_CALLS: frozenset[str] = frozenset(
    {"multiprocessing.get_context", "torch.multiprocessing.get_context", "functools.partial"}
)

# DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
#            collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
#            multiprocessing_context=None, generator=None, *, prefetch_factor=None, ...) in torch 2.x
LOADER_POSITIONAL: tuple[str, ...] = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)
LOADER_DEFAULTS: dict[str, Any] = {
    "batch_size": 1,
    "shuffle": None,
    "sampler": None,
    "batch_sampler": None,
    "num_workers": 0,
    "collate_fn": None,
    "pin_memory": False,
    "drop_last": False,
    "timeout": 0,
    "worker_init_fn": None,
    "multiprocessing_context": None,
    "generator": None,
    "prefetch_factor": None,
    "persistent_workers": False,
    "pin_memory_device": "",
    "in_order": True,
}

_BUILTINS = frozenset(dir(builtins))
# A line as the parser counts them: ended by \n, \r\n or \r (not by form feeds, unlike splitlines).
_PARSER_LINE = r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z"  # compiled on first use, not at import


class _Unknown:
    """The value of an argument the code does not pin down."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        raise TypeError("UNKNOWN has no truth value: test `value is UNKNOWN` first")


UNKNOWN: Any = _Unknown()


@record
class Arg:
    """One argument of a call: a literal value, an unknown expression, or absent."""

    name: str
    state: ArgState
    node: ast.expr | None = None  # the expression as written (None when absent or only **kwargs)
    value: Any = UNKNOWN  # the literal value when state == "literal"

    @property
    def is_literal(self) -> bool:
        return self.state == "literal"

    @property
    def is_unknown(self) -> bool:
        return self.state == "unknown"

    @property
    def is_absent(self) -> bool:
        return self.state == "absent"


@record
class ClassInfo:
    """A class defined in the file, with its bases as written and its own methods."""

    node: ast.ClassDef
    name: str
    bases: tuple[ast.expr, ...]
    methods: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef]


def forwards_default_workers(init: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a DataLoader subclass's `__init__` leaves `num_workers` to DataLoader: it takes
    `**kwargs`, hands them on to a call, and never sets `num_workers` (as a parameter, a keyword,
    a name, or the string of `kwargs["num_workers"] = n` / `kwargs.setdefault(...)`). Reading it
    (`kwargs.get("num_workers", 0) > 0`, to decide something else) leaves the default in place."""
    kwargs = init.args.kwarg
    if kwargs is None:
        return False
    reads = _num_workers_reads(init)
    handed_on = False
    for node in ast.walk(init):
        if isinstance(node, ast.arg | ast.keyword) and node.arg == "num_workers":
            return False
        if isinstance(node, ast.Name) and node.id == "num_workers":
            return False
        if isinstance(node, ast.Constant) and node.value == "num_workers" and id(node) not in reads:
            return False
        if isinstance(node, ast.Call) and any(
            k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwargs.arg
            for k in node.keywords
        ):
            handed_on = True
    return handed_on


def _num_workers_reads(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """ids of the "num_workers" strings only read: `kwargs.get("num_workers", 0)`, `kwargs["num_workers"]`."""
    found: set[int] = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            found.add(id(node.args[0]))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            found.add(id(node.slice))
    return found



@record
class LoaderCall:
    """A call of `torch.utils.data.DataLoader` or of an in-file subclass of it."""

    node: ast.Call
    callee: str  # the qualified name, or the in-file subclass's name
    args: Mapping[str, Arg]
    # False for an in-file subclass with its own __init__: its defaults and positions are not DataLoader's.
    signature_known: bool

    def arg(self, name: str) -> Arg:
        """The argument `name`: literal, unknown (`**kwargs`, variables, `*args`), or absent."""
        found = self.args.get(name)
        if found is not None:
            return found
        return Arg(name, "absent" if self.signature_known else "unknown")

    def effective(self, name: str) -> Any:
        """The literal value, DataLoader's default when absent, or UNKNOWN."""
        arg = self.arg(name)
        if arg.is_literal:
            return arg.value
        if arg.is_absent and name in LOADER_DEFAULTS:
            return LOADER_DEFAULTS[name]
        return UNKNOWN

    @property
    def workers_known_zero(self) -> bool:
        """True only when num_workers is certainly 0 (literal 0, or absent with no **kwargs)."""
        value = self.effective("num_workers")
        return value is not UNKNOWN and _is_number(value) and value == 0

    @property
    def workers_known_positive(self) -> bool:
        value = self.effective("num_workers")
        return value is not UNKNOWN and _is_number(value) and value > 0

    def may_use_workers(self) -> bool:
        """False only when the loader certainly runs in the main process (num_workers known to be 0)."""
        return not self.workers_known_zero


@record
class WorkerFunction:
    """A function that runs in DataLoader worker processes, and why datalint thinks so."""

    node: FunctionNode
    reason: str  # e.g. "MyDataset.__getitem__", "collate_fn of the DataLoader at line 12"
    # The loader whose hook this is (collate_fn / worker_init_fn, and what they call); else None.
    loader: LoaderCall | None = None
    # A Dataset in another file that holds this function's class (a reader, a transform).
    held_by: Link | None = None
    # For a function of this file that a Dataset's worker code in another file calls: the calls
    # leading here, first to last (`Shapes.__getitem__` at sets.py:30 -> `load_image` here).
    chain: tuple[Related, ...] = ()


@record
class StartMethodSite:
    """A place where the code chooses a multiprocessing start method."""

    method: str
    node: ast.AST
    via: str  # "multiprocessing_context", "set_start_method" or "get_context"


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


class Module:
    """One parsed file. Build it with `Module.parse(source, path)`; matchers only read it."""

    def __init__(
        self,
        tree: ast.Module,
        source: str,
        path: str,
        default_start_method: str = "spawn",
        project: Project | None = None,
        index: NodeIndex | None = None,
    ) -> None:
        self.tree = tree
        self.source = source
        self.path = path
        self.default_start_method = default_start_method
        self.lines: list[str] = source.splitlines()
        # `index`: the tree's `index_tree`, when whoever parsed it walked it already.
        self._nodes, self._parents = index if index is not None else index_tree(tree)
        self._qualnames: dict[ast.AST, str | None] = {}
        # The project the file belongs to: cross-file facts come from it; None for a lone text.
        self.project = project
        self.module_name = ""
        self.is_package = False
        self.source_root: Path | None = None
        if project is not None and path != "<string>" and Path(path).is_file():
            _resolved, self.module_name, self.source_root, self.is_package = project.name_of(Path(path))

    @property
    def is_notebook(self) -> bool:
        """The code of a Jupyter notebook's cells: its top level runs in the kernel's `__main__`."""
        return is_notebook(self.path)

    @classmethod
    def parse(
        cls,
        source: str,
        path: str = "<string>",
        default_start_method: str = "spawn",
        project: Project | None = None,
    ) -> Module:
        """Parse `source`; raises SyntaxError (or ValueError for NUL bytes) like `ast.parse`."""
        return cls(parse_source(source, path), source, path, default_start_method, project)

    # ---- raw nodes -------------------------------------------------------------------------

    @property
    def node_index(self) -> NodeIndex:
        """The one walk's result: nodes by type (walk order) and each node's parent."""
        return self._nodes, self._parents

    def nodes_of(self, *types: type[ast.AST]) -> Iterator[Any]:
        """Every node of the given types, in `ast.walk` order per type."""
        for kind in types:
            yield from self._nodes.get(kind, ())

    @property
    def calls(self) -> list[ast.Call]:
        return self._nodes.get(ast.Call, [])  # type: ignore[return-value]

    @property
    def functions(self) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        return [*self._nodes.get(ast.FunctionDef, []), *self._nodes.get(ast.AsyncFunctionDef, [])]  # type: ignore[list-item]

    def segment(self, node: ast.AST) -> str:
        """The source text of `node` (one line, whitespace collapsed), for messages."""
        text = self._source_text(node) or ast.unparse(node)
        return " ".join(text.split())

    @cached_property
    def _parser_lines(self) -> list[bytes]:
        """The source's lines as the parser numbers them, UTF-8 encoded: column offsets count bytes.

        Split once per file: `ast.get_source_segment` re-splits the whole source on every call,
        and matchers ask for many segments while building messages.
        """
        return [line.encode("utf-8") for line in re.findall(_PARSER_LINE, self.source)]

    def _source_text(self, node: ast.AST) -> str | None:
        """What `ast.get_source_segment(source, node)` returns, from the lines split once."""
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        first, last = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if start is None or end is None or first is None or last is None:
            return None
        lines = self._parser_lines[start - 1 : end]
        if len(lines) != end - start + 1:
            return None
        if start == end:
            return lines[0][first:last].decode("utf-8")
        pieces = [lines[0][first:], *lines[1:-1], lines[-1][:last]]
        return b"".join(pieces).decode("utf-8")

    # ---- imports and qualified names ---------------------------------------------------------

    @cached_property
    def imports(self) -> Mapping[str, str]:
        """Local name -> qualified name, from every import in the file (ambiguous names dropped)."""
        table: dict[str, str] = {}
        ambiguous: set[str] = set()
        for node in self.nodes_of(ast.Import, ast.ImportFrom):
            for local, target in _import_bindings(node):
                if table.get(local, target) != target:
                    ambiguous.add(local)
                table[local] = target
        for local in ambiguous:
            del table[local]
        return table

    @cached_property
    def imports_torch(self) -> bool:
        """Whether anything in the file is imported from torch (no torch, no loaders, no Datasets)."""
        return any(target == "torch" or target.startswith("torch.") for target in self.imports.values())

    @cached_property
    def bound_names(self) -> frozenset[str]:
        """Every name the file binds anywhere (so a builtin shadowed by it is not the builtin)."""
        names = {n.id for n in self.nodes_of(ast.Name) if not isinstance(n.ctx, ast.Load)}
        names.update(n.name for n in self.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        names.update(a.arg for a in self.nodes_of(ast.arg))
        names.update(self.imports)
        return frozenset(names)

    def qualname(self, node: ast.AST) -> str | None:
        """`tud.DataLoader` -> "torch.utils.data.DataLoader"; `open` -> "open"; else None.

        Resolves Name / Attribute chains whose root is an imported name, or an unshadowed
        builtin. Submodules of torch.utils.data are reported in their public short form.
        """
        # Many rules ask about the same call nodes; the answer is cached per node.
        try:
            return self._qualnames[node]
        except KeyError:
            qualified = self._qualnames[node] = self._resolve_qualname(node)
            return qualified

    def _resolve_qualname(self, node: ast.AST) -> str | None:
        name = dotted(node)
        if name is None:
            return None
        head, dot, rest = name.partition(".")
        root = self.imports.get(head)
        if root is None:
            if head not in _BUILTINS or head in self.bound_names:
                return None
            root = head
        return canonical(root + dot + rest)

    def call_qualname(self, call: ast.Call) -> str | None:
        return self.qualname(call.func)

    # ---- structure: parents, scopes, bindings -------------------------------------------------

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self._parents.get(node)

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        """Parents of `node`, nearest first, up to the module."""
        current = self._parents.get(node)
        while current is not None:
            yield current
            current = self._parents.get(current)

    def enclosing_function(self, node: ast.AST) -> FunctionNode | None:
        """The nearest def / async def / lambda around `node` (not `node` itself)."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return ancestor
        return None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        """The nearest class around `node` (not `node` itself)."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, ast.ClassDef):
                return ancestor
        return None

    def is_main_guarded(self, node: ast.AST) -> bool:
        """Whether `node` sits under `if __name__ == "__main__":`."""
        return any(isinstance(a, ast.If) and _is_main_guard(a.test) for a in self.ancestors(node))

    def scope_of(self, node: ast.AST) -> ScopeNode:
        """The function, lambda, class or module whose body holds `node` (not `node` itself)."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, _SCOPES):
                return ancestor
        return self.tree

    @cached_property
    def _binding_sites(self) -> dict[str, list[ast.AST]]:
        """Every node that binds a name, by name (their scopes are found only when asked)."""
        sites: dict[str, list[ast.AST]] = defaultdict(list)
        for name in self.nodes_of(ast.Name):
            if not isinstance(name.ctx, ast.Load) and not _is_bare_annotation(self.parent(name), name):
                sites[name.id].append(name)
        for arg in self.nodes_of(ast.arg):
            sites[arg.arg].append(arg)
        for definition in self.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            sites[definition.name].append(definition)
        for alias in self.nodes_of(ast.alias):
            if alias.name != "*":
                sites[alias.asname or alias.name.partition(".")[0]].append(alias)
        for node in self.nodes_of(ast.ExceptHandler, ast.MatchAs, ast.MatchStar):
            if node.name:
                sites[node.name].append(node)
        for node in self.nodes_of(ast.MatchMapping):
            if node.rest:
                sites[node.rest].append(node)
        return sites

    @cached_property
    def _declared_outside(self) -> dict[ast.AST, set[str]]:
        """Per scope, the names its `global` / `nonlocal` statements hand to another scope."""
        declared: dict[ast.AST, set[str]] = defaultdict(set)
        for statement in self.nodes_of(ast.Global, ast.Nonlocal):
            declared[self.scope_of(statement)].update(statement.names)
        return declared

    def binding(self, name: ast.Name) -> ast.AST | None:
        """What the name refers to, when exactly one statement binds it in its scope.

        Returns the assigned expression for `x = expr`, the def/class node for
        `def x` / `class x`, else None (several bindings, parameters, loops,
        imports, `global`: the value is unknown).
        """
        sites = self._binding_sites.get(name.id)
        if not sites:
            return None
        by_scope: dict[ast.AST, list[ast.AST]] = defaultdict(list)
        for site in sites:
            by_scope[self.scope_of(site)].append(site)
        declared = self._declared_outside
        scope: ast.AST = self.scope_of(name)
        while True:
            if name.id in declared.get(scope, ()):
                return None
            found = by_scope.get(scope)
            if found:
                return self._bound_value(found[0]) if len(found) == 1 else None
            if scope is self.tree:
                return None
            scope = self.scope_of(scope)
            # Class bodies do not enclose the functions defined in them.
            while isinstance(scope, ast.ClassDef):
                scope = self.scope_of(scope)

    def assigned_values(self, name: ast.Name) -> list[ast.expr]:
        """The values of every `name = value` in the nearest scope that binds the name (if/else
        branches, reassignments); [] when any binding there is something else (a loop, a parameter)."""
        bound = self.binding(name)
        if isinstance(bound, ast.expr):
            return [bound]
        sites = self._binding_sites.get(name.id)
        if not sites:
            return []
        scope = self.scope_of(name)
        mine = [site for site in sites if self.scope_of(site) is scope]
        if not mine or name.id in self._declared_outside.get(scope, ()):
            return []
        values = [self._bound_value(site) for site in mine]
        return (
            [v for v in values if isinstance(v, ast.expr)]
            if all(isinstance(v, ast.expr) for v in values)
            else []
        )

    def _bound_value(self, site: ast.AST) -> ast.AST | None:
        """`expr` for `x = expr` / `x: T = expr`; the def or class; None for opaque bindings."""
        if isinstance(site, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return site
        parent = self.parent(site)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.targets[0] is site:
            return parent.value
        if isinstance(parent, ast.AnnAssign) and parent.target is site:
            return parent.value
        return None  # a loop target, a parameter, an import, tuple unpacking, a walrus...

    def split_source(self, node: ast.expr) -> ast.AST:
        """What `node` resolves to, looking through `Subset(ds, ...)` and `random_split(ds, ...)`
        (`train, val = random_split(ds, ...)`, `splits[0]`): a split reads `ds`'s samples, and
        pickles `ds` with everything it holds, transforms included, to start workers."""
        resolved: ast.AST = self.resolve(node)
        for _ in range(4):
            split: ast.AST | None = None
            if isinstance(resolved, ast.Subscript):
                split = self.resolve(resolved.value)
            elif isinstance(resolved, ast.Name):
                split = self._unpacked_from(resolved)
            elif isinstance(resolved, ast.Call) and self._is_split(resolved, SUBSET_CALLS):
                split = resolved
            if not (isinstance(split, ast.Call) and self._is_split(split, SPLIT_CALLS) and split.args):
                return resolved
            if isinstance(split.args[0], ast.Starred):
                return resolved
            resolved = self.resolve(split.args[0])
        return resolved

    def _is_split(self, call: ast.Call, names: frozenset[str]) -> bool:
        qualified = self.qualname(call.func)
        return qualified is not None and canonical(qualified) in names

    def _unpacked_from(self, name: ast.Name) -> ast.AST | None:
        """`value` for a name bound once in its scope by `a, b = value`; else None."""
        scope = self.scope_of(name)
        sites = [site for site in self._binding_sites.get(name.id, ()) if self.scope_of(site) is scope]
        if len(sites) != 1:
            return None
        target = self.parent(sites[0])
        assign = self.parent(target) if isinstance(target, ast.Tuple | ast.List) else None
        if isinstance(assign, ast.Assign) and len(assign.targets) == 1 and assign.targets[0] is target:
            return assign.value
        return None

    def resolve(self, node: ast.expr, depth: int = 0) -> ast.AST:
        """Follow a name to its sole binding (`x = expr` -> expr), repeatedly; else the node itself."""
        while isinstance(node, ast.Name) and depth < 8:
            bound = self.binding(node)
            if not isinstance(bound, ast.expr):
                return bound if bound is not None else node
            node, depth = bound, depth + 1
        return node

    def literal(self, node: ast.expr) -> Any:
        """The literal value of `node` (directly, or through a sole `NAME = literal`), else UNKNOWN."""
        resolved = self.resolve(node)
        if not isinstance(resolved, ast.expr):
            return UNKNOWN
        try:
            return ast.literal_eval(resolved)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return UNKNOWN

    def agreed_literal(self, name: ast.Name) -> Any:
        """The literal every `name = literal` of the name's scope binds, when they all agree (`workers
        = 0` on each branch, or set again to 0 later); UNKNOWN when one differs or is no literal."""
        values = self.assigned_values(name)
        found: list[Any] = []
        for value in values:
            try:
                found.append(ast.literal_eval(value))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return UNKNOWN
        if not found or any(type(v) is not type(found[0]) or v != found[0] for v in found):
            return UNKNOWN
        return found[0]

    def definitely_not_none(self, node: ast.expr) -> bool:
        """True when `node` cannot evaluate to None (a literal, a container, a class instantiation)."""
        resolved = self.resolve(node)
        if isinstance(resolved, ast.Constant):
            return resolved.value is not None
        if isinstance(resolved, ast.IfExp):
            return self.definitely_not_none(resolved.body) and self.definitely_not_none(resolved.orelse)
        if isinstance(resolved, ast.Call):
            return self._is_instantiation(resolved)
        return isinstance(resolved, _NEVER_NONE)

    def _is_instantiation(self, call: ast.Call) -> bool:
        if self.resolve_class(call.func) is not None:
            return True
        qualified = self.qualname(call.func)
        if qualified in NEVER_NONE_CALLS:
            return True
        name = qualified or dotted(call.func)
        last = (name or "").rpartition(".")[2]
        # CapWords callables are classes by convention: constructors never return None.
        return bool(last) and last[0].isupper() and not last.isupper()

    # ---- classes ---------------------------------------------------------------------------

    @cached_property
    def classes(self) -> tuple[ClassInfo, ...]:
        """Every class defined in the file, in walk order."""
        return tuple(_class_info(node) for node in self.nodes_of(ast.ClassDef))

    @cached_property
    def _classes_by_name(self) -> dict[str, ClassInfo | None]:
        table: dict[str, ClassInfo | None] = {}
        for info in self.classes:
            table[info.name] = None if info.name in table else info  # two classes, one name: ambiguous
        return table

    def class_named(self, name: str) -> ClassInfo | None:
        return self._classes_by_name.get(name)

    @cached_property
    def _classes_by_node(self) -> dict[ast.ClassDef, ClassInfo]:
        return {info.node: info for info in self.classes}

    def class_of(self, node: ast.ClassDef) -> ClassInfo:
        return self._classes_by_node[node]

    def resolve_class(self, node: ast.expr) -> ClassInfo | None:
        """The in-file class an expression names (`MyDataset`, or a name bound to it), else None."""
        if isinstance(node, ast.Subscript):  # Dataset[int]
            node = node.value
        # The cheap test first: most called names are not classes of this file.
        if not isinstance(node, ast.Name) or node.id not in self._classes_by_name:
            return None
        bound = self.binding(node)
        return self.class_of(bound) if isinstance(bound, ast.ClassDef) else None

    def base_classes(self, info: ClassInfo) -> Iterator[ClassInfo]:
        """In-file ancestors of `info`, depth first (cycles and repeats skipped)."""
        seen = {info.name}
        stack = list(info.bases)
        while stack:
            base = self.resolve_class(stack.pop(0))
            if base is None or base.name in seen:
                continue
            seen.add(base.name)
            yield base
            stack.extend(base.bases)

    def method(self, info: ClassInfo, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """`name` defined on the class or inherited from an in-file base."""
        for candidate in (info, *self.base_classes(info)):
            if name in candidate.methods:
                return candidate.methods[name]
        return None

    def attribute_assignments(self, info: ClassInfo) -> Mapping[str, tuple[tuple[ast.expr, ast.stmt], ...]]:
        """`{"x": ((value, statement), ...)}` for `self.x = v`, `self.x: T = v`, `self.x[k] = v`
        in the class's own methods (nested functions included), in source order. Cached per class:
        use it instead of walking the methods again for every call you look at."""
        cached = self._attribute_assignments.get(info.node)
        if cached is None:
            cached = self._attribute_assignments[info.node] = _attribute_assignments(info)
        return cached

    @cached_property
    def _attribute_assignments(
        self,
    ) -> dict[ast.ClassDef, Mapping[str, tuple[tuple[ast.expr, ast.stmt], ...]]]:
        return {}

    def _external_bases(self, info: ClassInfo) -> set[str]:
        """Qualified names of the non-local bases of `info` and of its in-file ancestors."""
        names: set[str] = set()
        for candidate in (info, *self.base_classes(info)):
            for base in candidate.bases:
                qualified = self.qualname(base.value if isinstance(base, ast.Subscript) else base)
                if qualified is not None:
                    names.add(qualified)
        return names

    @cached_property
    def loader_classes(self) -> tuple[ClassInfo, ...]:
        """In-file subclasses of DataLoader (directly or through other in-file classes)."""
        if not self.imports_torch and self.project is None:
            return ()
        return tuple(
            c
            for c in self.classes
            if self._external_bases(c) & LOADER_CLASSES
            or any(self._project_loader(base) is not None for base in self._external_bases(c))
        )

    @cached_property
    def _imported_project_loaders(self) -> frozenset[str]:
        """Local names of DataLoader subclasses imported from other project files."""
        return frozenset(
            local for local, target in self.imports.items() if self._project_loader(target) is not None
        )

    def _project_loader(self, qualified: str) -> bool | None:
        """For a class of another project file: None unless it derives from DataLoader; else
        whether it keeps DataLoader's signature (see `Project.loader_fact`)."""
        absolute = self._other_project_class(qualified)
        if absolute is None or self.project is None or self.source_root is None:
            return None
        return self.project.loader_fact(absolute, self.source_root)

    def _project_loader_default_workers(self, qualified: str) -> bool:
        """A loader class of another project file leaves `num_workers` to DataLoader's default."""
        absolute = self._other_project_class(qualified)
        if absolute is None or self.project is None or self.source_root is None:
            return False
        return self.project.loader_default_workers(absolute, self.source_root)

    def _other_project_class(self, qualified: str) -> str | None:
        """The absolute name of a class `qualified` names in another project file, else None."""
        if self.project is None or self.source_root is None or canonical(qualified) in LOADER_CLASSES:
            return None
        if qualified.startswith("."):
            from datalint.lint.project import absolute_module

            level = len(qualified) - len(qualified.lstrip("."))
            package = (
                absolute_module(self.module_name, self.is_package, level, None) if self.module_name else None
            )
            if package is None:
                return None
            rest = qualified[level:]
            qualified = f"{package}.{rest}" if package else rest
        if self.module_name and qualified.startswith(self.qualified_prefix):
            return None  # a class of this file: the in-file analysis covers it
        return qualified

    @cached_property
    def dataset_classes(self) -> tuple[ClassInfo, ...]:
        """Classes that are Datasets: by their bases, or because the file passes one to a DataLoader.

        This is the one "is a Dataset" answer every rule uses. A base counts when it resolves,
        through in-file classes, the project's other files (any depth, re-exports, aliases) or
        the catalog's known third-party bases, to a torch Dataset; an unresolvable base does not.
        """
        # By its bases, or (a class with none) read by a loader of another file (`_dataset_by_use`).
        by_base = [c for c in self.classes if self.dataset_fact(c) is not None]
        passed = [c for c in (self._loader_dataset_class(call) for call in self.loader_calls) if c]
        unique = {id(c.node): c for c in (*by_base, *passed)}
        return tuple(unique.values())

    def is_dataset(self, info: ClassInfo) -> bool:
        return any(info.node is c.node for c in self.dataset_classes)

    def is_iterable_dataset(self, info: ClassInfo) -> bool:
        """True when the class derives (any depth of classes, across files) from an IterableDataset."""
        fact = self.dataset_fact(info)
        return fact is not None and fact.is_iterable

    def loaders_of(self, info: ClassInfo) -> tuple[LoaderCall, ...]:
        """The file's DataLoader calls whose dataset is an instance of `info`."""
        return tuple(
            loader
            for loader in self.loader_calls
            if (dataset := self._loader_dataset_class(loader)) is not None and dataset.node is info.node
        )

    @cached_property
    def dataset_readers(self) -> tuple[DatasetReader, ...]:
        """The calls that read a dataset's samples, each with whether it certainly starts no workers:
        DataLoaders, Hugging Face Trainers and the file's loader factories (`datalint.lint.readers`)."""
        from datalint.lint.readers import dataset_readers

        return dataset_readers(self)

    def readers_of(self, info: ClassInfo) -> tuple[DatasetReader, ...]:
        """The file's readers whose dataset is an instance of `info` (directly, via a name or a split)."""
        return tuple(
            reader
            for reader in self.dataset_readers
            if (read := self._read_class(reader.dataset)) is not None and read.node is info.node
        )

    def _read_class(self, dataset: ast.expr) -> ClassInfo | None:
        resolved = self.split_source(dataset)
        return self.resolve_class(resolved.func) if isinstance(resolved, ast.Call) else None

    def read_only_without_workers(self, info: ClassInfo) -> bool:
        """The one "does the reader that reaches this have workers" answer for a Dataset class.

        True when the file hands `info` to readers (DataLoaders, Trainers, loader factories: see
        `dataset_readers`) and every one certainly starts no workers (`num_workers=0`, a Trainer's
        default `dataloader_num_workers`, a factory's branch without workers): then nothing is
        pickled and nothing crosses a process boundary. No reader in the file, or one with unknown
        workers, is False: each rule documents what it does on that unknown. So is a class that
        another file of the project imports by name (or whose module it imports whole): the file's
        own readers, often a smoke run under `__main__`, are not all its readers.
        """
        readers = self.readers_of(info)
        if readers:
            return all(reader.workers_zero for reader in readers) and not self._named_elsewhere(info)
        return self._used_only_in_process(info)

    def _named_elsewhere(self, info: ClassInfo) -> bool:
        if self.project is None:
            return False  # one file alone: its loaders are all there is
        names = self.project.import_names(Path(self.path))
        return any(self.project.is_named(f"{name}.{info.name}", name) for name in names)

    def _used_only_in_process(self, info: ClassInfo) -> bool:
        """The file builds `info` and only iterates, indexes or measures the objects itself, and no
        other linted file of the project imports the class: no loader ever receives it.

        A data-preparation script that walks its own Dataset with `for x in tqdm(ds)` is the case.
        """
        constructions = self._constructions.get(info.node, [])
        if not constructions or (self.project is not None and self._imported_elsewhere(info)):
            return False
        if all(self._in_process_use(call) for call in constructions):
            return True
        # A test module's own Dataset, handed to the helpers under test (`split(ds, 0.5)`,
        # `ds.limit(10)`), stays in the test's process when the module starts no loader that may
        # have workers: what the tests check is the helpers, iterated in-process.
        return self.is_test_module and all(loader.workers_known_zero for loader in self.loader_calls)

    @cached_property
    def _constructions(self) -> dict[ast.ClassDef, list[ast.Call]]:
        """The calls that build each in-file class, found in one pass over the calls (asked per
        class, a pass each cost classes x calls: 19 of 20 s on a 2.5 MB file of 208 classes)."""
        found: dict[ast.ClassDef, list[ast.Call]] = defaultdict(list)
        for call in self.calls:
            info = self.resolve_class(call.func)
            if info is not None:
                found[info.node].append(call)
        return found

    @cached_property
    def is_test_module(self) -> bool:
        """`test_x.py`, `x_test.py`, `conftest.py`, or a file under a `tests`/`test` folder."""
        path = Path(self.path).resolve() if self.source_root is not None else Path(self.path)
        name = path.name
        # Folders inside the project only: a checkout kept under `~/test/` holds no test modules.
        folders = path.parent.parts[-1:]
        if self.source_root is not None and path.is_relative_to(self.source_root):
            folders = path.parent.relative_to(self.source_root).parts
        in_test_folder = any(part in {"tests", "test"} for part in folders)
        test_name = name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
        return in_test_folder or test_name

    def _imported_elsewhere(self, info: ClassInfo) -> bool:
        assert self.project is not None
        if not self.module_name:
            return True  # not importable: other files may reach it in ways not followed
        return self.project.is_imported(self.qualified_prefix + info.name, self.module_name)

    def constructed_for_this_process(self, construction: ast.Call) -> bool:
        """No loader reads this constructed object: it is only iterated, indexed or measured here."""
        return not self._read_by_a_loader(construction) and self._in_process_use(construction)

    def _read_by_a_loader(self, construction: ast.Call) -> bool:
        for loader in self.loader_calls:
            node = loader.arg("dataset").node
            if node is not None and self.split_source(node) is construction:
                return True
        return False

    def _in_process_use(self, construction: ast.Call, depth: int = 0) -> bool:
        if self._iterated_in_process(construction) or self._wrapped_in_process(construction, depth):
            return True
        inside = {id(n) for n in ast.walk(construction)}  # `ds = Wrap(ds)`: the wrapped name
        uses = [use for use in self.uses_of_assigned(construction) if id(use) not in inside]
        return bool(uses) and all(
            self._iterated_in_process(use) or self._inspected(use) or self._wrapped_in_process(use, depth)
            for use in uses
        )

    def _wrapped_in_process(self, use: ast.expr, depth: int) -> bool:
        """`MapDataset(ds, f)`: handed to another Dataset's constructor, whose object in turn stays
        in this process (no loader of the file reads it, and it is only iterated or measured)."""
        wrapper = self.parent(use)
        if depth >= 3 or not isinstance(wrapper, ast.Call) or wrapper.func is use:
            return False
        if not self.constructs_dataset(wrapper) or self._read_by_a_loader(wrapper):
            return False
        return self._in_process_use(wrapper, depth + 1)

    def constructs_dataset(self, call: ast.Call) -> bool:
        """`Parts(...)`: a call building an instance of a Dataset class (of this file, the project or the
        catalog's known bases)."""
        info = self.resolve_class(call.func)
        if info is not None:
            return self.is_dataset(info)
        return self._external_dataset_fact(call.func) is not None

    def uses_of_assigned(self, value: ast.expr) -> list[ast.Name]:
        """Where the value of `name = value` is read, in the assignment's own scope; empty when
        the value is not assigned to one plain name."""
        parent = self.parent(value)
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
            return []
        target = parent.targets[0]
        if not isinstance(target, ast.Name):
            return []
        scope = self.scope_of(parent)
        return [
            n
            for n in self.nodes_of(ast.Name)
            if n.id == target.id and isinstance(n.ctx, ast.Load) and self.scope_of(n) is scope
        ]

    def _iterated_in_process(self, node: ast.expr) -> bool:
        """`for x in node`, `for x in tqdm(node)` / `enumerate(node)`, `iter(node)`, `list(node)`."""
        current: ast.AST = node
        parent = self.parent(current)
        while isinstance(parent, ast.Call) and current in parent.args and isinstance(parent.func, ast.Name):
            if parent.func.id not in _IN_PROCESS_WRAPPERS:
                return False
            current, parent = parent, self.parent(parent)
            if current is not node and cast_name(current) in {"iter", "list", "next", "sorted"}:
                return True
        return isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension) and parent.iter is current

    def _inspected(self, name: ast.Name) -> bool:
        """`len(ds)`, `ds[i]`, `ds.attr`, `print(ds)`: the object stays in this process."""
        parent = self.parent(name)
        if isinstance(parent, ast.Subscript) and parent.value is name:
            return True
        if isinstance(parent, ast.Attribute) and parent.value is name:
            # `ds.method(...)` and `ds.size == 3` stay here; `f(ds.inner)` hands a part on.
            above = self.parent(parent)
            if isinstance(above, ast.keyword):
                return False
            return not (isinstance(above, ast.Call) and above.func is not parent)
        if not isinstance(parent, ast.Call):
            return False
        if isinstance(parent.func, ast.Attribute):
            return parent.func.attr.startswith("assert")  # a test's `self.assertIsInstance(ds, ...)`
        return isinstance(parent.func, ast.Name) and parent.func.id in {
            "len", "print", "repr", "str", "type", "isinstance"
        }

    @property
    def has_data_code(self) -> bool:
        """Whether the file may hold data-loading code: it imports torch, or defines a Dataset."""
        return self.imports_torch or bool(self.dataset_classes) or bool(self._held_classes)

    def dataset_fact(self, info: ClassInfo) -> DatasetFact | None:
        """Why `info` is a Dataset by its bases (kind, deciding base, chain in other files), else None."""
        if info.node in self._dataset_facts:
            return self._dataset_facts[info.node]
        self._dataset_facts[info.node] = None  # cycle guard
        found: DatasetFact | None = None
        for candidate in (info, *self.base_classes(info)):
            for base in candidate.bases:
                expr = base.value if isinstance(base, ast.Subscript) else base
                if self.resolve_class(expr) is not None:
                    continue  # an in-file base: its own bases are visited in turn
                fact = self._external_dataset_fact(expr)
                if fact is not None and (found is None or (fact.is_iterable and not found.is_iterable)):
                    found = fact
        if found is None:
            found = self._dataset_by_use(info)
        self._dataset_facts[info.node] = found
        return found

    def _dataset_by_use(self, info: ClassInfo) -> DatasetFact | None:
        """A top-level class with no Dataset base that a DataLoader of another project file reads,
        built through builder functions (`build_dataset()`): a dataset all the same."""
        from datalint.lint.project import DatasetFact

        if self.project is None or info.node not in self.tree.body:
            return None
        if any(not (isinstance(b, ast.Name) and b.id == "object") for b in info.bases):
            return None  # a class with bases is what its bases make it
        if not ({"__getitem__", "__iter__"} & set(info.methods)):
            return None
        if not self.project.is_loaded(self.qualified_prefix + info.name):
            return None
        if "__getitem__" in info.methods:
            return DatasetFact("map", "torch.utils.data.Dataset")
        return DatasetFact("iterable", "torch.utils.data.IterableDataset")

    @cached_property
    def _dataset_facts(self) -> dict[ast.ClassDef, DatasetFact | None]:
        return {}

    def absolute_qualname(self, node: ast.AST) -> str | None:
        """`qualname`, with relative imports (`from .base import X`) made absolute where possible."""
        qualified = self.qualname(node)
        if qualified is None or not qualified.startswith("."):
            return qualified
        from datalint.lint.project import absolute_module

        level = len(qualified) - len(qualified.lstrip("."))
        rest = qualified[level:]
        package = (
            absolute_module(self.module_name, self.is_package, level, None) if self.module_name else None
        )
        if package is None:
            return None
        return f"{package}.{rest}" if package else rest

    def project_bases_of(self, info: ClassInfo) -> tuple[ClassRef, ...]:
        """The classes of other project files that `info` (or an in-file ancestor) derives from,
        through any depth, nearest first; empty without a project."""
        if self.project is None or self.source_root is None:
            return ()
        found: list[ClassRef] = []
        for candidate in (info, *self.base_classes(info)):
            for base in candidate.bases:
                expr = base.value if isinstance(base, ast.Subscript) else base
                qualified = None if self.resolve_class(expr) is not None else self.absolute_qualname(expr)
                if qualified:
                    found.extend(
                        ref
                        for ref in self.project.project_bases(qualified, self.source_root)
                        if ref not in found
                    )
        return tuple(found)

    def _external_dataset_fact(self, expr: ast.expr) -> DatasetFact | None:
        from datalint.lint.project import DatasetFact, known_dataset_bases

        qualified = self.absolute_qualname(expr)
        if qualified is None:
            return None
        qualified = canonical(qualified)
        known = known_dataset_bases()
        if qualified in known:
            return DatasetFact(known[qualified], qualified)
        if self.project is None or self.source_root is None:
            return None
        return self.project.dataset_fact(qualified, self.source_root)

    def related_for(self, node: ast.AST) -> tuple[Related, ...]:
        """Places in other files that a finding at `node` rests on: the base that makes its class a
        Dataset, or the Dataset that holds the class whose method runs in workers."""
        found: list[Related] = []
        owner = node if isinstance(node, ast.ClassDef) else self.enclosing_class(node)
        if owner is not None and owner in self._classes_by_node:
            info = self.class_of(owner)
            fact = self.dataset_fact(info)
            if fact is not None and fact.chain:
                link = fact.chain[0]
                message = f"`{info.name}` is a Dataset through `{link.name}` (from `{fact.base}`)"
                found.append(Related(link.path, link.line, message))
        worker = self.worker_function_of(node) if self._worker_nodes else None
        if worker is not None and worker.chain:
            found.extend(worker.chain)
        elif worker is not None and worker.held_by is not None:
            link = worker.held_by
            message = f"`{worker.reason}` runs in workers: the Dataset `{link.name}` holds it"
            found.append(Related(link.path, link.line, message))
        elif owner is not None:  # `__init__` of a class whose methods workers run (a transform's RNG)
            held = next((h for info, h in self._held_classes if info.node is owner), None)
            if held is not None:
                message = f"`{owner.name}` runs in workers: the Dataset `{held.link.name}` holds it"
                found.append(Related(held.link.path, held.link.line, message))
        return tuple(found)

    def inherited_method_names(self, info: ClassInfo) -> frozenset[str]:
        """Methods `info` defines or inherits, from in-file bases and project bases in other files."""
        names: set[str] = set()
        for candidate in (info, *self.base_classes(info)):
            names.update(candidate.methods)
            if self.project is None or self.source_root is None:
                continue
            for base in candidate.bases:
                expr = base.value if isinstance(base, ast.Subscript) else base
                if self.resolve_class(expr) is None and (qualified := self.absolute_qualname(expr)):
                    names |= self.project.method_names(qualified, self.source_root)
        return frozenset(names)

    def unpicklable_return(self, call: ast.Call) -> tuple[Link, str] | None:
        """For `factory()` of a function in another project file: where it is, and the unpicklable
        callable it returns ("a lambda", "the nested function `f`"); None when unknown or fine."""
        qualified = self._elsewhere_in_project(call)
        if qualified is None or self.project is None or self.source_root is None:
            return None
        return self.project.unpicklable_return(qualified, self.source_root)

    def list_return(self, call: ast.Call) -> Link | None:
        """For `helper(...)` of a function in another project file that returns a list it fills from
        what it reads: where that function is; None when unknown or not such a function."""
        qualified = self._elsewhere_in_project(call)
        if qualified is None or self.project is None or self.source_root is None:
            return None
        return self.project.list_return(qualified, self.source_root)

    def tuple_list_return(self, call: ast.Call) -> tuple[Link, tuple[int, ...]] | None:
        """For `a, b = helper(...)` of a function in another project file returning a tuple: where it
        is and the positions that hold lists it builds from what it reads; None when unknown."""
        qualified = self._elsewhere_in_project(call)
        if qualified is None or self.project is None or self.source_root is None:
            return None
        return self.project.tuple_list_return(qualified, self.source_root)

    def sampler_return(self, call: ast.Call) -> tuple[Link, str, bool] | None:
        """For `make_loader(...)` of a function in another project file that returns a loader with
        `sampler=Sampler(...)` (itself or through the factories it returns): where the sampler is
        built, its qualified name and whether it shuffles."""
        qualified = self._elsewhere_in_project(call)
        if qualified is None or self.project is None or self.source_root is None:
            return None
        return self.project.sampler_return(qualified, self.source_root)

    def dataset_forward(
        self, call: ast.Call
    ) -> tuple[Link, tuple[str, ...], tuple[tuple[str, str, str], ...]] | None:
        """For `make_dataset(...)` of a function in another project file that hands its parameters
        to a Dataset constructor: where it is, its positional parameters and what it hands on."""
        qualified = self._elsewhere_in_project(call)
        if qualified is None or self.project is None or self.source_root is None:
            return None
        return self.project.dataset_forward(qualified, self.source_root)

    def _elsewhere_in_project(self, call: ast.Call) -> str | None:
        """The qualified name `call` calls when the project can say what it is: a function of another
        of its files; None without a project, for an unknown name, or for one defined in this file
        (the file's own analysis covers it)."""
        if self.project is None or self.source_root is None:
            return None
        qualified = self.absolute_qualname(call.func)
        if qualified is None or (qualified.startswith(self.qualified_prefix) and self.module_name):
            return None
        return qualified

    def subclassed_elsewhere(self, info: ClassInfo) -> bool:
        """Whether a class in another linted file of the project derives from `info`."""
        if self.project is None or not self.module_name or self.enclosing_class(info.node) is not None:
            return False
        return self.project.is_subclassed(self.qualified_prefix + info.name)

    @property
    def qualified_prefix(self) -> str:
        return f"{self.module_name}." if self.module_name else ""

    # ---- DataLoader calls ----------------------------------------------------------------------

    @cached_property
    def loader_calls(self) -> tuple[LoaderCall, ...]:
        """Every DataLoader construction in the file, with classified arguments."""
        imported_loaders = self._imported_project_loaders
        if not self.imports_torch and not imported_loaders:
            return ()
        # Only a call whose last name could be a DataLoader is resolved: the cheap test first.
        names = {"DataLoader", *(c.name for c in self.loader_classes), *imported_loaders}
        names.update(local for local, target in self.imports.items() if canonical(target) in LOADER_CLASSES)
        names.update(self._chosen_loader_names(names))
        found = []
        for call in self.calls:
            func = call.func
            last = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if last in names:
                loader = self._as_loader_call(call)
                if loader is not None:
                    found.append(loader)
        return tuple(found)

    def _chosen_loader_names(self, loader_names: set[str]) -> set[str]:
        """Names bound to a conditional choice of loader classes (`DataLoader if x else Infinite`)."""
        chosen: set[str] = set()
        for assign in self.nodes_of(ast.Assign):
            value = assign.value
            if isinstance(value, ast.IfExp) and all(
                _last_name(branch) in loader_names for branch in (value.body, value.orelse)
            ):
                chosen.update(t.id for t in assign.targets if isinstance(t, ast.Name))
        return chosen

    def _loader_class_choice(self, call: ast.Call) -> bool | None:
        """For `cls(...)` with `cls = A if x else B`, both loader classes: whether both take
        DataLoader's own signature (True), not (False); None when it is no such choice."""
        if not isinstance(call.func, ast.Name):
            return None
        chosen = self.resolve(call.func)
        if not isinstance(chosen, ast.IfExp):
            return None
        known = []
        for branch in (chosen.body, chosen.orelse):
            if self.qualname(branch) in LOADER_CLASSES:
                known.append(True)
                continue
            local = self.resolve_class(branch)
            if local is None or not any(local.node is c.node for c in self.loader_classes):
                return None
            known.append(self.method(local, "__init__") is None)
        return all(known)

    def _as_loader_call(self, call: ast.Call) -> LoaderCall | None:
        qualified = self.qualname(call.func)
        if qualified in LOADER_CLASSES:
            return LoaderCall(call, qualified, self._loader_args(call, True), True)
        choice = self._loader_class_choice(call)
        if choice is not None:
            return LoaderCall(call, self.segment(call.func), self._loader_args(call, choice), choice)
        if qualified is not None and self.resolve_class(call.func) is None:
            in_project = self._project_loader(qualified)
            if in_project is not None:
                args = self._loader_args(call, in_project)
                if not in_project and self._project_loader_default_workers(qualified):
                    args.setdefault("num_workers", Arg("num_workers", "absent"))
                return LoaderCall(call, qualified, args, in_project)
        if not self.loader_classes:
            return None
        local = self.resolve_class(call.func)
        if local is None or not any(local.node is c.node for c in self.loader_classes):
            return None
        init = self.method(local, "__init__")
        args = self._loader_args(call, init is None)
        if init is not None and forwards_default_workers(init):
            args.setdefault("num_workers", Arg("num_workers", "absent"))
        return LoaderCall(call, local.name, args, init is None)

    def _loader_args(self, call: ast.Call, signature_known: bool) -> dict[str, Arg]:
        args: dict[str, Arg] = {}
        for position, node in enumerate(call.args):
            if isinstance(node, ast.Starred):
                # `*args` hides every later position.
                for name in LOADER_POSITIONAL[position:]:
                    args.setdefault(name, Arg(name, "unknown"))
                break
            if position < len(LOADER_POSITIONAL):
                name = LOADER_POSITIONAL[position]
                args[name] = self._classify(name, node) if signature_known else Arg(name, "unknown", node)
        spread_unknown = False
        for keyword in call.keywords:
            if keyword.arg is not None:
                args[keyword.arg] = self._classify(keyword.arg, keyword.value)
                continue
            spread = self._spread_literal(keyword.value)
            if spread is None:
                spread_unknown = True
                continue
            for name, value in spread.items():
                args[name] = self._classify(name, value)
        if spread_unknown:
            # `**kwargs` may carry any argument not written out.
            for name in (*LOADER_POSITIONAL, *LOADER_DEFAULTS):
                args.setdefault(name, Arg(name, "unknown"))
        return args

    def _spread_literal(self, node: ast.expr) -> dict[str, ast.expr] | None:
        """`**{"num_workers": 0}`, or `**kwargs` whose sole binding is such a dict (or `dict(a=1)`)
        that its scope never changes: the arguments it spreads; None when they are unknown."""
        value = self.resolve(node)
        if isinstance(value, ast.Dict):
            keys = value.keys
            if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                return None
            items = {
                k.value: v
                for k, v in zip(keys, value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
        elif isinstance(value, ast.Call) and cast_name(value.func) == "dict" and not value.args:
            if any(k.arg is None for k in value.keywords):
                return None
            items = {k.arg: k.value for k in value.keywords if k.arg is not None}
        else:
            return None
        if isinstance(node, ast.Name) and self._changed_in_scope(node):
            return None
        return items

    def _changed_in_scope(self, name: ast.Name) -> bool:
        """`kwargs["x"] = ...`, `kwargs.update(...)` and the like on the name, in its scope."""
        scope = self.scope_of(name)
        for other in self.nodes_of(ast.Name):
            if other.id != name.id or self.scope_of(other) is not scope:
                continue
            parent = self.parent(other)
            if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load):
                return True
            if isinstance(parent, ast.Attribute) and parent.attr in {"update", "setdefault", "pop", "clear"}:
                return True
        return False

    def _classify(self, name: str, node: ast.expr) -> Arg:
        value = self.literal(node)
        if value is UNKNOWN and isinstance(node, ast.Name):
            value = self.agreed_literal(node)
        if value is UNKNOWN:
            return Arg(name, "unknown", node)
        return Arg(name, "literal", node, value)

    def loader_dataset_class(self, loader: LoaderCall) -> ClassInfo | None:
        """The in-file class of the loader's dataset (`DataLoader(MyDS(...))`, or via a variable)."""
        return self._loader_dataset_class(loader)

    def _loader_dataset_class(self, loader: LoaderCall) -> ClassInfo | None:
        node = loader.arg("dataset").node
        if node is None:
            return None
        resolved = self.split_source(node)
        if isinstance(resolved, ast.Call):
            return self.resolve_class(resolved.func)
        return None

    # ---- code that runs in worker processes ---------------------------------------------------------

    @cached_property
    def worker_functions(self) -> tuple[WorkerFunction, ...]:
        """Functions run by DataLoader workers: Dataset methods, what they call, transforms, hooks.

        Seeds: a Dataset's __getitem__/__getitems__/__iter__/__len__; `__call__` of in-file
        classes (and in-file functions, lambdas) stored on the dataset or passed to its
        constructor; functions and lambdas passed as collate_fn / worker_init_fn. Then every
        in-file function or method those call (`helper(x)`, `self.method(x)`), transitively.
        """
        if not (self.imports_torch or self.dataset_classes or self._held_classes or self._held_functions):
            return ()
        found: dict[ast.AST, WorkerFunction] = {}
        queue: list[WorkerFunction] = list(self._worker_seeds())
        while queue:
            item = queue.pop(0)
            if item.node in found and not _reaches_more_workers(item, found[item.node]):
                continue
            found[item.node] = item
            queue.extend(self._called_functions(item))
        return tuple(found.values())

    def in_worker_code(self, node: ast.AST) -> bool:
        """Whether `node` is inside a function that runs in worker processes."""
        reachable = self._worker_nodes
        if not reachable:
            return False
        if node in reachable:
            return True
        return any(ancestor in reachable for ancestor in self.ancestors(node))

    def worker_function_of(self, node: ast.AST) -> WorkerFunction | None:
        """The innermost worker function containing `node`, if any."""
        by_node = self._worker_by_node
        if not by_node:
            return None
        for ancestor in (node, *self.ancestors(node)):
            if ancestor in by_node:
                return by_node[ancestor]
        return None

    @cached_property
    def _worker_by_node(self) -> dict[ast.AST, WorkerFunction]:
        return {w.node: w for w in self.worker_functions}

    @cached_property
    def _worker_nodes(self) -> frozenset[ast.AST]:
        return frozenset(self._worker_by_node)

    @cached_property
    def _held_classes(self) -> tuple[tuple[ClassInfo, Any], ...]:
        """In-file classes that a Dataset of another linted file holds and calls into."""
        if self.project is None or not self.module_name:
            return ()
        found = []
        for info in self.classes:
            held = self.project.held_by_dataset(self.qualified_prefix + info.name)
            if held is not None and self.enclosing_class(info.node) is None:
                found.append((info, held))
        return tuple(found)

    @cached_property
    def _held_functions(self) -> tuple[tuple[ast.FunctionDef | ast.AsyncFunctionDef, Any], ...]:
        """Top-level functions that the worker code of a Dataset in another linted file calls,
        directly or through other functions (`Project.note_worker_calls`)."""
        if self.project is None or not self.module_name:
            return ()
        found = []
        for statement in self.tree.body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                held = self.project.held_by_dataset(self.qualified_prefix + statement.name)
                if held is not None and held.chain:
                    found.append((statement, held))
        return tuple(found)

    @property
    def classes_indexed_by_datasets(self) -> tuple[tuple[ClassInfo, Related], ...]:
        """In-file classes that a Dataset of another file indexes per sample (`self.reader[index]`
        on what it built, directly or through a project factory), each with that Dataset's place."""
        found = []
        for info, held in self._held_classes:
            if "__getitem__" in held.methods:
                link = held.link
                message = f"`{info.name}` is indexed per sample by the Dataset `{link.name}`"
                found.append((info, Related(link.path, link.line, message)))
        return tuple(found)

    def _worker_seeds(self) -> Iterator[WorkerFunction]:
        for function, held in self._held_functions:
            reason = f"{function.name} (called from {held.holder})"
            chain = _chain_related(held.chain, function.name)
            yield WorkerFunction(function, reason, held_by=held.link, chain=chain)
        for info, held in self._held_classes:
            for name in sorted(held.methods):
                method = self.method(info, name)
                if method is not None:
                    reason = f"{info.name}.{name} (called by {held.holder})"
                    chain = _chain_related(held.chain, f"{info.name}.{name}") if held.chain else ()
                    yield WorkerFunction(method, reason, held_by=held.link, chain=chain)
        for info in self.dataset_classes:
            for name in DATASET_METHODS:
                method = self.method(info, name)
                if method is not None:
                    yield WorkerFunction(method, f"{info.name}.{name}")
            yield from self._hooks_of_bases(info)
            for value in self._stored_values(info):
                yield from self._callables_in(value, f"stored on {info.name}")
        for call in self.calls:
            built = self.resolve_class(call.func)
            if built is not None and self.is_dataset(built):
                for value in (*call.args, *(k.value for k in call.keywords)):
                    yield from self._callables_in(value, f"passed to {built.name}()")
        for loader in self.loader_calls:
            for hook in ("collate_fn", "worker_init_fn"):
                node = loader.arg(hook).node
                if node is not None:
                    where = f"{hook} of the DataLoader at line {loader.node.lineno}"
                    for found in self._callables_in(node, where):
                        yield WorkerFunction(found.node, found.reason, loader=loader)

    def _hooks_of_bases(self, info: ClassInfo) -> Iterator[WorkerFunction]:
        """Methods of `info` that the sample methods of a base in another file call on `self`
        (`BaseDataSet.__getitem__` calling `self._load_data(index)`): they run in the workers."""
        own = {f.name: f for f in info.node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
        for ref in self.project_bases_of(info):
            base = ref.qualname.rpartition(".")[2]
            for attribute, method in ref.summary.calls_on:
                if method == "__call__" and attribute in own and attribute not in DATASET_METHODS:
                    message = f"`{base}`'s sample methods call `self.{attribute}` in DataLoader workers"
                    chain = (Related(str(ref.path), ref.summary.line, message),)
                    reason = f"{info.name}.{attribute} (called by {base})"
                    yield WorkerFunction(own[attribute], reason, chain=chain)

    def _stored_values(self, info: ClassInfo) -> Iterator[ast.expr]:
        """Right-hand sides of `self.x = ...` in the class's methods."""
        for assignments in self.attribute_assignments(info).values():
            for value, _statement in assignments:
                yield value

    def _callables_in(self, expr: ast.expr, reason: str) -> Iterator[WorkerFunction]:
        """Lambdas, in-file functions and in-file callable classes' __call__ in an expression."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Lambda):
                yield WorkerFunction(node, f"lambda {reason}")
            elif isinstance(node, ast.Call) and (info := self.resolve_class(node.func)) is not None:
                call = self.method(info, "__call__") or self.method(info, "forward")
                if call is not None:
                    yield WorkerFunction(call, f"{info.name}.{call.name} ({reason})")
            elif (
                isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and not self._called_here(node)
            ):
                bound = self.binding(node)
                if isinstance(bound, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield WorkerFunction(bound, f"{bound.name} ({reason})")

    def _called_here(self, name: ast.Name) -> bool:
        """`f(...)` in a stored value runs f in the parent (in `__init__`); only `f` itself is stored."""
        parent = self.parent(name)
        return isinstance(parent, ast.Call) and parent.func is name

    def _called_functions(self, caller: WorkerFunction) -> Iterator[WorkerFunction]:
        owner = self.enclosing_class(caller.node)
        owner_info: ClassInfo | None = self.class_of(owner) if owner is not None else None
        for node in ast.walk(caller.node):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name):
                bound = self.binding(func)
                if isinstance(bound, ast.FunctionDef | ast.AsyncFunctionDef):
                    where = f"{bound.name} (called from {caller.reason})"
                    yield WorkerFunction(bound, where, caller.loader, caller.held_by, caller.chain)
            elif owner_info is not None and isinstance(func, ast.Attribute) and _is_self(func.value):
                method = self.method(owner_info, func.attr)
                if method is not None:
                    where = f"{owner_info.name}.{method.name} (called from {caller.reason})"
                    yield WorkerFunction(method, where, caller.loader, caller.held_by, caller.chain)

    # ---- start method -----------------------------------------------------------------------

    @cached_property
    def start_method_sites(self) -> tuple[StartMethodSite, ...]:
        """`multiprocessing_context="spawn"`, `set_start_method("fork")`, `get_context("forkserver")`."""
        sites: list[StartMethodSite] = []
        for loader in self.loader_calls:
            value = loader.arg("multiprocessing_context").value
            if isinstance(value, str):
                sites.append(StartMethodSite(value, loader.node, "multiprocessing_context"))
        for call in self.calls:
            qualified = self.qualname(call.func)
            if qualified not in START_METHOD_CALLS:
                continue
            value = self.literal(_first_argument(call, "method"))
            if isinstance(value, str):
                sites.append(StartMethodSite(value, call, qualified.rpartition(".")[2]))
        return tuple(sites)

    @cached_property
    def start_method(self) -> str | None:
        """The one start method the code asks for, or None (none asked, or several)."""
        methods = {site.method for site in self.start_method_sites if site.method in START_METHODS}
        return methods.pop() if len(methods) == 1 else None

    @property
    def effective_start_method(self) -> str:
        """The code's start method if it names one, else the configured default."""
        return self.start_method or self.default_start_method

    # ---- noqa --------------------------------------------------------------------------------

    @cached_property
    def noqa_directives(self) -> Directives:
        """Every `# noqa` directive of the file, read from its comment tokens."""
        from datalint.lint.noqa import read_directives_parsed  # only files that mention noqa need it

        return read_directives_parsed(self.source, self.tree, self.nodes_of(ast.Constant, ast.JoinedStr))

    def noqa(self, line: int) -> Noqa | None:
        """The `# noqa` directive covering a finding that starts on a 1-based line, if any.

        It is on that line, or on the last line of the statement the line belongs to.
        """
        directive = self.noqa_directives.for_line(line)
        return directive.noqa if directive is not None else None


def _chain_related(chain: tuple[Link, ...], target: str) -> tuple[Related, ...]:
    """One related place per call on the way from a Dataset's worker code to `target` here."""
    callees = [link.name for link in chain[1:]] + [target]
    return tuple(
        Related(link.path, link.line, f"`{link.name}` calls `{callee}` here, in DataLoader workers")
        for link, callee in zip(chain, callees, strict=True)
    )


def _reaches_more_workers(new: WorkerFunction, known: WorkerFunction) -> bool:
    """A hook shared by two loaders is kept with the one that may have workers: the first loader
    found having none must not make the function parent-only for the other."""
    return (
        known.loader is not None
        and known.loader.workers_known_zero
        and not (new.loader is not None and new.loader.workers_known_zero)
    )


_NEVER_NONE = (
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Lambda,
    ast.JoinedStr,
)


# Calls that iterate their argument in the calling process (a progress bar, an index, a copy).
_IN_PROCESS_WRAPPERS = frozenset({"tqdm", "enumerate", "iter", "list", "next", "sorted", "zip", "track"})


def cast_name(node: ast.AST) -> str | None:
    """`f` for a call `f(...)` of a plain name, else None."""
    return node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None


def parse_noqa(text: str) -> Noqa | None:
    """The `# noqa` directive in one comment or line of text (see `datalint.lint.noqa`)."""
    from datalint.lint.noqa import parse_noqa as parse

    return parse(text)


def canonical(qualified: str) -> str:
    """Rewrite `torch.utils.data.dataloader.DataLoader` to `torch.utils.data.DataLoader`."""
    module, _, name = qualified.rpartition(".")
    replacement = CANONICAL_MODULES.get(module)
    return f"{replacement}.{name}" if replacement else qualified


def _import_bindings(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                root = alias.name.partition(".")[0]
                yield root, root
        return
    # `from .sub import x` -> ".sub.x"; `from . import x` -> ".x" (the dots are the level, not a
    # separator: joining "." and "x" with another would climb one package too many).
    prefix = "." * node.level + (f"{node.module}." if node.module else "")
    for alias in node.names:
        if alias.name != "*":
            yield alias.asname or alias.name, prefix + alias.name


# Fields that never hold a node in a parsed tree (names, numbers, flags; `ctx` holds the Load /
# Store / Del singletons, which are not places): the walk does not look into them.
_SCALAR_FIELDS = frozenset(
    {"ctx", "id", "name", "attr", "arg", "asname", "module", "level", "kind", "type_comment"}
    | {"simple", "conversion", "is_async", "rest", "tag"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}  # per node type, the fields the walk reads


def _child_fields(kind: type) -> tuple[str, ...]:
    return tuple(
        name
        for name in getattr(kind, "_fields", ())
        if name not in _SCALAR_FIELDS and not (kind is ast.Constant and name == "value")
    )


# Larger texts are parsed a piece at a time (`datalint.lint.parsing`): whole, the parser's peak
# is about twice the tree it returns.
PARSE_WHOLE_CHARACTERS = 1 << 20


def parse_source(source: str, path: str = "<string>") -> ast.Module:
    """`ast.parse(source)`, in bounded memory for a large text (see `datalint.lint.parsing`)."""
    if len(source) <= PARSE_WHOLE_CHARACTERS or "\r" in source:
        return ast.parse(source, filename=path)
    from datalint.lint.parsing import parse_in_pieces

    return parse_in_pieces(source, path)


def index_tree(tree: ast.AST) -> NodeIndex:
    """One breadth-first walk (ast.walk's order): nodes bucketed by type, and each node's parent.

    Expression contexts (Load / Store / Del singletons) are skipped: they are not places. This
    walk runs once per linted file over every node, so it is written for speed: per node type,
    only the fields that can hold nodes are read.
    """
    nodes: dict[type, list[ast.AST]] = defaultdict(list)
    parents: dict[ast.AST, ast.AST] = {}
    queue: list[ast.AST] = [tree]
    append = queue.append
    known = _CHILD_FIELDS
    node_type = ast.AST
    for node in queue:  # the list grows while it is read: a queue without popping
        kind = type(node)
        nodes[kind].append(node)
        fields = known.get(kind)
        if fields is None:
            fields = known[kind] = _child_fields(kind)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        parents[item] = node
                        append(item)
            elif isinstance(value, node_type):
                parents[value] = node
                append(value)
    return nodes, parents


def _attribute_assignments(info: ClassInfo) -> dict[str, tuple[tuple[ast.expr, ast.stmt], ...]]:
    found: dict[str, list[tuple[ast.expr, ast.stmt]]] = defaultdict(list)
    for method in info.methods.values():
        for attribute, value, statement in self_attribute_writes(method):
            found[attribute].append((value, statement))
    return {
        name: tuple(sorted(pairs, key=lambda p: (p[1].lineno, p[1].col_offset)))
        for name, pairs in found.items()
    }


def self_attribute_writes(function: ast.AST) -> Iterator[tuple[str, ast.expr, ast.stmt]]:
    """(attribute, value, statement) for `self.x = v`, `self.x: T = v` and `self.x[k] = v` in a function."""
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            attribute = self_attribute(target)
            if attribute is not None:
                yield attribute, value, node


def self_attribute(target: ast.expr) -> str | None:
    """`x` for the targets `self.x` and `self.x[key]`."""
    if isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and _is_self(target.value):
        return target.attr
    return None


def _class_info(node: ast.ClassDef) -> ClassInfo:
    methods = {
        item.name: item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    return ClassInfo(node, node.name, tuple(node.bases), methods)


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _is_main_guard(test: ast.expr) -> bool:
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and mains)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def dotted(node: ast.AST) -> str | None:
    """`self.train_loader` -> "self.train_loader"; None for anything but a Name / Attribute chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _is_bare_annotation(parent: ast.AST | None, name: ast.Name) -> bool:
    """`x: int` with no value binds nothing."""
    return isinstance(parent, ast.AnnAssign) and parent.target is name and parent.value is None


def _first_argument(call: ast.Call, keyword: str) -> ast.expr:
    """The first positional argument, or the keyword one; a None constant when neither is given."""
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == keyword), ast.Constant(None))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float)


@record
class Match:
    """What a matcher yields: the node to report, and the fields its rule's message template uses.

    `start_method` overrides the module's start method for this one finding's severity
    (e.g. a loader with its own `multiprocessing_context="fork"`).
    """

    node: ast.AST
    fields: Mapping[str, Any] = field(default_factory=dict)
    start_method: str | None = None
    related: tuple[Related, ...] = ()  # other places the finding depends on (another file's base)


@record
class Related:
    """Another place a finding depends on, named next to it (text `note:`, JSON, SARIF)."""

    path: str
    line: int
    message: str

"""The project a linted file belongs to: its root, its modules, and facts that cross files.

A real Dataset class seldom derives from `torch.utils.data.Dataset` in the same file: it derives
from the project's own `BaseDataset` in `data/base.py`, or from a library base such as
torchvision's `VisionDataset`. `Project` answers such questions across files:

- the root: the nearest folder above the linted paths holding `pyproject.toml`, `setup.cfg`,
  `setup.py` or `.git`;
- module names: a file's dotted name (the chain of `__init__.py` folders above it), and the file
  of a dotted name, looked up from the importing file's own top folder, the root and `root/src`;
- one compact `FileSummary` per file (classes and their bases as qualified names, the import
  table with relative imports made absolute, module-level aliases, which classes a class
  constructs and stores on `self`, which of their methods it calls), built from the syntax
  tree once and kept in a content-hash cache, so trees are never kept;
- "is a Dataset": a class's bases followed through any depth of inheritance, across files,
  re-exports through `__init__.py` and aliases, to torch's bases or to a known third-party base
  (`rules/bases/dataset-bases.toml`, data, not code).

What cannot be resolved stays unknown, and an unknown base makes no class a Dataset.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar

from datalint import __version__, marshal_cache
from datalint.records import field, record

try:  # hashlib's own blake2b, without loading OpenSSL as `import hashlib` does (3 ms of each start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b
from datalint.files import read_regular_file, write_atomically
from datalint.lint.module import (
    PARSE_WHOLE_CHARACTERS,
    TORCH_DATASET_BASES,
    NodeIndex,
    canonical,
    dotted,
    forwards_default_workers,
    index_tree,
    parse_source,
)

DatasetKind = Literal["map", "iterable"]
Forward = tuple[int, tuple[str, ...], tuple[tuple[str, str, str], ...]]

LOADER_CLASS = "torch.utils.data.DataLoader"
ROOT_MARKERS: tuple[str, ...] = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
Fact = TypeVar("Fact")  # what a summary table records about a function, beside its line
SUMMARY_FORMAT = 25  # bumped when FileSummary's fields, or what fills them, change: old entries are ignored
_MAX_DEPTH = 24  # inheritance and re-export chains longer than this are unknown
_MAX_CALL_HOPS = 6  # calls from a Dataset to a function of another file, followed this far
_MAX_SCRIPT_LEVELS = 6  # folders above a file where a script importing it through namespace packages may run
# Source bytes of files to lint whose trees are held after a lookup parsed them (`Project.expect`);
# a tree and its index take about 36 times their source in memory.
PARSED_AHEAD_BYTES = 2 << 20

# ---- values --------------------------------------------------------------------------------------


@record
class ClassSummary:
    """One top-level class: its bases (qualified names, "" when unresolvable) and what it holds."""

    name: str
    line: int
    bases: tuple[str, ...]
    methods: tuple[str, ...]
    # `self.<attr> = Callee(...)`: (attr, qualified callee) for callees that may be project classes.
    holds: tuple[tuple[str, str], ...] = ()
    # `self.<attr>.<method>(...)` and `self.<attr>(...)` (method "__call__") in its methods.
    calls_on: tuple[tuple[str, str], ...] = ()
    # Its `__init__` hands `**kwargs` on and never names `num_workers`: a loader built from it
    # without `num_workers` gets DataLoader's default, 0 (see `forwards_default_workers`).
    default_workers: bool = False
    # `__init__` stores a parameter as `self.<attr> = <parameter>` and `__getitem__` subscripts
    # `self.<attr>` with its index: (parameter, its position after self or -1, attr). What a
    # caller passes there is what the workers index per sample (DL301 at the caller).
    sample_parameters: tuple[tuple[str, int, str], ...] = ()
    # The attributes `__getitem__` subscripts with its index (`self.db[idx]`): what a subclass in
    # another file stores there is what the workers index per sample.
    indexed: tuple[str, ...] = ()
    # Methods whose every return is a list they fill in a loop (`kept = []` ... `return kept`).
    list_methods: tuple[str, ...] = ()
    # `self.<method>(..., index, ...)` in `__getitem__`: (method, the index's position after self).
    # A subclass in another file that overrides the method reads per sample what it subscripts there.
    index_hooks: tuple[tuple[str, int], ...] = ()
    # Calls of top-level functions (qualified) made by the code its workers run:
    # (callee, line, the method that calls it).
    worker_calls: tuple[tuple[str, int, str], ...] = ()
    # Qualified calls its `__init__` makes (`cv2.setNumThreads(0)` there covers its subclasses).
    init_calls: tuple[str, ...] = ()
    # Classes built inside what `self.<attr> = Callee(...)` stores (`Compose([Resize(...)])`):
    # (attr, qualified class). When the attribute is called, they are called too.
    holds_within: tuple[tuple[str, str], ...] = ()


@record
class FileSummary:
    """What other files need to know about one file; built once per content, then cached."""

    module: str
    is_package: bool
    imports: Mapping[str, str]  # local name -> absolute qualified name
    star_imports: tuple[str, ...]  # modules `from m import *` pulls names from
    classes: Mapping[str, ClassSummary]
    aliases: Mapping[str, str]  # module-level `Name = other.Name` -> qualified "other.Name"
    # Top-level functions that return something pickle cannot send: name -> (line, what it is).
    unpicklable_returns: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    # Top-level functions that hand their parameters on to a constructor call they make:
    # name -> (line, positional parameter names, ((callee, keyword, parameter), ...)); keyword
    # "**" is `Callee(..., **parameter)`. Whether the callee is a Dataset is resolved later.
    forwards: Mapping[str, Forward] = field(default_factory=dict)
    # Top-level factories: name -> the qualified callees whose results it returns
    # (`return Reader(...)`, or `reader = Reader(...)` ... `return reader` on every branch).
    factory_returns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Top-level functions that return a new list of Python objects built from data they read (a
    # listing, a file's lines): name -> line. What the list holds per sample is the caller's question.
    list_returns: Mapping[str, int] = field(default_factory=dict)
    # Top-level functions that return a loader built here with `sampler=Sampler(...)` and never
    # mention `set_epoch`: name -> (the sampler call's line, its qualified name, whether it
    # shuffles). Whether the caller's epoch loop tells it the epoch is the caller's question.
    sampler_returns: Mapping[str, tuple[int, str, bool]] = field(default_factory=dict)
    # Qualified callees whose result a DataLoader of this file that may start workers reads
    # (`ds = build_dataset(...)` ... `DataLoader(ds, num_workers=n)`): the classes they build,
    # through factories, are datasets by use.
    loaded_callees: tuple[str, ...] = ()
    # Top-level functions every return of which is a tuple of one length, some positions of which
    # hold lists built from data read (`return paths, labels`): name -> (line, those positions).
    tuple_list_returns: Mapping[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    # Top-level functions: name -> (line, the top-level functions they call: (qualified callee, line)).
    # A function a worker calls runs there, and so do the functions it calls (`Project.learn`).
    functions: Mapping[str, tuple[int, tuple[tuple[str, int], ...]]] = field(default_factory=dict)
    # Qualified calls made by module-level statements (`cv2.setNumThreads(0)` in a training script).
    top_calls: tuple[str, ...] = ()
    # Module-level names bound to what pickle cannot send (`normalize = lambda x: ...`): name -> (line,
    # what it is). Pickle finds a function by its qualified name, which a lambda's "<lambda>" is not.
    unpicklable_values: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    # Imported names handed to a call as an argument (`Images(paths, transform=normalize)`), and
    # classes built in an argument (`transform=Compose([RandomFlip()])`): (qualified name,
    # qualified callee, keyword or "" for a positional one, line, whether it is a class built there).
    handed: tuple[tuple[str, str, str, int, bool], ...] = ()
    # How the result of each call of another file's function is first used: (qualified callee,
    # "method:convert" / "call:numpy.array" / "" for anything else: kept, returned, handed on).
    # A helper returning a lazy image that every caller decodes at once keeps no file open (DL305).
    result_uses: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "is_package": self.is_package,
            "imports": dict(self.imports),
            "star_imports": list(self.star_imports),
            "aliases": dict(self.aliases),
            "unpicklable_returns": {k: list(v) for k, v in self.unpicklable_returns.items()},
            "forwards": {k: [v[0], list(v[1]), [list(x) for x in v[2]]] for k, v in self.forwards.items()},
            "factory_returns": {k: list(v) for k, v in self.factory_returns.items()},
            "list_returns": dict(self.list_returns),
            "tuple_list_returns": {k: [v[0], list(v[1])] for k, v in self.tuple_list_returns.items()},
            "sampler_returns": {k: list(v) for k, v in self.sampler_returns.items()},
            "loaded_callees": list(self.loaded_callees),
            "functions": {k: [v[0], [list(c) for c in v[1]]] for k, v in self.functions.items()},
            "top_calls": list(self.top_calls),
            "unpicklable_values": {k: list(v) for k, v in self.unpicklable_values.items()},
            "handed": [list(h) for h in self.handed],
            "result_uses": [list(u) for u in self.result_uses],
            "classes": [
                [
                    c.name,
                    c.line,
                    list(c.bases),
                    list(c.methods),
                    [list(h) for h in c.holds],
                    [list(x) for x in c.calls_on],
                    c.default_workers,
                    [list(x) for x in c.sample_parameters],
                    list(c.indexed),
                    list(c.list_methods),
                    [list(x) for x in c.index_hooks],
                    [list(x) for x in c.worker_calls],
                    list(c.init_calls),
                    [list(x) for x in c.holds_within],
                ]
                for c in self.classes.values()
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FileSummary:
        classes = {
            name: ClassSummary(
                name,
                int(line),
                tuple(bases),
                tuple(methods),
                tuple((a, b) for a, b in holds),
                tuple((a, b) for a, b in calls_on),
                bool(default_workers),
                tuple((str(a), int(b), str(c)) for a, b, c in sample_parameters),
                tuple(indexed),
                tuple(list_methods),
                tuple((str(a), int(b)) for a, b in index_hooks),
                tuple((str(a), int(b), str(c)) for a, b, c in worker_calls),
                tuple(init_calls),
                tuple((str(a), str(b)) for a, b in holds_within),
            )
            for (
                name,
                line,
                bases,
                methods,
                holds,
                calls_on,
                default_workers,
                sample_parameters,
                indexed,
                list_methods,
                index_hooks,
                worker_calls,
                init_calls,
                holds_within,
            ) in data["classes"]
        }
        return cls(
            str(data["module"]),
            bool(data["is_package"]),
            dict(data["imports"]),
            tuple(data["star_imports"]),
            classes,
            dict(data["aliases"]),
            {k: (int(v[0]), str(v[1])) for k, v in data.get("unpicklable_returns", {}).items()},
            {
                k: (int(v[0]), tuple(v[1]), tuple((a, b, c) for a, b, c in v[2]))
                for k, v in data.get("forwards", {}).items()
            },
            {k: tuple(v) for k, v in data.get("factory_returns", {}).items()},
            {k: int(v) for k, v in data.get("list_returns", {}).items()},
            {k: (int(v[0]), str(v[1]), bool(v[2])) for k, v in data.get("sampler_returns", {}).items()},
            tuple(data.get("loaded_callees", ())),
            {
                k: (int(v[0]), tuple(int(i) for i in v[1]))
                for k, v in data.get("tuple_list_returns", {}).items()
            },
            {
                k: (int(v[0]), tuple((str(a), int(b)) for a, b in v[1]))
                for k, v in data.get("functions", {}).items()
            },
            tuple(data.get("top_calls", ())),
            {k: (int(v[0]), str(v[1])) for k, v in data.get("unpicklable_values", {}).items()},
            tuple((str(a), str(b), str(c), int(d), bool(e)) for a, b, c, d, e in data.get("handed", ())),
            tuple((str(a), str(b)) for a, b in data.get("result_uses", ())),
        )


@record
class ClassRef:
    """A class found in the project: where it is defined."""

    qualname: str
    path: Path
    summary: ClassSummary
    source_root: Path


@record
class Link:
    """One step of an inheritance chain defined in another file, for related locations."""

    name: str
    path: str
    line: int


@record
class DatasetFact:
    """Why a class is a Dataset: its kind, the base that decides it, and the chain to it."""

    kind: DatasetKind
    base: str  # the terminal base: "torch.utils.data.Dataset", "torchvision.datasets.VisionDataset"
    chain: tuple[Link, ...] = ()  # the project classes in between that live in other files

    @property
    def is_iterable(self) -> bool:
        return self.kind == "iterable"


@record
class WorkerHeld:
    """A class whose methods run in workers because a Dataset in another file holds it."""

    methods: frozenset[str]
    holder: str  # "TrainSet in data/sets.py:12"
    link: Link
    # For a function: the calls that lead to it from a Dataset's worker code, first to last
    # (`Shapes.__getitem__` at sets.py:30 -> `load_image` at img.py:26): its related locations.
    chain: tuple[Link, ...] = ()


@record
class HandOver:
    """A module-level value of one file handed to a Dataset's constructor in another file."""

    keyword: str  # the argument's keyword, "" when positional
    link: Link  # the Dataset class's (or DataLoader's) name, and the call's place
    to_loader: bool = False  # handed to a DataLoader that may start workers (`collate_fn=`)


# ---- known third-party bases -----------------------------------------------------------------------


def bases_file() -> Path:
    from datalint.lint.catalog import rules_dir

    return rules_dir() / "bases" / "dataset-bases.toml"


@lru_cache(maxsize=1)
def known_dataset_bases() -> Mapping[str, DatasetKind]:
    """torch's bases plus the catalog's third-party ones (`rules/bases/dataset-bases.toml`)."""
    table: dict[str, DatasetKind] = dict(TORCH_DATASET_BASES)
    data = _bases_table(bases_file())
    if data is None:
        return table  # the catalog's own data is missing or broken: torch's bases still count
    for kind in ("map", "iterable"):
        for name in data.get(kind, []):
            table[str(name)] = kind
    return table


@record
class TrainerNames:
    """Classes that read datasets with a loader of their own, and the arguments that set its
    workers (`rules/bases/trainers.toml`): data, like the Dataset bases."""

    trainers: frozenset[str] = frozenset()
    arguments: frozenset[str] = frozenset()
    dataset_keywords: frozenset[str] = frozenset()
    workers_field: str = ""
    loader_methods: frozenset[str] = frozenset()


@lru_cache(maxsize=1)
def known_trainers() -> TrainerNames:
    """The catalog's trainers; none when the file is missing or broken (their datasets stay unknown)."""
    data = _bases_table(rules_bases_dir() / "trainers.toml")
    if data is None:
        return TrainerNames()
    return TrainerNames(
        frozenset(map(str, data.get("trainers", []))),
        frozenset(map(str, data.get("arguments", []))),
        frozenset(map(str, data.get("dataset-keywords", []))),
        str(data.get("workers-field", "")),
        frozenset(map(str, data.get("loader-methods", []))),
    )


def rules_bases_dir() -> Path:
    return bases_file().parent


def _bases_table(path: Path) -> dict[str, Any] | None:
    """The parsed bases file, cached like the catalog's tables (a warm start imports no tomllib)."""
    try:
        status = path.stat()
    except OSError:
        return None
    stamp = [status.st_mtime_ns, status.st_size]
    cache = marshal_cache.cache_path("bases", path)
    cached = marshal_cache.read(cache, stamp)
    if cached is not None:
        return cached
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    marshal_cache.write(cache, stamp, data)
    return data


# ---- the project root and module names ------------------------------------------------------------


def find_root(paths: Iterable[Path | str]) -> Path | None:
    """The nearest folder above (or at) the first path that holds a project marker; with no marker
    above it (a tree exported without `.git`, a folder of scripts), the folder given, or the file's
    own folder, or the folder holding all the paths given: `check .` there reads that folder as
    the project, whether it arrives as the folder or as its files."""
    given = list(paths)
    for first in given[:1]:
        start = Path(first).resolve()
        folder = start if start.is_dir() else start.parent
        for candidate in (folder, *folder.parents):
            if any((candidate / marker).exists() for marker in ROOT_MARKERS):
                return candidate
        if len(given) == 1:
            return folder
        # No marker: the folder holding every path given (`check tree` hands the tree's files
        # over one by one; the first file's own folder would leave the others out of the project).
        folders = [p if p.is_dir() else p.parent for p in (Path(g).resolve() for g in given)]
        return Path(os.path.commonpath([folder, *folders]))
    return None


def module_name(path: Path) -> tuple[str, Path, bool]:
    """(dotted name, the folder it is importable from, whether it is a package's `__init__.py`).

    The name follows the chain of folders with `__init__.py` above the file, like the import
    system does for a regular package found on `sys.path`.
    """
    path = path.resolve()
    is_package = path.name == "__init__.py"
    parts = [] if is_package else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.append(folder.name)
        folder = folder.parent
    return ".".join(reversed(parts)), folder, is_package


# ---- summaries ----------------------------------------------------------------------------------------


def summarize(
    tree: ast.Module, module: str, is_package: bool, index: NodeIndex | None = None
) -> FileSummary:
    """The facts of one parsed file that other files resolve through (top-level statements only).

    `index` is the tree's nodes by type and their parents (`index_tree`; a linted file's `Module`
    holds it already). The facts inside functions and methods are read from it: each node is
    visited once per file, not once per question asked about the function around it.
    """
    imports: dict[str, str] = {}
    stars: list[str] = []
    aliases: dict[str, str] = {}
    class_nodes: list[ast.ClassDef] = []
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    assigns: list[ast.Assign] = []
    for statement in _top_level(tree.body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    imports[alias.asname] = alias.name
                else:
                    head = alias.name.partition(".")[0]
                    imports[head] = head
                    imports[alias.name] = alias.name  # a dotted key: never a local name, but imported
        elif isinstance(statement, ast.ImportFrom):
            source = absolute_module(module, is_package, statement.level, statement.module)
            if source is None:
                continue
            for alias in statement.names:
                if alias.name == "*":
                    stars.append(source)
                else:
                    imports[alias.asname or alias.name] = f"{source}.{alias.name}" if source else alias.name
        elif isinstance(statement, ast.ClassDef):
            class_nodes.append(statement)
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(statement)
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            assigns.append(statement)
    # Top-level classes and functions: `return make_loader(...)` of a function of this file is a
    # factory chain other files can follow (`Project.sampler_return`).
    local_classes = {node.name for node in class_nodes} | {f.name for f in functions}

    def qualify(expr: ast.AST) -> str:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        name = dotted(expr)
        if name is None:
            return ""
        head, dot, rest = name.partition(".")
        if head in local_classes:
            return f"{module}.{name}" if module else name
        if head in imports:
            return imports[head] + dot + rest
        if head in aliases:
            return aliases[head] + dot + rest
        return ""

    for statement in assigns:
        target = statement.targets[0]
        if isinstance(target, ast.Name) and (value := qualify(statement.value)):
            aliases[target.id] = value
    methods = {
        item: node
        for node in class_nodes
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    inside = _Regions(index if index is not None else index_tree(tree), {*functions, *methods})
    unpicklable: dict[str, tuple[int, str]] = {}
    forwards: dict[str, Forward] = {}
    factories: dict[str, tuple[str, ...]] = {}
    lists: dict[str, int] = {}
    tuple_lists: dict[str, tuple[int, tuple[int, ...]]] = {}
    samplers: dict[str, tuple[int, str, bool]] = {}
    loaded: set[str] = set()
    calling: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = {}
    for function in functions:
        local_qualify = _with_local_imports(inside, function, module, is_package, qualify)
        calling[function.name] = (function.lineno, _qualified_calls(inside, [function], local_qualify))
        loaded |= _loaded_callees(inside, function, local_qualify)
        what = _returns_unpicklable(inside, function)
        if what:
            unpicklable[function.name] = (function.lineno, what)
        handed = _handed_parameters(inside, function, qualify)
        if handed:
            positional = tuple(a.arg for a in (*function.args.posonlyargs, *function.args.args))
            forwards[function.name] = (function.lineno, positional, handed)
        returned = _returned_constructions(inside, function, local_qualify)
        if returned:
            factories[function.name] = returned
        if _returns_filled_list(inside, function):
            lists[function.name] = function.lineno
        positions = _returned_list_positions(inside, function)
        if positions:
            tuple_lists[function.name] = (function.lineno, positions)
        sampler = _returned_loader_sampler(inside, function, qualify)
        if sampler is not None:
            samplers[function.name] = sampler
    classes: dict[str, ClassSummary] = {}
    seen: set[str] = set()
    for node in class_nodes:
        summary = _class_summary(inside, node, qualify)
        if node.name in seen:
            classes.pop(node.name, None)  # two classes, one name: ambiguous
            continue
        seen.add(node.name)
        classes[node.name] = summary
    for node in class_nodes:  # a subclass filling the hooks its in-file base's `__getitem__` calls
        hooks = _in_file_hooks(classes, node.name, f"{module}." if module else "")
        if hooks:
            classes[node.name] = _class_summary(inside, node, qualify, hooks)
    return FileSummary(
        module,
        is_package,
        imports,
        tuple(stars),
        classes,
        aliases,
        unpicklable,
        forwards,
        factories,
        lists,
        samplers,
        tuple(sorted(loaded)),
        tuple_lists,
        calling,
        _module_level_calls(tree.body, qualify),
        {
            a.targets[0].id: (a.value.lineno, "a lambda")
            for a in assigns
            if isinstance(a.targets[0], ast.Name) and isinstance(a.value, ast.Lambda)
        },
        _handed_imports(inside, imports, qualify),
        _result_uses(inside, qualify, local_classes),
    )


def _result_uses(
    inside: _Regions, qualify: Callable[[ast.AST], str], local: set[str]
) -> tuple[tuple[str, str], ...]:
    """(callee, first use) for the calls of functions of other modules (`frame_utils.read_gen(p)`):
    the use of the result itself (`.convert(...)`, `np.array(...)`), or of the name it is bound to,
    at that name's first read after the binding in the same function."""
    found: set[tuple[str, str]] = set()
    reads: dict[tuple[ast.AST, str], list[ast.Name]] = {}
    for call in inside.every(ast.Call):
        name = dotted(call.func) if isinstance(call.func, ast.Name | ast.Attribute) else None
        if name is None or name.partition(".")[0] in local or not name.rpartition(".")[2][:1].islower():
            continue
        callee = qualify(call.func)
        if callee:
            found.add((callee, _first_use(inside, call, qualify, reads)))
    return tuple(sorted(found))


def _first_use(
    inside: _Regions,
    call: ast.Call,
    qualify: Callable[[ast.AST], str],
    reads: dict[tuple[ast.AST, str], list[ast.Name]],
) -> str:
    parent = inside.parent(call)
    use = _direct_use(inside, parent, call, qualify)
    region = inside.region(call)
    if use or region is None or not isinstance(parent, ast.Assign) or len(parent.targets) != 1:
        return use
    target = parent.targets[0]
    if not isinstance(target, ast.Name):
        return ""
    key = (region, target.id)
    if key not in reads:  # each name's reads in a function, listed once for all its bindings
        loads = [n for n in inside.of(region, ast.Name) if n.id == target.id and isinstance(n.ctx, ast.Load)]
        reads[key] = sorted(loads, key=lambda n: (n.lineno, n.col_offset))
    end = (parent.end_lineno or parent.lineno, parent.end_col_offset or 0)
    later = [n for n in reads[key] if (n.lineno, n.col_offset) >= end]
    return _direct_use(inside, inside.parent(later[0]), later[0], qualify) if later else ""


def _direct_use(
    inside: _Regions, parent: ast.AST | None, node: ast.AST, qualify: Callable[[ast.AST], str]
) -> str:
    """`node.method(...)` -> "method:method"; `f(node, ...)` -> "call:<qualified f>"; else ""."""
    if isinstance(parent, ast.Attribute) and parent.value is node:
        above = inside.parent(parent)
        return f"method:{parent.attr}" if isinstance(above, ast.Call) and above.func is parent else ""
    first = isinstance(parent, ast.Call) and bool(parent.args) and parent.args[0] is node
    callee = qualify(parent.func) if first and isinstance(parent, ast.Call) else ""
    return f"call:{callee}" if callee else ""


def _handed_imports(
    inside: _Regions, imports: Mapping[str, str], qualify: Callable[[ast.AST], str]
) -> tuple[tuple[str, str, str, int, bool], ...]:
    """Imported names passed as arguments to calls of imported or top-level callables, and the
    imported or top-level classes built inside such arguments."""
    found: set[tuple[str, str, str, int, bool]] = set()
    for call in inside.every(ast.Call):
        # Datasets and loaders are classes: a CapWords callee (`Images(...)`, `DataLoader(...)`).
        if not (call.args or call.keywords) or not _capwords(call.func) or not (callee := qualify(call.func)):
            continue
        if callee.endswith(".DataLoader") and not _may_start_workers(call):
            continue  # its hooks run in the training process: anything may be handed to them
        given = [("", a) for a in call.args] + [(k.arg, k.value) for k in call.keywords if k.arg]
        for keyword, value in given:
            if isinstance(value, ast.Name) and value.id in imports:
                found.add((imports[value.id], callee, keyword, call.lineno, False))
                continue
            for node in ast.walk(value):
                built = qualify(node.func) if isinstance(node, ast.Call) else ""
                if built and built.rpartition(".")[2][:1].isupper():
                    found.add((built, callee, keyword, call.lineno, True))
    return tuple(sorted(found))


def _qualified_calls(
    inside: _Regions, functions: Iterable[ast.AST], qualify: Callable[[ast.AST], str]
) -> tuple[tuple[str, int], ...]:
    """The calls of imported or top-level names in `functions` (`load_image(p)`, `img.load(p)`):
    (qualified callee, first line), each callee once; methods of `self` are the class's own."""
    found: dict[str, int] = {}
    for function in functions:
        for call in inside.of(function, ast.Call):
            callee = qualify(call.func) if isinstance(call.func, ast.Name | ast.Attribute) else ""
            if callee and (callee not in found or call.lineno < found[callee]):
                found[callee] = call.lineno
    return tuple(sorted(found.items()))


def _module_level_calls(body: list[ast.stmt], qualify: Callable[[ast.AST], str]) -> tuple[str, ...]:
    calls = {
        qualify(statement.value.func)
        for statement in _top_level(body)
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
    }
    return tuple(sorted(c for c in calls if c))


def _may_start_workers(loader: ast.Call) -> bool:
    """`num_workers` given and not a literal 0 (or hidden in `**kwargs`): DataLoader's default is 0."""
    if any(k.arg is None for k in loader.keywords):
        return True
    given = next((k.value for k in loader.keywords if k.arg == "num_workers"), None)
    if given is None and len(loader.args) > 5:
        given = loader.args[5]
    return given is not None and not (isinstance(given, ast.Constant) and given.value == 0)


def _with_local_imports(
    inside: _Regions,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    module: str,
    is_package: bool,
    qualify: Callable[[ast.AST], str],
) -> Callable[[ast.AST], str]:
    """`qualify`, knowing the names a function imports inside itself (`from .panoptic import build
    as build_panoptic`, written there to keep an optional dependency optional)."""
    local: dict[str, str] = {}
    for node in inside.of(function, ast.ImportFrom):
        source = absolute_module(module, is_package, node.level, node.module)
        if source is None:
            continue
        for alias in node.names:
            if alias.name != "*":
                local[alias.asname or alias.name] = f"{source}.{alias.name}" if source else alias.name
    if not local:
        return qualify

    def qualify_here(expr: ast.AST) -> str:
        name = dotted(expr.value if isinstance(expr, ast.Subscript) else expr) or ""
        head, dot, rest = name.partition(".")
        return local[head] + dot + rest if head in local else qualify(expr)

    return qualify_here


def _loaded_callees(
    inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef, qualify: Callable[[ast.AST], str]
) -> set[str]:
    """The callees whose result a DataLoader built in `function` reads as its dataset, directly
    (`DataLoader(build(...))`) or through a name bound once to the call."""
    loaders = [
        call
        for call in inside.of(function, ast.Call)
        # A loader without workers pickles nothing: the worker rules need not see what it reads.
        if canonical(qualify(call.func)) == LOADER_CLASS and _may_start_workers(call)
    ]
    if not loaders:
        return set()
    bound = _bound_once(inside, function)
    found: set[str] = set()
    for call in loaders:
        keyword = next((k.value for k in call.keywords if k.arg == "dataset"), None)
        dataset = call.args[0] if call.args else keyword
        if isinstance(dataset, ast.Name):
            dataset = bound.get(dataset.id)
        if isinstance(dataset, ast.Call) and (callee := qualify(dataset.func)):
            found.add(callee)
    return found


def _returned_loader_sampler(
    inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef, qualify: Callable[[ast.AST], str]
) -> tuple[int, str, bool] | None:
    """(line, qualified sampler, shuffles) for `return DataLoader(..., sampler=Sampler(...))`, or a
    local name bound once to such a loader and returned, in a function that never mentions
    `set_epoch` (a helper that sets it, or hands it on, is not this case)."""
    returns = inside.of(function, ast.Return)
    if not returns:
        return None
    bound = _bound_once(inside, function)
    found = None
    for statement in returns:
        value = statement.value
        if isinstance(value, ast.Name):
            value = bound.get(value.id)
        if isinstance(value, ast.Call) and canonical(qualify(value.func)) == LOADER_CLASS:
            sampler = next((k.value for k in value.keywords if k.arg == "sampler"), None)
            if isinstance(sampler, ast.Name):
                sampler = bound.get(sampler.id)
            if isinstance(sampler, ast.Call) and (name := qualify(sampler.func)):
                found = (sampler.lineno, name, _shuffles_by_default(sampler))
    if found is None:
        return None
    names = inside.of(function, ast.Attribute, ast.Name)
    if any(getattr(n, "attr", getattr(n, "id", None)) == "set_epoch" for n in names):
        return None
    return found


def _bound_once(
    inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> dict[str, ast.expr | None]:
    """Each local name's value when the function binds it once with `name = value`, else None."""
    bound: dict[str, ast.expr | None] = {}
    for assign in inside.of(function, ast.Assign):
        for target in assign.targets:
            if isinstance(target, ast.Name):
                bound[target.id] = None if target.id in bound else assign.value
    return bound


def _shuffles_by_default(sampler: ast.Call) -> bool:
    """`shuffle=True`, or no `shuffle` at all (a DistributedSampler's default) and no `**kwargs`."""
    shuffle = next((k.value for k in sampler.keywords if k.arg == "shuffle"), None)
    if shuffle is None:
        return len(sampler.args) <= 3 and not any(k.arg is None for k in sampler.keywords)
    return isinstance(shuffle, ast.Constant) and shuffle.value is True


INT_CALLS = frozenset({"int", "len", "ord", "bool"})  # what they return is an int (mostly small, shared)


def _returns_filled_list(inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every return gives back `name`, bound once to `[]` and grown by `name.append(...)` in a loop
    (`for line in file: paths.append(...)`): a list with one entry per item read. Appends of plain
    ints (`int(...)`, `len(...)`) hold small shared ints, not objects, and do not count."""
    returns = _own_returns(inside, function)
    names = {r.value.id for r in returns if isinstance(r.value, ast.Name)}
    if not returns or len(names) != 1 or any(not isinstance(r.value, ast.Name) for r in returns):
        return False
    return _appended_in_loop(inside, function, names.pop())


def _own_returns(inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The function's own `return` statements, not those of the functions nested in it."""
    nested = inside.of(function, ast.FunctionDef, ast.AsyncFunctionDef)
    theirs = {node for inner in nested for node in ast.walk(inner) if isinstance(node, ast.Return)}
    return [r for r in inside.of(function, ast.Return) if r not in theirs]


def _returned_list_positions(
    inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> tuple[int, ...]:
    """The positions of the returned tuple that hold a list built from data read, when every
    return is a tuple of one length: a name filled as `_returns_filled_list` says, a name whose
    last binding, at the top of the function, is a comprehension, or such a comprehension itself
    (`return [root + x for x in lines], labels`). Comprehensions of plain ints do not count."""
    returns = [r.value for r in _own_returns(inside, function)]
    if not returns or not all(isinstance(r, ast.Tuple) for r in returns):
        return ()
    tuples = [r for r in returns if isinstance(r, ast.Tuple)]
    if len({len(t.elts) for t in tuples}) != 1:
        return ()
    local = _single_assignments(inside, function)
    return tuple(
        position
        for position in range(len(tuples[0].elts))
        if all(_built_list(inside, function, t.elts[position], local) for t in tuples)
    )


def _built_list(
    inside: _Regions,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    element: ast.expr,
    local: Mapping[str, ast.expr | None],
) -> bool:
    if isinstance(element, ast.ListComp):
        return not _plain_int(element.elt, local, 0)
    if not isinstance(element, ast.Name):
        return False
    if _appended_in_loop(inside, function, element.id):
        return True
    bindings = [
        a
        for a in inside.of(function, ast.Assign)
        if any(isinstance(t, ast.Name) and t.id == element.id for t in a.targets)
    ]
    last = max(bindings, key=lambda a: (a.lineno, a.col_offset), default=None)
    return (
        last is not None
        and last in _always_run(function.body)
        and isinstance(last.value, ast.ListComp)
        and not _plain_int(last.value.elt, local, 0)
    )


def _always_run(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body` that run whenever it does: its own, and those of its `with` blocks."""
    found: list[ast.stmt] = []
    for statement in body:
        found.append(statement)
        if isinstance(statement, ast.With | ast.AsyncWith):
            found.extend(_always_run(statement.body))
    return found


def _appended_in_loop(inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """`name` is bound once, to `[]`, and grown by `name.append(...)` in a loop with values that are
    not plain ints."""
    bindings = [
        a
        for a in inside.of(function, ast.Assign)
        if any(isinstance(t, ast.Name) and t.id == name for t in a.targets)
    ]
    if len(bindings) != 1 or not (isinstance(bindings[0].value, ast.List) and not bindings[0].value.elts):
        return False
    appends = [
        call
        for call in inside.of(function, ast.Call)
        if isinstance(call.func, ast.Attribute)
        and call.func.attr == "append"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == name
    ]
    loops = inside.of(function, ast.For, ast.AsyncFor, ast.While)
    in_loop = any(any(call in ast.walk(loop) for call in appends) for loop in loops)
    local = _single_assignments(inside, function)
    return in_loop and all(not _plain_int(call.args[0], local, 0) for call in appends if len(call.args) == 1)


def _single_assignments(
    inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> dict[str, ast.expr | None]:
    """Each local name's one plain assignment in the function (None: assigned several times)."""
    local: dict[str, ast.expr | None] = {}
    for assign in inside.of(function, ast.Assign):
        if len(assign.targets) == 1 and isinstance(target := assign.targets[0], ast.Name):
            local[target.id] = None if target.id in local else assign.value
    return local


def _plain_int(expr: ast.expr, local: Mapping[str, ast.expr | None], depth: int) -> bool:
    """`int(x)`, `len(x)`, `ord(c) - ord("A")`, or a local name assigned one such value."""
    if depth > 3:
        return False
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int)
    if isinstance(expr, ast.BinOp) and not isinstance(expr.op, ast.Div):
        return _plain_int(expr.left, local, depth + 1) and _plain_int(expr.right, local, depth + 1)
    if isinstance(expr, ast.Name):
        value = local.get(expr.id)
        return value is not None and _plain_int(value, local, depth + 1)
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in INT_CALLS


def _returned_constructions(
    inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef, qualify: Callable[[ast.AST], str]
) -> tuple[str, ...]:
    """The qualified callees a factory returns the result of: `return Callee(...)`, or a local name
    every assignment of which is such a call. Empty when a return is anything else."""
    built: dict[str, set[str]] = {}
    opaque: set[str] = set()  # names also bound to something that is not a resolvable call
    for assign in inside.of(function, ast.Assign):
        for target in assign.targets:
            if not isinstance(target, ast.Name):
                continue
            if isinstance(assign.value, ast.Call):
                # A callee imported inside the function stays unqualified: one unknown possibility.
                built.setdefault(target.id, set()).add(qualify(assign.value.func))
            else:
                opaque.add(target.id)
    found: set[str] = set()
    for statement in inside.of(function, ast.Return):
        value = statement.value
        if isinstance(value, ast.Constant) and value.value is None:
            continue  # a failure path (or code after a `raise`) returns nothing to use
        if isinstance(value, ast.Call):
            found.add(qualify(value.func))
        elif isinstance(value, ast.Name) and value.id in built and value.id not in opaque:
            found |= built[value.id]
        else:
            return ()
    found.discard("")
    return tuple(sorted(found))


class _Regions:
    """The nodes of one kind inside each region of a file (a top-level function, a method of a
    top-level class, nested code included), in `ast.walk` order, grouped on first request."""

    def __init__(self, index: NodeIndex, regions: set[ast.AST]) -> None:
        self._nodes, self._parents = index
        self._regions = regions
        self._owner: dict[ast.AST, ast.AST | None] = {}  # node -> the region it sits in (memo)
        self._grouped: dict[Any, dict[ast.AST, list[Any]]] = {}

    def every(self, kind: type[ast.AST]) -> list[Any]:
        """The nodes of `kind` anywhere in the file, module level included."""
        return list(self._nodes.get(kind, ()))

    def of(self, region: ast.AST, *kinds: type[ast.AST]) -> list[Any]:
        """The nodes of `kinds` strictly inside `region`, in walk order within each kind."""
        found: list[Any] = []
        for kind in kinds:
            grouped = self._grouped.get(kind)
            if grouped is None:
                grouped = self._grouped[kind] = self._group(self._nodes.get(kind, ()))
            found.extend(grouped.get(region, ()))
        return found

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self._parents.get(node)

    def region(self, node: ast.AST) -> ast.AST | None:
        """The top-level function or method `node` sits in; None at module level."""
        return self._region_of(node)

    def _group(self, nodes: Iterable[ast.AST]) -> dict[ast.AST, list[Any]]:
        grouped: dict[ast.AST, list[Any]] = {}
        for node in nodes:
            region = self._region_of(node)
            if region is not None:
                grouped.setdefault(region, []).append(node)
        return grouped

    def _region_of(self, node: ast.AST) -> ast.AST | None:
        """The region strictly above `node`; the nodes on the way up share the answer (memoized)."""
        regions, owner, parents = self._regions, self._owner, self._parents
        path = []
        current = parents.get(node)
        found: ast.AST | None = None
        while current is not None:
            if current in regions:
                found = current
                break
            if current in owner:
                found = owner[current]
                break
            path.append(current)
            current = parents.get(current)
        for step in path:
            owner[step] = found
        return found


def _handed_parameters(
    inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef, qualify: Callable[[ast.AST], str]
) -> tuple[tuple[str, str, str], ...]:
    """(callee, keyword, parameter) for each `Callee(..., keyword=parameter)` (or `**parameter`)
    the function makes with one of its own parameters, unchanged."""
    arguments = function.args
    parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    if arguments.kwarg is not None:
        parameters.add(arguments.kwarg.arg)
    handed: set[tuple[str, str, str]] = set()
    for node in inside.of(function, ast.Call):
        passed = [
            k for k in node.keywords if isinstance(k.value, ast.Name) and k.value.id in parameters
        ]
        if not passed:
            continue  # the cheap test first: most calls hand on no parameter
        callee = qualify(node.func)
        if callee:
            handed.update((callee, keyword.arg or "**", keyword.value.id) for keyword in passed)
    return tuple(sorted(handed))


def _returns_unpicklable(inside: _Regions, function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """"a lambda" / "the nested function `f`" when the function returns one (maybe inside a
    constructor call such as `Compose([..., Lambda(lambda x: x)])`), else ""."""
    returns = [node for node in inside.of(function, ast.Return) if node.value is not None]
    if not returns:
        return ""
    nested = {node.name for node in inside.of(function, ast.FunctionDef, ast.AsyncFunctionDef)}
    local: dict[str, ast.expr] = {}
    for node in inside.of(function, ast.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            local[node.targets[0].id] = node.value
    for node in returns:
        value = node.value
        if isinstance(value, ast.Name) and value.id in local:
            value = local[value.id]
        if isinstance(value, ast.Lambda):
            return "a lambda"
        if isinstance(value, ast.Name) and value.id in nested:
            return f"the nested function `{value.id}`"
        if isinstance(value, ast.Call) and _capwords(value.func) and _holds_lambda(value):
            return "a lambda"
    return ""


def _holds_lambda(node: ast.AST) -> bool:
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, ast.Lambda):
            return True
        pending.extend(ast.iter_child_nodes(current))
    return False


def _capwords(func: ast.AST) -> bool:
    name = dotted(func) or ""
    last = name.rpartition(".")[2]
    return bool(last) and last[0].isupper() and not last.isupper()


def absolute_module(module: str, is_package: bool, level: int, name: str | None) -> str | None:
    """The absolute module of `from <level dots><name> import ...` written in `module`."""
    if level == 0:
        return name or ""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    if name:
        base.append(name)
    return ".".join(base)


# What calling an object runs: a transform's `__call__`, a module's `forward`.
CALLABLE_METHODS: frozenset[str] = frozenset({"__call__", "forward"})

# Methods a DataLoader worker calls on a Dataset; what they call on `self` runs there too.
SAMPLE_METHODS: tuple[str, ...] = ("__getitem__", "__getitems__", "__iter__", "__next__")


def _class_summary(
    inside: _Regions,
    node: ast.ClassDef,
    qualify: Callable[[ast.AST], str],
    hooks: frozenset[str] = frozenset(),
) -> ClassSummary:
    """`hooks`: methods an in-file base's sample methods call on `self`, which run in workers too."""
    from datalint.lint.matchers.common import parameter_defaults  # light; imported when a class is read

    methods = [item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)]
    holds: dict[str, str] = {}
    within: set[tuple[str, str]] = set()
    functions: dict[str, tuple[str, int]] = {}  # `self.loader = load_image`: attr -> (function, line)
    own_calls: dict[str, set[str]] = {}  # method -> methods of self it calls
    attr_calls: dict[str, set[tuple[str, str]]] = {}  # method -> (attr, method) called on self.attr
    for method in methods:
        own = own_calls.setdefault(method.name, set())
        on = attr_calls.setdefault(method.name, set())
        assigns = inside.of(method, ast.Assign)
        local_calls = {  # `reader = create_reader(...)` ... `self.reader = reader`
            target.id: a.value
            for a in assigns
            if isinstance(a.value, ast.Call)
            for target in a.targets
            if isinstance(target, ast.Name)
        }
        defaults = parameter_defaults(method)
        for assign in assigns:
            value = assign.value
            if isinstance(value, ast.Name):
                stored_function = qualify(defaults.get(value.id, value))
                for target in assign.targets:
                    if stored_function and _is_self_attr(target) and isinstance(target, ast.Attribute):
                        functions[target.attr] = (stored_function, assign.lineno)
                value = local_calls.get(value.id, value)
            if not isinstance(value, ast.Call):
                continue
            stored = [t.attr for t in assign.targets if isinstance(t, ast.Attribute) and _is_self_attr(t)]
            if stored and (callee := qualify(value.func)):
                for attribute in stored:
                    holds[attribute] = callee
                    within.update((attribute, inner) for inner in _built_within(value, qualify))
        for call in inside.of(method, ast.Call):
            func = call.func
            if not isinstance(func, ast.Attribute):
                continue
            if _is_self_attr(func):
                own.add(func.attr)
                on.add((func.attr, "__call__"))
            elif isinstance(func.value, ast.Attribute) and _is_self_attr(func.value):
                on.add((func.value.attr, func.attr))
        for subscript in inside.of(method, ast.Subscript):
            if isinstance(subscript.ctx, ast.Load) and _is_self_attr(subscript.value):
                on.add((subscript.value.attr, "__getitem__"))  # `self.reader[index]`
    # Only calls made from the sample methods (and what they call on self) run in workers.
    reached: set[str] = set()
    pending = [name for name in (*SAMPLE_METHODS, *sorted(hooks)) if name in own_calls]
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        pending.extend(callee for callee in own_calls.get(name, ()) if callee in own_calls)
    calls_on = {pair for name in reached for pair in attr_calls.get(name, ())}
    by_name = {m.name: m for m in methods}
    # A class with no sample method of its own fills hooks its base's `__getitem__` calls
    # (`_load_data(index)`): what its methods call may run in workers, `Project.learn` decides.
    running = [by_name[n] for n in sorted(reached)] or [m for m in methods if m.name != "__init__"]
    initializers = [m for m in methods if m.name == "__init__"]
    # A function stored on an attribute (`self.loader = default_loader`) that reached code calls.
    stored_calls = {
        (*functions[attr], name)
        for name in (reached or {m.name for m in running})
        for attr, called in attr_calls.get(name, ())
        if called == "__call__" and attr in functions and attr not in by_name
    }
    return ClassSummary(
        node.name,
        node.lineno,
        tuple(qualify(base) for base in node.bases),
        tuple(m.name for m in methods),
        tuple(sorted(holds.items())),
        tuple(sorted(calls_on)),
        any(m.name == "__init__" and forwards_default_workers(m) for m in methods),
        _sample_parameters(inside, methods),
        tuple(sorted(_indexed_by_sample(inside, by_name.get("__getitem__")))),
        tuple(m.name for m in methods if _returns_filled_list(inside, m)),
        _index_hooks(inside, by_name.get("__getitem__")),
        tuple(
            sorted(
                {
                    (callee, line, method.name)
                    for method in running
                    for callee, line in _qualified_calls(inside, [method], qualify)
                }
                | stored_calls
            )
        ),
        tuple(callee for callee, _line in _qualified_calls(inside, initializers, qualify)),
        tuple(sorted(within)),
    )


def _built_within(call: ast.Call, qualify: Callable[[ast.AST], str]) -> set[str]:
    """The CapWords callees built inside a call's arguments (`Compose([Resize(s), Crop(c)])`)."""
    found = set()
    for part in (*call.args, *(k.value for k in call.keywords)):
        for node in ast.walk(part):
            callee = qualify(node.func) if isinstance(node, ast.Call) else ""
            if callee and callee.rpartition(".")[2][:1].isupper():
                found.add(callee)
    return found


def _in_file_hooks(classes: Mapping[str, ClassSummary], name: str, prefix: str) -> frozenset[str]:
    """For a class with no sample method of its own, the methods its in-file bases' sample methods
    call on `self` (`self.load_data(index)` in a base's `__getitem__`)."""
    info = classes.get(name)
    if info is None or any(method in info.methods for method in SAMPLE_METHODS):
        return frozenset()
    bases = [classes.get(b[len(prefix) :]) for b in info.bases if b.startswith(prefix) and b != prefix + name]
    return frozenset(a for base in bases if base is not None for a, m in base.calls_on if m == "__call__")


def _index_hooks(
    inside: _Regions, getitem: ast.FunctionDef | ast.AsyncFunctionDef | None
) -> tuple[tuple[str, int], ...]:
    """`self.load(index)` in `__getitem__`: (method, the index's position among its arguments)."""
    if getitem is None or len(getitem.args.args) < 2:
        return ()
    index = getitem.args.args[1].arg
    found: set[tuple[str, int]] = set()
    for call in inside.of(getitem, ast.Call):
        if isinstance(call.func, ast.Attribute) and _is_self_attr(call.func):
            for position, argument in enumerate(call.args):
                if isinstance(argument, ast.Name) and argument.id == index:
                    found.add((call.func.attr, position))
    return tuple(sorted(found))


def _indexed_by_sample(inside: _Regions, getitem: ast.FunctionDef | ast.AsyncFunctionDef | None) -> set[str]:
    """The attributes `__getitem__` subscripts with an expression of its index (`self.db[idx]`,
    `self.items[idx][0]`)."""
    if getitem is None or len(getitem.args.args) < 2:
        return set()
    index = getitem.args.args[1].arg
    return {
        node.value.attr
        for node in inside.of(getitem, ast.Subscript)
        if isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Attribute)
        and _is_self_attr(node.value)
        and any(isinstance(n, ast.Name) and n.id == index for n in ast.walk(node.slice))
    }


def _sample_parameters(
    inside: _Regions, methods: list[ast.FunctionDef | ast.AsyncFunctionDef]
) -> tuple[tuple[str, int, str], ...]:
    """`self.samples = samples` in `__init__` with `self.samples[index]` in `__getitem__`."""
    by_name = {m.name: m for m in methods}
    init, getitem = by_name.get("__init__"), by_name.get("__getitem__")
    if init is None or getitem is None or len(getitem.args.args) < 2:
        return ()
    indexed = _indexed_by_sample(inside, getitem)
    positional = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
    parameters = {*positional, *(a.arg for a in init.args.kwonlyargs)}
    stored: dict[str, list[str]] = {}  # attr -> the parameters (or None) assigned to it
    for assign in inside.of(init, ast.Assign, ast.AnnAssign):
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and _is_self_attr(target) and target.attr in indexed:
                name = _sliced_parameter(assign.value, parameters)
                stored.setdefault(target.attr, []).append(name)
    found = []
    for attr, names in sorted(stored.items()):
        if len(names) == 1 and names[0]:  # one assignment, the parameter as given
            position = positional.index(names[0]) if names[0] in positional else -1
            found.append((names[0], position, attr))
    return tuple(found)


def _sliced_parameter(value: ast.expr | None, parameters: set[str]) -> str:
    """The parameter `value` is, or a slice of (`paths[shard:][::shards]` holds the same objects);
    "" for anything else."""
    while isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
        value = value.value
    return value.id if isinstance(value, ast.Name) and value.id in parameters else ""


def _is_self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, including those under `if`/`try` (version and import guards)."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If | ast.Try):
            yield from _top_level(statement.body)
            yield from _top_level(statement.orelse)
            for handler in getattr(statement, "handlers", []):
                yield from _top_level(handler.body)
            yield from _top_level(getattr(statement, "finalbody", []))


def _defines_unpicklable_value(summary: FileSummary, name: str) -> bool:
    return name in summary.unpicklable_values


def _defines_function(summary: FileSummary, name: str) -> bool:
    return name in summary.functions


def _defines_forward(summary: FileSummary, name: str) -> bool:
    return name in summary.forwards


def _defines_factory(summary: FileSummary, name: str) -> bool:
    return name in summary.factory_returns


def _defines_list_return(summary: FileSummary, name: str) -> bool:
    return name in summary.list_returns


def _defines_sampler_or_factory(summary: FileSummary, name: str) -> bool:
    return name in summary.sampler_returns or name in summary.factory_returns


# ---- the summary cache ------------------------------------------------------------------------------


def _parse(raw: bytes, path: str) -> ast.Module:
    """A file's tree from its bytes; a large one decoded first and parsed in pieces (bounded memory)."""
    if len(raw) <= PARSE_WHOLE_CHARACTERS:
        return ast.parse(raw, filename=path)
    from datalint.lint.engine import decode_source

    text, problem = decode_source(raw)
    if problem is not None:
        raise ValueError(problem)
    return parse_source(text, path)


def default_cache_dir() -> Path:
    """`$DATALINT_CACHE_DIR`, else the user cache folder (`$XDG_CACHE_HOME/datalint/summaries`)."""
    explicit = os.environ.get("DATALINT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "datalint" / "summaries"


class SummaryCache:
    """Per-file summaries on disk, keyed by the file's bytes, its module name and datalint's version.

    A key is a hash of exactly what the summary depends on, so an entry is never stale: a changed
    file, a moved file or a new datalint reads a different key. The folder is safe to delete.
    Writes go through a temporary file and a rename, so concurrent runs never read half an entry.
    """

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(data: bytes, module: str, is_package: bool) -> str:
        digest = blake2b(digest_size=20)
        header = f"{__version__}\0{SUMMARY_FORMAT}\0{module}\0{int(is_package)}\0"
        digest.update(header.encode("utf-8", "surrogateescape"))  # a file's name need not be UTF-8
        digest.update(data)
        return digest.hexdigest()

    def _path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> FileSummary | None:
        path = self._path(key)
        if path is None:
            return None
        try:
            summary = FileSummary.from_json(json.loads(path.read_bytes()))
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None  # missing or unreadable: recomputed
        self.hits += 1
        return summary

    def put(self, key: str, summary: FileSummary) -> None:
        path = self._path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, json.dumps(summary.to_json(), separators=(",", ":")), durable=False)
        except OSError:
            pass  # a read-only or full cache folder costs speed, never a result


# ---- the project --------------------------------------------------------------------------------------


@record
class Summarized:
    """A file's summary and the cache key (its bytes, module name, datalint's version) it was made for."""

    key: str
    summary: FileSummary


class Project:
    """The files of one project, summarized on demand; every query is memoized."""

    def __init__(
        self, root: Path | None, cache: SummaryCache | None = None, max_file_size: int | None = None
    ) -> None:
        self.root = root
        self.cache = cache if cache is not None else SummaryCache(None)
        self.max_file_size = max_file_size  # a larger file is not read for another file's question
        self._summaries: dict[Path, FileSummary | None] = {}
        self._keys: dict[Path, str] = {}  # the cache key of each summary
        self._names: dict[Path, tuple[Path, str, Path, bool]] = {}
        self._answers: dict[tuple[Any, ...], Any] = {}  # see `_remembered`
        self._expected: set[Path] = set()  # see `expect`
        self._planned: frozenset[Path] = frozenset()  # every file `expect` named
        self._parsed: dict[Path, tuple[bytes, ast.Module, NodeIndex]] = {}
        self._parsed_size = 0
        self._files: dict[tuple[Path, str], Path | None] = {}
        self._facts: dict[tuple[Path, str], DatasetFact | None] = {}
        self._held: dict[str, WorkerHeld] = {}
        # Project classes that a class of a linted file derives from (abstract bases are not pitfalls).
        self.subclassed: set[str] = set()
        # Everything the linted files import (qualified names and modules): a class or module not in
        # it is used by no other linted file.
        self.imported: set[str] = set()
        # What the linted files name in their imports, exactly (`mod.Class`, a module imported whole,
        # a star-imported module): `from mod import A` names A, not mod's other classes.
        self.named: set[str] = set()
        # Project classes that a DataLoader of a linted file with workers reads, built directly or
        # through factory functions (`build_dataset()` returning `build_panoptic()` returning
        # `Panoptic(...)`).
        self.loaded: set[str] = set()
        # Qualified calls that module-level statements and top-level functions of the linted files make.
        self.top_calls: set[str] = set()
        self._handed: dict[str, tuple[HandOver, ...]] = {}  # see `handed_to_datasets`
        # How the linted files first use what each function of another file returns (`result_uses`).
        self._result_uses: dict[str, set[str]] = {}
        self._learnt: set[Path] = set()
        self._log: list[tuple[tuple[str, ...], Any]] | None = None

    def __repr__(self) -> str:
        return f"Project(root={self.root!r}, cache={self.cache!r}, max_file_size={self.max_file_size!r})"

    @classmethod
    def for_paths(
        cls, paths: Iterable[Path | str], cache_dir: Path | None = None, max_file_size: int | None = None
    ) -> Project:
        return cls(find_root(paths), SummaryCache(cache_dir), max_file_size)

    # -- files and summaries

    def source_roots(self, importer_root: Path) -> tuple[Path, ...]:
        """Where absolute imports are looked up from a file importable from `importer_root`."""
        roots = [importer_root]
        if self.root is not None:
            # A folder without `__init__.py` is a namespace package to a script run from a folder
            # above it (`from data.pseudo_label import ...` in `trainer/craft/data/dataset.py`).
            # Only a few levels up: a script sits that near its namespace packages, and a tree
            # 1,000 folders deep would otherwise look every import up in every folder above it.
            parent = importer_root.parent
            for _ in range(_MAX_SCRIPT_LEVELS):
                if parent == importer_root or parent == self.root or not parent.is_relative_to(self.root):
                    break
                roots.append(parent)
                importer_root, parent = parent, parent.parent
            roots.extend((self.root, self.root / "src"))
        return tuple(dict.fromkeys(roots))

    def file_of(self, module: str, importer_root: Path) -> Path | None:
        """The file that defines `module`, inside the project (never site-packages)."""
        key = (importer_root, module)
        if key in self._files:
            return self._files[key]
        found = None
        if module:
            relative = Path(*module.split("."))
            for folder in self.source_roots(importer_root):
                if not self._inside(folder):
                    continue
                for candidate in (folder / relative / "__init__.py", folder / relative.with_suffix(".py")):
                    if candidate.is_file():
                        found = candidate.resolve()
                        break
                if found is not None:
                    break
        self._files[key] = found
        return found

    def import_names(self, path: Path) -> tuple[str, ...]:
        """The dotted names other files of the project may import `path` by: its package name, and
        its path from the project root or `src/` through folders without `__init__.py` (a
        namespace package: `from data_utils.reader import Reader` for data_utils/reader.py)."""
        resolved, module, _root, is_package = self.name_of(path)
        names = [module] if module else []
        if self.root is not None:
            for folder in (self.root, self.root / "src"):
                try:
                    parts = resolved.relative_to(folder).with_suffix("").parts
                except ValueError:
                    continue
                parts = parts[:-1] if is_package else parts
                if parts and all(part.isidentifier() for part in parts):
                    names.append(".".join(parts))
        return tuple(dict.fromkeys(names))

    def _inside(self, folder: Path) -> bool:
        if self.root is None:
            return True
        try:
            folder.resolve().relative_to(self.root)
        except ValueError:
            return False
        return True

    def summary_of(
        self,
        path: Path,
        data: bytes | None = None,
        tree: ast.Module | None = None,
        index: NodeIndex | None = None,
    ) -> FileSummary | None:
        """The file's summary: from memory, from the cache (same bytes), or parsed now.

        `tree` (and its `index`, see `summarize`) is the file already parsed from `data`: a
        linted file's summary comes from the tree its rules read, so it is parsed once.
        """
        path, module, _root, is_package = self.name_of(path)
        if path in self._summaries and data is None:
            return self._summaries[path]
        try:
            raw = data if data is not None else read_regular_file(path, self.max_file_size)
        except OSError:  # unreadable, not a regular file, or over max-file-size
            self._summaries[path] = None
            return None
        key = SummaryCache.key(raw, module, is_package)
        if self._keys.get(path) == key:
            return self._summaries[path]  # summarized already, from the same bytes
        summary = self.cache.get(key)
        if summary is None:
            if tree is None:
                try:
                    tree = _parse(raw, str(path))
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    self._summaries[path] = None
                    return None
                index = index_tree(tree)
                self._hold_parsed(path, raw, tree, index)
            summary = summarize(tree, module, is_package, index)
            self.cache.put(key, summary)
        self._summaries[path] = summary
        self._keys[path] = key
        return summary

    def knows_summary(self, path: Path) -> bool:
        """Whether `path`'s summary is in memory or can be read back from the cache (it is then
        kept): a file that needs no parse for it."""
        resolved, module, _root, is_package = self.name_of(path)
        if resolved in self._summaries:
            return True
        try:
            raw = read_regular_file(resolved, self.max_file_size)
        except OSError:
            return False  # summary_of says None for it, wherever it is asked
        key = SummaryCache.key(raw, module, is_package)
        summary = self.cache.get(key)
        if summary is None:
            return False
        self._summaries[resolved] = summary
        self._keys[resolved] = key
        return True

    def summarized(self, path: Path) -> Summarized | None:
        """`summary_of(path)` with the cache key it was made for, to hand to another process's
        project (`adopt`); None for a file with no summary (unreadable, not Python)."""
        summary = self.summary_of(path)
        if summary is None:
            return None
        return Summarized(self._keys[self.name_of(path)[0]], summary)

    def adopt(self, path: Path, summarized: Summarized) -> None:
        """Take the summary another process made of `path` (`summarized`), as if made here."""
        resolved = self.name_of(path)[0]
        self._summaries[resolved] = summarized.summary
        self._keys[resolved] = summarized.key

    def expect(self, paths: Iterable[Path]) -> None:
        """The files (resolved) this run lints, one after another. A tree parsed to answer another
        file's question is then held, up to `PARSED_AHEAD_BYTES` of source, until the linter takes
        it (`take_parsed`): linted next, such a file is not parsed twice."""
        self._expected = set(paths)
        self._planned = frozenset(self._expected)

    def parsed_ahead(self) -> list[Path]:
        """The expected files whose trees are held, oldest first."""
        return list(self._parsed)

    def take_parsed(self, path: Path, data: bytes | None = None) -> tuple[ast.Module, NodeIndex] | None:
        """The held tree and index of `path`, if it was parsed from `data`; either way, no longer held."""
        resolved = self.name_of(path)[0]
        self._expected.discard(resolved)
        held = self._parsed.pop(resolved, None)
        if held is None:
            return None
        raw, tree, index = held
        self._parsed_size -= len(raw)
        return (tree, index) if raw == data else None

    def _hold_parsed(self, path: Path, raw: bytes, tree: ast.Module, index: NodeIndex) -> None:
        if path in self._expected and self._parsed_size + len(raw) <= PARSED_AHEAD_BYTES:
            self._parsed[path] = (raw, tree, index)
            self._parsed_size += len(raw)

    def name_of(self, path: Path) -> tuple[Path, str, Path, bool]:
        """(resolved path, dotted name, the folder it is importable from, is a package's
        `__init__.py`): `module_name`, asked once per file and run."""
        known = self._names.get(path)
        if known is None:
            resolved = path.resolve()
            module, root, is_package = module_name(resolved)
            known = self._names[path] = self._names[resolved] = (resolved, module, root, is_package)
        return known

    # -- resolution

    def _remembered(self, question: tuple[Any, ...], answer: Callable[[], Any]) -> Any:
        """The answer to a query on the project, worked out once per run: summaries do not change."""
        try:
            return self._answers[question]
        except KeyError:
            found = self._answers[question] = answer()
            return found

    def find_class(self, qualname: str, importer_root: Path, depth: int = 0) -> ClassRef | None:
        """The project class a qualified name refers to, through re-exports and aliases."""
        return self._remembered(
            ("class", qualname, importer_root, depth),
            lambda: self._find_class(qualname, importer_root, depth),
        )

    def _find_class(self, qualname: str, importer_root: Path, depth: int) -> ClassRef | None:
        if not qualname or depth > _MAX_DEPTH:
            return None
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module, name, rest = ".".join(parts[:cut]), parts[cut], parts[cut + 1 :]
            path = self.file_of(module, importer_root)
            if path is None:
                continue
            summary = self.summary_of(path)
            if summary is None:
                return None
            root = self.name_of(path)[2]
            return self._member(summary, path, root, name, rest, depth)
        return None

    def _member(
        self, summary: FileSummary, path: Path, root: Path, name: str, rest: list[str], depth: int
    ) -> ClassRef | None:
        tail = "." + ".".join(rest) if rest else ""
        if not rest and name in summary.classes:
            qualname = f"{summary.module}.{name}" if summary.module else name
            return ClassRef(qualname, path, summary.classes[name], root)
        target = summary.imports.get(name) or summary.aliases.get(name)
        if target is not None:
            if target == f"{summary.module}.{name}":
                return None  # `from . import x` of itself: a submodule, handled by file_of
            return self.find_class(target + tail, root, depth + 1)
        for star in summary.star_imports:
            found = self.find_class(f"{star}.{name}{tail}", root, depth + 1)
            if found is not None:
                return found
        return None

    def unpicklable_return(self, qualname: str, importer_root: Path) -> tuple[Link, str] | None:
        """(where, what) when the project function `qualname` returns an unpicklable callable."""
        return self._remembered(
            ("unpicklable", qualname, importer_root),
            lambda: self._unpicklable_return(qualname, importer_root),
        )

    def _unpicklable_return(self, qualname: str, importer_root: Path) -> tuple[Link, str] | None:
        return self._recorded(qualname, importer_root, lambda summary: summary.unpicklable_returns)

    def list_return(self, qualname: str, importer_root: Path) -> Link | None:
        """Where the project function `qualname` is, when it returns a list it fills from data read."""
        return self._remembered(
            ("list", qualname, importer_root), lambda: self._list_return(qualname, importer_root)
        )

    def _list_return(self, qualname: str, importer_root: Path) -> Link | None:
        found = self._defining(qualname, importer_root, _defines_list_return)
        if found is None:
            return None
        summary, name, path = found
        return Link(name, str(path), summary.list_returns[name])

    def tuple_list_return(self, qualname: str, importer_root: Path) -> tuple[Link, tuple[int, ...]] | None:
        """Where the project function `qualname` is and which positions of the tuple it returns hold
        lists built from data read; None when it is no such function."""
        return self._remembered(
            ("tuple list", qualname, importer_root), lambda: self._tuple_list_return(qualname, importer_root)
        )

    def _tuple_list_return(self, qualname: str, importer_root: Path) -> tuple[Link, tuple[int, ...]] | None:
        return self._recorded(qualname, importer_root, lambda summary: summary.tuple_list_returns)

    def _recorded(
        self,
        qualname: str,
        importer_root: Path,
        table: Callable[[FileSummary], Mapping[str, tuple[int, Fact]]],
    ) -> tuple[Link, Fact] | None:
        """(where, fact) of the project function `qualname` in a summary table of name -> (line,
        fact), found through re-exports and aliases; None when no file records it."""
        found = self._defining(qualname, importer_root, lambda summary, name: name in table(summary))
        if found is None:
            return None
        summary, name, path = found
        line, fact = table(summary)[name]
        return Link(name, str(path), line), fact

    def sampler_return(
        self, qualname: str, importer_root: Path, depth: int = 0
    ) -> tuple[Link, str, bool] | None:
        """(where the sampler is built, its qualified name, whether it shuffles) when the project
        function `qualname` returns a loader with that sampler, itself or through the factories it
        returns the result of (`return make_loader(...)` on one of its branches)."""
        return self._remembered(
            ("sampler", qualname, importer_root, depth),
            lambda: self._sampler_return(qualname, importer_root, depth),
        )

    def _sampler_return(
        self, qualname: str, importer_root: Path, depth: int
    ) -> tuple[Link, str, bool] | None:
        found = self._defining(qualname, importer_root, _defines_sampler_or_factory)
        if found is None or depth > _MAX_DEPTH:
            return None
        summary, name, path = found
        if name in summary.sampler_returns:
            line, sampler, shuffles = summary.sampler_returns[name]
            return Link(name, str(path), line), sampler, shuffles
        root = self.name_of(path)[2]
        for callee in summary.factory_returns.get(name, ()):
            inner = self.sampler_return(callee, root, depth + 1)
            if inner is not None:
                return inner
        return None

    def dataset_forward(
        self, qualname: str, importer_root: Path
    ) -> tuple[Link, tuple[str, ...], tuple[tuple[str, str, str], ...]] | None:
        """For a project function that hands its parameters to a Dataset constructor: where it is,
        its positional parameters and the (dataset class, keyword, parameter) it hands on."""
        return self._remembered(
            ("forward", qualname, importer_root), lambda: self._dataset_forward(qualname, importer_root)
        )

    def _dataset_forward(
        self, qualname: str, importer_root: Path
    ) -> tuple[Link, tuple[str, ...], tuple[tuple[str, str, str], ...]] | None:
        found = self._defining(qualname, importer_root, _defines_forward)
        if found is None:
            return None
        summary, name, path = found
        line, positional, handed = summary.forwards[name]
        root = self.name_of(path)[2]
        to_datasets = tuple(h for h in handed if self.dataset_fact(h[0], root) is not None)
        return (Link(name, str(path), line), positional, to_datasets) if to_datasets else None

    def _defining(
        self,
        qualname: str,
        importer_root: Path,
        defines: Callable[[FileSummary, str], bool],
        depth: int = 0,
    ) -> tuple[FileSummary, str, Path] | None:
        """(summary, name, path) of the project file that defines the function `qualname`, through
        re-exports and aliases; `defines(summary, name)` says whether a file's summary has it."""
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module, name = ".".join(parts[:cut]), parts[cut]
            path = self.file_of(module, importer_root)
            if path is None:
                continue
            summary = self.summary_of(path)
            if summary is None or cut != len(parts) - 1:
                return None
            if defines(summary, name):
                return summary, name, path
            target = summary.imports.get(name) or summary.aliases.get(name)
            if target and depth < _MAX_DEPTH and target != f"{summary.module}.{name}":
                return self._defining(target, self.name_of(path)[2], defines, depth + 1)
            return None
        return None

    def project_bases(self, qualname: str, importer_root: Path) -> tuple[ClassRef, ...]:
        """The project class `qualname` and the project classes it derives from, through any depth,
        nearest first (each once); empty when `qualname` is not a project class."""
        return self._remembered(
            ("bases", qualname, importer_root), lambda: self._project_bases(qualname, importer_root)
        )

    def _project_bases(self, qualname: str, importer_root: Path) -> tuple[ClassRef, ...]:
        found: list[ClassRef] = []
        pending = [(qualname, importer_root, 0)]
        while pending:
            name, root, depth = pending.pop(0)
            ref = self.find_class(name, root) if depth <= _MAX_DEPTH else None
            if ref is None or any(r.qualname == ref.qualname for r in found):
                continue
            found.append(ref)
            pending.extend((base, ref.source_root, depth + 1) for base in ref.summary.bases if base)
        return tuple(found)

    def sample_parameters(self, qualname: str, importer_root: Path) -> ClassRef | None:
        """The project Dataset class `qualname`, when its `__init__` keeps a parameter that its
        `__getitem__` indexes per sample (`ClassSummary.sample_parameters`)."""
        ref = self.find_class(qualname, importer_root)
        if ref is None or not ref.summary.sample_parameters:
            return None
        return ref if self.dataset_fact(ref.qualname, ref.source_root) is not None else None

    def dataset_fact(self, qualname: str, importer_root: Path) -> DatasetFact | None:
        """Whether the class named `qualname` is a Dataset, through any depth of inheritance."""
        return self._fact(qualname, importer_root, 0, frozenset())

    def _fact(
        self, qualname: str, importer_root: Path, depth: int, seen: frozenset[str]
    ) -> DatasetFact | None:
        known = known_dataset_bases()
        qualname = canonical(qualname)
        if qualname in known:
            return DatasetFact(known[qualname], qualname)
        key = (importer_root, qualname)
        if key in self._facts:
            return self._facts[key]
        self._facts[key] = None  # a cycle resolves to unknown
        result = None
        ref = self.find_class(qualname, importer_root) if depth <= _MAX_DEPTH else None
        if ref is not None and ref.qualname not in seen:
            if ref.qualname in known:
                result = DatasetFact(known[ref.qualname], ref.qualname)
            else:
                link = Link(ref.summary.name, str(ref.path), ref.summary.line)
                for base in ref.summary.bases:
                    inner = (
                        self._fact(base, ref.source_root, depth + 1, seen | {ref.qualname}) if base else None
                    )
                    if inner is not None:
                        result = DatasetFact(inner.kind, inner.base, (link, *inner.chain))
                        if inner.is_iterable:
                            break
        self._facts[key] = result
        return result

    def loader_fact(self, qualname: str, importer_root: Path, depth: int = 0) -> bool | None:
        """Whether the project class `qualname` derives from torch's DataLoader: None when it does
        not (or is unknown); else whether it keeps DataLoader's own signature (no `__init__` of its
        own or of a project class in between), so its arguments mean what DataLoader's do."""
        return self._remembered(
            ("loader", qualname, importer_root, depth),
            lambda: self._loader_fact(qualname, importer_root, depth),
        )

    def _loader_fact(self, qualname: str, importer_root: Path, depth: int) -> bool | None:
        ref = self.find_class(qualname, importer_root) if depth <= _MAX_DEPTH else None
        if ref is None:
            return None
        own_init = "__init__" in ref.summary.methods
        for base in ref.summary.bases:
            if canonical(base) == LOADER_CLASS:
                return not own_init
            inner = self.loader_fact(base, ref.source_root, depth + 1) if base else None
            if inner is not None:
                return inner and not own_init
        return None

    def loader_default_workers(self, qualname: str, importer_root: Path, depth: int = 0) -> bool:
        """Whether every `__init__` between the project loader class `qualname` and torch's
        DataLoader leaves `num_workers` to DataLoader (default 0 when a call leaves it out)."""
        ref = self.find_class(qualname, importer_root) if depth <= _MAX_DEPTH else None
        if ref is None:
            return False
        if "__init__" in ref.summary.methods and not ref.summary.default_workers:
            return False
        for base in ref.summary.bases:
            if canonical(base) == LOADER_CLASS:
                return True
            if base and self.loader_fact(base, ref.source_root, depth + 1) is not None:
                return self.loader_default_workers(base, ref.source_root, depth + 1)
        return False

    def method_names(self, qualname: str, importer_root: Path, depth: int = 0) -> frozenset[str]:
        """Methods a project class defines or inherits from other project classes (unknown: none)."""
        return self._remembered(
            ("methods", qualname, importer_root, depth),
            lambda: self._method_names(qualname, importer_root, depth),
        )

    def _method_names(self, qualname: str, importer_root: Path, depth: int) -> frozenset[str]:
        ref = self.find_class(qualname, importer_root) if depth <= _MAX_DEPTH else None
        if ref is None:
            return frozenset()
        names = set(ref.summary.methods)
        for base in ref.summary.bases:
            if base:
                names |= self.method_names(base, ref.source_root, depth + 1)
        return frozenset(names)

    # -- classes held by datasets of other files

    def note_dataset_holdings(self, path: Path, dataset_classes: Iterable[str]) -> None:
        """Record the project classes that datasets of `path` construct, store and call into."""
        summary = self.summary_of(path)
        if summary is None:
            return
        resolved, _module, root, _package = self.name_of(path)
        for name in dataset_classes:
            info = summary.classes.get(name)
            if info is None:
                continue
            called: dict[str, set[str]] = {}
            for attribute, method in info.calls_on:
                called.setdefault(attribute, set()).add(method)
            held = [(attr, callee, frozenset(called.get(attr, ()))) for attr, callee in info.holds]
            # A class built inside a held value (a transform in a Compose) is called when it is.
            held += [(attribute, callee, CALLABLE_METHODS) for attribute, callee in info.holds_within]
            for attribute, callee, methods in held:
                if not methods or not called.get(attribute):
                    continue
                for ref in self._classes_built_by(callee, root):
                    link = Link(name, str(path), info.line)
                    kept = methods & set(ref.summary.methods)
                    self._follow_held_calls(ref, kept, link)
                    if ref.path == resolved or not kept:
                        continue  # in the same file: the file's own analysis covers it
                    holder = f"{name} in {path}:{info.line}"
                    previous = self._held.get(ref.qualname)
                    merged = kept | (previous.methods if previous else set())
                    self._held[ref.qualname] = WorkerHeld(frozenset(merged), holder, link)

    def _follow_held_calls(self, ref: ClassRef, methods: frozenset[str], link: Link) -> None:
        """The top-level functions the held methods of a class call run in the workers too."""
        base = ref.qualname.rpartition(".")[2]
        seen: set[str] = set()
        for callee, line, method in ref.summary.worker_calls:
            if method in methods:
                calls = ((callee, line),)
                self._follow_worker_calls(f"{base}.{method}", ref.path, ref.source_root, calls, (link,), seen)

    def _classes_built_by(self, callee: str, root: Path) -> list[ClassRef]:
        """The project class `callee` names, or the classes a project factory function of that
        name returns (`create_reader()` returning one of several readers); unknown is empty."""
        ref = self.find_class(callee, root)
        if ref is not None:
            return [ref]
        found = self._defining(callee, root, _defines_factory)
        if found is None:
            return []
        summary, name, path = found
        factory_root = self.name_of(path)[2]
        built = (self.find_class(c, factory_root) for c in summary.factory_returns[name])
        return [ref for ref in built if ref is not None]

    def note_subclasses(self, path: Path) -> None:
        """Record the project classes that the classes of `path` derive from, and what it imports."""
        summary = self.summary_of(path)
        if summary is None:
            return
        for target in summary.imports.values():
            self.imported.add(target)
            self.imported.add(target.rpartition(".")[0])  # `from pkg.mod import X`: pkg.mod is used
        self.imported.update(summary.star_imports)
        self.named.update(summary.imports.values(), summary.star_imports)
        root = self.name_of(path)[2]
        for info in summary.classes.values():
            for base in info.bases:
                ref = self.find_class(base, root) if base else None
                if ref is not None:
                    self.subclassed.add(ref.qualname)

    def held_by_dataset(self, qualname: str) -> WorkerHeld | None:
        return self._logged(("held", qualname), self._held.get(qualname))

    def note_inherited_calls(self, path: Path, dataset_classes: Iterable[str]) -> None:
        """Record the methods of bases in other files that the sample methods of the datasets of
        `path` call on `self` (`self.load(path)` of a base's `load`): they run in the workers."""
        summary = self.summary_of(path)
        if summary is None:
            return
        resolved, _module, root, _package = self.name_of(path)
        prefix = f"{summary.module}." if summary.module else ""
        for name in dataset_classes:
            info = summary.classes.get(name)
            if info is None:
                continue
            called = {a for a, m in info.calls_on if m == "__call__" and a not in info.methods}
            for ref in self.project_bases(prefix + name, root)[1:] if called else ():
                inherited = called & set(ref.summary.methods)
                called -= inherited
                if not inherited or ref.path.resolve() == resolved or ref.qualname in self._held:
                    continue
                link = Link(name, str(path), info.line)
                holder = f"{name} in {path}:{info.line}"
                self._held[ref.qualname] = WorkerHeld(frozenset(inherited), holder, link, (link,))

    def note_worker_calls(self, path: Path, dataset_classes: Iterable[str]) -> None:
        """Record the top-level functions of other files that the worker code of the datasets of
        `path` calls, and those they call in turn: they run in the workers too."""
        summary = self.summary_of(path)
        if summary is None:
            return
        root = self.name_of(path)[2]
        prefix = f"{summary.module}." if summary.module else ""
        for name in dataset_classes:
            info = summary.classes.get(name)
            if info is None or not info.worker_calls:
                continue
            running = self._running_methods(info, prefix + name, root)
            seen: set[str] = set()
            for callee, line, method in info.worker_calls:
                if running is None or method in running:
                    self._follow_worker_calls(f"{name}.{method}", path, root, ((callee, line),), (), seen)

    def _running_methods(self, info: ClassSummary, qualname: str, root: Path) -> frozenset[str] | None:
        """For a class with no sample method of its own, the methods its bases' sample methods call
        on `self` (its hooks); None when it has its own (its worker calls are from those already)."""
        if any(method in info.methods for method in SAMPLE_METHODS):
            return None
        bases = self.project_bases(qualname, root)[1:]
        return frozenset(a for ref in bases for a, m in ref.summary.calls_on if m == "__call__")

    def _follow_worker_calls(
        self,
        caller: str,
        path: Path,
        root: Path,
        calls: tuple[tuple[str, int], ...],
        chain: tuple[Link, ...],
        seen: set[str],
    ) -> None:
        for callee, line in calls:
            found = self._defining(callee, root, _defines_function)
            if found is None:
                continue
            summary, name, defined_in = found
            qualname = f"{summary.module}.{name}" if summary.module else name
            if qualname in seen:
                continue
            seen.add(qualname)
            hops = (*chain, Link(caller, str(path), line))
            if defined_in.resolve() != path.resolve() and qualname not in self._held:
                # The first chain found is kept: a rerun then finds the same one.
                holder = f"{hops[0].name} in {hops[0].path}:{hops[0].line}"
                self._held[qualname] = WorkerHeld(frozenset({"__call__"}), holder, hops[-1], hops)
            if len(hops) < _MAX_CALL_HOPS:
                inner = summary.functions[name][1]
                self._follow_worker_calls(name, defined_in, self.name_of(defined_in)[2], inner, hops, seen)

    def note_hand_overs(self, path: Path) -> None:
        """Record the unpicklable module-level values of other files that `path` hands to Dataset
        constructors (`Images(paths, transform=normalize)` with `normalize = lambda ...` elsewhere)."""
        summary = self.summary_of(path)
        if summary is None:
            return
        root = self.name_of(path)[2]
        for value, callee, keyword, line, built in summary.handed:
            to_loader = callee.endswith(".DataLoader") or self.loader_fact(callee, root) is not None
            if not to_loader and self.dataset_fact(callee, root) is None:
                continue
            if built and to_loader:
                continue
            if built:
                self._note_handed_class(value, callee, path, root, line)
                continue
            found = self._defining(value, root, _defines_unpicklable_value)
            if found is None:
                continue
            defining, name, _defined_in = found
            qualname = f"{defining.module}.{name}" if defining.module else name
            given = HandOver(keyword, Link(callee.rpartition(".")[2], str(path), line), to_loader)
            if given not in self._handed.get(qualname, ()):
                self._handed[qualname] = (*self._handed.get(qualname, ()), given)

    def _note_handed_class(self, value: str, dataset: str, path: Path, root: Path, line: int) -> None:
        """A callable project class built as an argument of a Dataset's constructor (a transform):
        its `__call__` or `forward` runs in the Dataset's workers."""
        ref = self.find_class(value, root)
        if ref is None or ref.qualname in self._held:
            return
        methods = frozenset(ref.summary.methods) & {"__call__", "forward"}
        if methods:
            name = dataset.rpartition(".")[2]
            holder = f"{name} (given it at {path}:{line})"
            self._held[ref.qualname] = WorkerHeld(methods, holder, Link(name, str(path), line))

    def handed_to_datasets(self, qualname: str) -> tuple[HandOver, ...]:
        """Where linted files hand the module-level value `qualname` to a Dataset's constructor."""
        return self._logged(("handed", qualname), self._handed.get(qualname, ()))

    def result_uses(self, qualname: str) -> frozenset[str]:
        """How the other linted files first use what the function `qualname` returns: "method:convert",
        "call:numpy.array", "" for anything else; empty when no other linted file calls it."""
        return self._logged(("uses", qualname), frozenset(self._result_uses.get(qualname, ())))

    def called_at_module_level(self, qualname: str) -> bool:
        """Whether a module-level statement or a top-level function of a linted file calls
        `qualname` (a script's `cv2.setNumThreads(0)`, its `main()`'s, a `worker_init_fn`'s)."""
        return self._logged(("top-call", qualname), qualname in self.top_calls)

    def _loaded_classes(self, callee: str, root: Path, depth: int) -> list[ClassRef]:
        """The project classes `callee` builds: itself, or what the factories it names return."""
        ref = self.find_class(callee, root)
        if ref is not None:
            return [ref]
        found = self._defining(callee, root, _defines_factory) if depth <= 4 else None
        if found is None:
            return []
        summary, name, path = found
        factory_root = self.name_of(path)[2]
        inner = summary.factory_returns[name]
        return [built for callee in inner for built in self._loaded_classes(callee, factory_root, depth + 1)]

    def is_loaded(self, qualname: str) -> bool:
        """Whether a DataLoader of a linted file, with workers, reads instances of the class `qualname`."""
        return self._logged(("loaded", qualname), qualname in self.loaded)

    def is_subclassed(self, qualname: str) -> bool:
        return self._logged(("subclassed", qualname), qualname in self.subclassed)

    def is_imported(self, qualname: str, module: str) -> bool:
        answer = qualname in self.imported or module in self.imported
        return self._logged(("imported", qualname, module), answer)

    def is_named(self, qualname: str, module: str) -> bool:
        """Whether a linted file imports the class by name, or its module whole (or with `*`)."""
        answer = qualname in self.named or module in self.named
        return self._logged(("named", qualname, module), answer)

    def knows_folder(self, folder: Path) -> bool:
        """Whether every Python file of `folder` is read in this run, so all that the folder's
        scripts import is known (a run on one changed file knows only that file)."""
        answer = self._knows(folder)
        return self._logged(("folder", str(folder)), answer)

    def _knows(self, folder: Path) -> bool:
        try:
            known = self._learnt | self._planned  # a planned file is learnt before the run ends
            return all(path.resolve() in known for path in Path(folder).glob("*.py"))
        except OSError:
            return False

    # -- one pass over many files: facts learnt as files are read, answers checked at the end

    def learn(
        self,
        path: Path,
        data: bytes | None = None,
        tree: ast.Module | None = None,
        index: NodeIndex | None = None,
    ) -> None:
        """Add what `path` tells about other files (what it subclasses, imports and holds)."""
        resolved, _module, root, _package = self.name_of(path)
        if resolved in self._learnt:
            return
        self._learnt.add(resolved)
        summary = self.summary_of(path, data, tree, index)
        if summary is None:
            return
        self.note_subclasses(path)
        self.top_calls.update(summary.top_calls)
        self.top_calls.update(callee for _line, calls in summary.functions.values() for callee, _at in calls)
        if summary.handed:
            self.note_hand_overs(path)
        for callee, use in summary.result_uses:
            self._result_uses.setdefault(callee, set()).add(use)
        for callee in summary.loaded_callees:
            self.loaded.update(ref.qualname for ref in self._loaded_classes(callee, root, 0))
        if not summary.classes:
            return
        prefix = f"{summary.module}." if summary.module else ""
        datasets = [
            name
            for name, info in summary.classes.items()
            if (info.holds or info.worker_calls or info.calls_on)
            and self.dataset_fact(prefix + name, root) is not None
        ]
        if datasets:
            self.note_dataset_holdings(path, datasets)
            self.note_worker_calls(path, datasets)
            self.note_inherited_calls(path, datasets)

    def start_log(self) -> None:
        """Record the cross-file answers the next file's rules rely on."""
        self._log = []

    def stop_log(self) -> list[tuple[tuple[str, ...], Any]]:
        log, self._log = self._log or [], None
        return log

    def still_true(self, log: list[tuple[tuple[str, ...], Any]]) -> bool:
        """Whether every recorded answer is still what the project says now (else lint again)."""
        for question, answer in log:
            kind = question[0]
            if kind == "held":
                now: Any = self._held.get(question[1])
            elif kind == "subclassed":
                now = question[1] in self.subclassed
            elif kind == "loaded":
                now = question[1] in self.loaded
            elif kind == "named":
                now = question[1] in self.named or question[2] in self.named
            elif kind == "folder":
                now = self._knows(Path(question[1]))
            elif kind == "top-call":
                now = question[1] in self.top_calls
            elif kind == "handed":
                now = self._handed.get(question[1], ())
            elif kind == "uses":
                now = frozenset(self._result_uses.get(question[1], ()))
            else:
                now = question[1] in self.imported or question[2] in self.imported
            if now != answer:
                return False
        return True

    def _logged(self, question: tuple[str, ...], answer: Any) -> Any:
        if self._log is not None:
            self._log.append((question, answer))
        return answer


def summaries_of(project: Project, paths: Iterable[Path]) -> dict[Path, FileSummary]:
    """Summaries of many files (cached ones read back, the rest parsed), for a whole-tree run."""
    found: dict[Path, FileSummary] = {}
    for path in paths:
        summary = project.summary_of(path)
        if summary is not None:
            found[path.resolve()] = summary
    return found


def peak_rss_mib() -> float:
    """This process's peak resident memory in MiB (Linux and macOS; 0 where unknown)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024

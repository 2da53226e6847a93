"""Dataset specs: "mymod:ds", "mymod:make_ds(split='train')", "path/to/file.py:ds" -> a dataset.

A spec names where a dataset lives rather than carrying the dataset itself, so the scanner never
has to pickle it. Every problem resolving a spec is a `SpecError` (exit code 2) whose message
names the spec, what went wrong and what to try next.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.errors import UsageError
from datalint.text import exception_text

SPEC_FORMS = "module:attribute, module:factory(...) or path/to/file.py:attribute"


class SpecError(UsageError):
    """A dataset spec that cannot be turned into a scannable dataset."""


@dataclass(frozen=True)
class Spec:
    """A parsed spec: where the object lives and how to get it."""

    text: str
    module: str | None  # dotted module name, or None when `path` is set
    path: Path | None  # a .py file
    attribute: tuple[str, ...]  # dotted attribute path inside the module
    call: tuple[tuple[Any, ...], tuple[tuple[str, Any], ...]] | None  # (args, kwargs) of a factory call

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else str(self.module)


def parse_spec(text: str) -> Spec:
    """Split a spec into module or file, attribute path and literal call arguments."""
    where, sep, target = _split_spec(text)
    if not sep or not where or not target.strip():
        raise SpecError(f"dataset spec {text!r} must have the form {SPEC_FORMS}")
    try:
        expr = ast.parse(target.strip(), mode="eval").body
    except SyntaxError:
        raise SpecError(
            f"dataset spec {text!r}: {target!r} is neither an attribute name nor a call with literal "
            "arguments"
        ) from None
    call = None
    if isinstance(expr, ast.Call):
        call = _literal_arguments(text, expr)
        expr = expr.func
    attribute = _attribute_path(text, expr)
    if where.endswith(".py") or os.sep in where or "/" in where:
        return Spec(text, None, Path(where), attribute, call)
    return Spec(text, where, None, attribute, call)


def _split_spec(text: str) -> tuple[str, str, str]:
    # A file path may itself contain ':' (rare); its ".py:" marks the split. A module name never does.
    marker = text.find(".py:")
    if marker >= 0:
        return text[: marker + 3], ":", text[marker + 4 :]
    return text.partition(":")


def _attribute_path(text: str, expr: ast.expr) -> tuple[str, ...]:
    if isinstance(expr, ast.Name):
        return (expr.id,)
    if isinstance(expr, ast.Attribute):
        return (*_attribute_path(text, expr.value), expr.attr)
    raise SpecError(f"dataset spec {text!r}: after ':' expected a name such as ds or make_ds(...)")


def _literal_arguments(text: str, call: ast.Call) -> tuple[tuple[Any, ...], tuple[tuple[str, Any], ...]]:
    try:
        args = tuple(ast.literal_eval(arg) for arg in call.args)
        kwargs = tuple((kw.arg or "", ast.literal_eval(kw.value)) for kw in call.keywords)
    except ValueError:
        raise SpecError(
            f"dataset spec {text!r}: factory arguments must be literals (numbers, strings, lists, "
            "dicts, True/False/None); build anything else inside the factory"
        ) from None
    if any(not name for name, _ in kwargs):
        raise SpecError(f"dataset spec {text!r}: **kwargs is not supported in a spec")
    return args, kwargs


def resolve_spec(text: str) -> Any:
    """Import the module or file a spec names and return the object (calling a factory)."""
    spec = parse_spec(text)
    module = _import_file(spec) if spec.path is not None else _import_module(spec)
    target: Any = module
    for depth, name in enumerate(spec.attribute):
        if not hasattr(target, name):
            owner = spec.location if depth == 0 else ".".join(spec.attribute[:depth])
            raise SpecError(
                f"dataset spec {text!r}: {owner} has no attribute {name!r}{_close_names(target, name)}"
            )
        target = getattr(target, name)
    if spec.call is not None:
        return _call_factory(spec, target)
    if inspect.isroutine(target) or inspect.isclass(target):
        raise SpecError(f"dataset spec {text!r} {_call_hint(spec, target)}")
    return target


def _call_hint(spec: Spec, factory: Any) -> str:
    """`names the function make_ds, not a dataset; add () to call it: mymod:make_ds()`."""
    what = "class" if inspect.isclass(factory) else "function"
    name = getattr(factory, "__qualname__", spec.attribute[-1])
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        parameters = []  # type: ignore[assignment]
    required = [p.name for p in parameters
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # fmt: skip
    arguments = ", ".join(f"{parameter}=..." for parameter in required)
    with_them = " with its arguments" if required else ""
    return f"names the {what} {name}, not a dataset; add () to call it{with_them}: {spec.text}({arguments})"


def _import_module(spec: Spec) -> Any:
    # Like `python -m`, the working directory is importable: `datalint scan --dataset mymod:ds`
    # run from a project root finds mymod.py there.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    name = str(spec.module)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            close = _close_modules(exc.name)
            where = (
                "run from the directory that contains it, add it to PYTHONPATH, or use a file path "
                f"(path/to/{name.replace('.', '/')}.py:{'.'.join(spec.attribute)})"
            )
            raise SpecError(
                f"dataset spec {spec.text!r}: no module named {exc.name!r}; "
                + (f"did you mean {close}? If not, {where}" if close else where)
            ) from None
        raise SpecError(f"dataset spec {spec.text!r}: importing {name!r} failed: {_describe(exc)}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's module ran and failed: report it, never a traceback
        raise SpecError(f"dataset spec {spec.text!r}: importing {name!r} failed: {_describe(exc)}") from None


def _close_modules(missing: str) -> str:
    """The importable modules closest to a name that is not one, quoted (`'my_data'`), or "": the
    working directory's and sys.path's top level, or the package's own for a dotted name."""
    package, _, leaf = missing.rpartition(".")
    try:
        where = importlib.import_module(package).__path__ if package else None
    except (ImportError, AttributeError):  # the package itself failed, or is a plain module
        return ""
    names = {module.name for module in pkgutil.iter_modules(where)}
    close = difflib.get_close_matches(leaf, names, n=3, cutoff=0.7)
    return ", ".join(repr(f"{package}.{name}" if package else name) for name in close)


def _import_file(spec: Spec) -> Any:
    path = Path(str(spec.path)).expanduser().resolve()
    if not path.is_file():
        raise SpecError(f"dataset spec {spec.text!r}: no such file {str(spec.path)!r}")
    name = _module_name_for(path)
    if name in sys.modules:
        return sys.modules[name]
    # The file's own directory is importable, so it can import its siblings as a script would.
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise SpecError(f"dataset spec {spec.text!r}: {path} is not a Python file that can be imported")
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running, as a normal import does, so classes defined in the file pickle.
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except KeyboardInterrupt:
        del sys.modules[name]
        raise
    except BaseException as exc:  # the user's file ran and failed
        del sys.modules[name]
        raise SpecError(f"dataset spec {spec.text!r}: running {path} failed: {_describe(exc)}") from None
    return module


def _module_name_for(path: Path) -> str:
    # The file's own stem when that name is free (tracebacks then read naturally); otherwise a
    # name unique to the path, so two "dataset.py" files in different folders never collide.
    stem = path.stem
    existing = sys.modules.get(stem)
    if stem.isidentifier() and (existing is None or getattr(existing, "__file__", None) == str(path)):
        return stem
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    return f"_datalint_spec_{digest}"


def _call_factory(spec: Spec, factory: Any) -> Any:
    assert spec.call is not None
    args, kwargs = spec.call
    if not callable(factory):
        raise SpecError(f"dataset spec {spec.text!r}: {'.'.join(spec.attribute)} is not callable")
    try:
        return factory(*args, **dict(kwargs))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's factory failed
        raise SpecError(f"dataset spec {spec.text!r}: the factory call failed: {_describe(exc)}") from None


def _close_names(owner: Any, name: str) -> str:
    """What to suggest for a missing attribute: only what could be a dataset, never `np` or `Path`."""
    names = [n for n in dir(owner) if not n.startswith("_") and _could_be_dataset(owner, n)]
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
    if close:
        return f"; did you mean {', '.join(close)}?"
    candidates = sorted(names)[:12]
    if candidates:
        return f"; datasets or factories there: {', '.join(candidates)}"
    return "; nothing there looks like a dataset (an object with __len__ and __getitem__, or __iter__)"


_DATASET_METHODS = ("__len__", "__getitem__", "__iter__")


def _could_be_dataset(owner: Any, name: str) -> bool:
    """An object with __len__ / __getitem__ / __iter__, a class whose instances have them, or a
    function; classes and functions only where `owner` defines them (not what it imports)."""
    try:
        value = inspect.getattr_static(owner, name)
    except AttributeError:
        return False
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if inspect.ismodule(value) or isinstance(value, (str, bytes, bytearray, int, float, complex, bool)):
        return False
    owner_module = owner.__name__ if inspect.ismodule(owner) else getattr(owner, "__module__", None)
    if inspect.isclass(value) or inspect.isroutine(value):
        defined_in = getattr(value, "__module__", None)
        if defined_in in (None, "builtins") or defined_in != owner_module:
            return False  # imported (torch's Dataset base class, numpy's array, a helper) or built in
        return inspect.isroutine(value) or any(hasattr(value, method) for method in _DATASET_METHODS)
    return any(hasattr(type(value), method) for method in _DATASET_METHODS)


def _describe(exc: BaseException) -> str:
    """`Type: message (at file:line in function)`, naming the innermost frame outside datalint."""
    text = exception_text(exc)
    frame = innermost_user_frame(exc)
    return f"{text} (at {frame})" if frame else text


def innermost_user_frame(exc: BaseException) -> str | None:
    """`file:line in function` of the deepest traceback frame outside datalint and the stdlib importer."""
    package_dir = str(Path(__file__).resolve().parent.parent)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith(package_dir) or frame.filename.startswith("<frozen"):
            continue
        return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return None

"""The parsed-once Module: import resolution, loader arguments, Datasets, worker code, start method."""

from __future__ import annotations

import ast
import textwrap

from datalint.lint.module import UNKNOWN, Module, parse_noqa


def parse(code: str) -> Module:
    return Module.parse(textwrap.dedent(code).lstrip("\n"), "example.py")


def only_loader(module: Module):  # type: ignore[no-untyped-def]
    (loader,) = module.loader_calls
    return loader


def test_qualname_follows_every_import_spelling() -> None:
    module = parse(
        """
        import torch
        import torch.utils.data as tud
        from torch.utils.data.dataloader import DataLoader as DL
        import numpy as np
        a = torch.utils.data.DataLoader
        b = tud.DataLoader
        c = DL
        d = np.load
        e = open
        """
    )
    values = [node.value for node in module.tree.body if isinstance(node, ast.Assign)]
    assert [module.qualname(v) for v in values] == [
        "torch.utils.data.DataLoader",
        "torch.utils.data.DataLoader",
        "torch.utils.data.DataLoader",
        "numpy.load",
        "open",
    ]


def test_relative_imports_resolve_from_the_module_s_own_package() -> None:
    module = parse(
        """
        from . import helpers as helpers
        from .. import utils
        from .base import Base
        a = helpers.load_lists
        b = utils.seed
        c = Base
        """
    )
    module.module_name, module.is_package = "video.datasets.ava", False
    values = [node.value for node in module.tree.body if isinstance(node, ast.Assign)]
    assert [module.qualname(v) for v in values] == [".helpers.load_lists", "..utils.seed", ".base.Base"]
    assert [module.absolute_qualname(v) for v in values] == [
        "video.datasets.helpers.load_lists",
        "video.utils.seed",
        "video.datasets.base.Base",
    ]


def test_a_shadowed_builtin_or_a_local_name_is_not_resolved() -> None:
    module = parse(
        """
        def open(path):
            return path
        x = open
        y = loader.dataset
        """
    )
    values = [node.value for node in module.tree.body if isinstance(node, ast.Assign)]
    assert [module.qualname(v) for v in values] == [None, None]


def test_loader_arguments_are_literal_unknown_or_absent() -> None:
    loader = only_loader(
        parse(
            """
            from torch.utils.data import DataLoader
            WORKERS = 4
            DataLoader(ds, 8, True, None, None, 0, batch_sampler=bs, timeout=WORKERS)
            """
        )
    )
    assert loader.arg("num_workers").is_literal and loader.arg("num_workers").value == 0  # position 5
    assert loader.arg("batch_size").value == 8
    assert loader.arg("batch_sampler").is_unknown
    assert loader.effective("timeout") == 4  # a module constant bound once
    assert loader.arg("prefetch_factor").is_absent
    assert loader.effective("prefetch_factor") is None  # DataLoader's default
    assert loader.workers_known_zero


def test_star_kwargs_make_every_unwritten_argument_unknown() -> None:
    loader = only_loader(
        parse(
            """
            import torch
            torch.utils.data.DataLoader(ds, prefetch_factor=2, **cfg)
            """
        )
    )
    assert loader.arg("num_workers").is_unknown
    assert loader.effective("num_workers") is UNKNOWN
    assert not loader.workers_known_zero and loader.may_use_workers()


def test_star_args_hide_later_positions() -> None:
    loader = only_loader(parse("from torch.utils.data import DataLoader\nDataLoader(ds, *rest)\n"))
    assert loader.arg("num_workers").is_unknown


def test_a_name_assigned_twice_is_unknown() -> None:
    loader = only_loader(
        parse(
            """
            from torch.utils.data import DataLoader
            def make(ds, fast):
                workers = 0
                if fast:
                    workers = 8
                return DataLoader(ds, num_workers=workers)
            """
        )
    )
    assert loader.arg("num_workers").is_unknown


def test_a_parameter_shadowing_a_module_constant_is_unknown() -> None:
    loader = only_loader(
        parse(
            """
            from torch.utils.data import DataLoader
            WORKERS = 0
            def make(ds, WORKERS):
                return DataLoader(ds, num_workers=WORKERS)
            """
        )
    )
    assert loader.arg("num_workers").is_unknown


def test_dataloader_subclasses_are_loader_calls() -> None:
    module = parse(
        """
        from torch.utils.data import DataLoader
        class Plain(DataLoader):
            pass
        class Custom(Plain):
            def __init__(self, ds, **kw):
                super().__init__(ds, num_workers=4, **kw)
        Plain(ds, prefetch_factor=2)
        Custom(ds, prefetch_factor=2)
        """
    )
    plain, custom = module.loader_calls
    assert plain.signature_known and plain.workers_known_zero
    # A subclass with its own __init__ may set any default: nothing absent is known.
    assert not custom.signature_known and custom.arg("num_workers").is_unknown


def test_dataset_classes_through_aliases_inheritance_and_use() -> None:
    module = parse(
        """
        import torch.utils.data as tud
        from torch.utils.data import DataLoader
        class Base(tud.Dataset):
            pass
        class Child(Base):
            pass
        class Stream(tud.IterableDataset[int]):
            pass
        class Duck:
            def __getitem__(self, i):
                return i
        class Unrelated:
            pass
        DataLoader(Duck())
        """
    )
    names = {c.name for c in module.dataset_classes}
    assert names == {"Base", "Child", "Stream", "Duck"}
    by_name = {c.name: c for c in module.classes}
    assert module.is_iterable_dataset(by_name["Stream"])
    assert not module.is_iterable_dataset(by_name["Child"])


def test_worker_functions_follow_calls_transforms_and_hooks() -> None:
    module = parse(
        """
        from torch.utils.data import DataLoader, Dataset

        def decode(path):
            return path

        def unused():
            return 0

        class Resize:
            def __call__(self, x):
                return x

        class Images(Dataset):
            def __init__(self, transform):
                self.transform = transform
                self.resize = Resize()

            def __getitem__(self, i):
                return self.load(i)

            def load(self, i):
                return decode(i)

        def collate(batch):
            return batch

        ds = Images(transform=lambda x: x)
        loader = DataLoader(ds, num_workers=2, collate_fn=collate, worker_init_fn=lambda i: None)
        """
    )
    names = {getattr(w.node, "name", "<lambda>") for w in module.worker_functions}
    assert names == {"__getitem__", "load", "decode", "__call__", "collate", "<lambda>"}
    lambdas = [w for w in module.worker_functions if isinstance(w.node, ast.Lambda)]
    assert len(lambdas) == 2
    unused = next(f for f in module.functions if f.name == "unused")
    assert not module.in_worker_code(unused.body[0])
    decode = next(f for f in module.functions if f.name == "decode")
    assert module.in_worker_code(decode.body[0])
    assert "called from" in module.worker_function_of(decode.body[0]).reason  # type: ignore[union-attr]


def test_start_method_from_code() -> None:
    module = parse(
        """
        import multiprocessing as mp
        mp.set_start_method("fork")
        """
    )
    assert module.start_method == "fork"
    assert module.effective_start_method == "fork"
    ambiguous = parse(
        """
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        mp.set_start_method("fork")
        DataLoader(ds, num_workers=2, multiprocessing_context="spawn")
        """
    )
    assert {s.method for s in ambiguous.start_method_sites} == {"fork", "spawn"}
    assert ambiguous.start_method is None
    assert ambiguous.effective_start_method == "spawn"  # the configured default


def test_enclosing_lookups_and_main_guard() -> None:
    module = parse(
        """
        class A:
            def f(self):
                return 1
        if __name__ == "__main__":
            run()
        """
    )
    ret = next(module.nodes_of(ast.Return))
    assert module.enclosing_function(ret).name == "f"  # type: ignore[union-attr]
    assert module.enclosing_class(ret).name == "A"  # type: ignore[union-attr]
    call = next(module.nodes_of(ast.Call))
    assert module.is_main_guarded(call) and not module.is_main_guarded(ret)


def test_noqa_comments() -> None:
    assert parse_noqa("x = 1") is None
    bare = parse_noqa("x = 1  # noqa")
    assert bare is not None and bare.silences("DL001")
    listed = parse_noqa("x = 1  # NOQA:dl001, DL2")
    assert listed is not None and listed.silences("DL001") and listed.silences("DL201")
    assert not listed.silences("DL003")
    other = parse_noqa("import os  # noqa: F401")
    assert other is not None and not other.silences("DL001")


def test_segment_quotes_the_source_across_line_endings_and_non_ascii_text() -> None:
    """Messages quote the code as written, whatever the file's line endings and characters."""
    source = (
        'label = "café"\r\nloader = DataLoader(\r\n    ds, num_workers=4)\rx = 1\x0c + 2\nlast = f(label)'
    )
    module = Module.parse(source, "example.py")
    calls = {module.segment(call.func): call for call in module.calls}
    assert module.segment(calls["DataLoader"]) == "DataLoader( ds, num_workers=4)"
    assert module.segment(calls["f"]) == "f(label)"
    strings = [n for n in ast.walk(module.tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert [module.segment(s) for s in strings] == ['"café"']
    for node in ast.walk(module.tree):
        if isinstance(node, ast.expr):
            assert module.segment(node) == " ".join((ast.get_source_segment(source, node) or "").split())

"""The worker's reach across files: what a Dataset's `__getitem__` calls in other files of the project
runs in its DataLoader workers, and a finding there names the calls that lead to it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from xml.etree import ElementTree

from datalint.config import Config
from datalint.lint.engine import Finding, lint_paths
from datalint.lint.formats import (
    format_full,
    format_github,
    format_gitlab,
    format_json,
    format_junit,
    format_rdjson,
    format_sarif,
    format_text,
)

SETS = '''
from torch.utils.data import DataLoader, Dataset

from shapes.io import read_sample


class Shapes(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        return read_sample(self.paths[index])


def loader(paths):
    return DataLoader(Shapes(paths), batch_size=8, num_workers=4)
'''

IO = '''
from shapes.img import load_image


def read_sample(path):
    return load_image(path), path
'''

IMG = '''
import cv2


def load_image(path):
    image = cv2.imread(path)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
'''


def write(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text("[project]\nname = 'shapes'\n")
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"))
    (root / "shapes" / "__init__.py").touch()
    return root


def lint(paths: list[Path], select: str) -> list[Finding]:
    report = lint_paths(paths, Config(select=(select,)), cache_dir=None)
    assert report.errors == ()
    return list(report.findings)


def test_opencv_in_a_helper_two_files_away_from_getitem_is_reported_with_its_chain(tmp_path: Path) -> None:
    root = write(tmp_path, {"shapes/sets.py": SETS, "shapes/io.py": IO, "shapes/img.py": IMG})
    findings = lint([root], "DL202")
    assert [(Path(f.path).name, f.line) for f in findings] == [("img.py", 5)]
    chain = [(Path(r.path).name, r.line, r.message) for r in findings[0].related]
    assert chain == [
        ("sets.py", 14, "`Shapes.__getitem__` calls `read_sample` here, in DataLoader workers"),
        ("io.py", 5, "`read_sample` calls `load_image` here, in DataLoader workers"),
    ]
    # The helper's file alone cannot know a Dataset calls it: silent, not guessed.
    assert lint([root / "shapes" / "img.py"], "DL202") == []


def test_the_chain_is_shown_in_every_output_format(tmp_path: Path) -> None:
    root = write(tmp_path, {"shapes/sets.py": SETS, "shapes/io.py": IO, "shapes/img.py": IMG})
    findings = lint([root], "DL202")
    first = findings[0].related[0]
    note = f"{first.path}:{first.line}"
    assert f"{note}: note: {first.message}" in format_text(findings, [])
    assert f"= note: {note}: {first.message}" in format_full(findings, [])
    assert json.loads(format_json(findings, []))[0]["related"][0]["line"] == 14
    sarif = json.loads(format_sarif(findings, []))["runs"][0]["results"][0]["relatedLocations"]
    assert [r["physicalLocation"]["region"]["startLine"] for r in sarif] == [14, 5]
    rdjson = json.loads(format_rdjson(findings, []))["diagnostics"][0]["related_locations"]
    assert [r["location"]["range"]["start"]["line"] for r in rdjson] == [14, 5]
    assert note in json.loads(format_gitlab(findings, []))[0]["description"]
    assert note in format_github(findings, [])
    failure = ElementTree.fromstring(format_junit(findings, [])).find(".//failure")
    assert failure is not None and note in (failure.text or "")


def test_a_script_limiting_opencv_threads_at_module_level_covers_the_helpers(tmp_path: Path) -> None:
    train = '''
    import cv2

    from shapes.sets import loader

    cv2.setNumThreads(0)
    for batch in loader(["a.png"]):
        pass
    '''
    files = {"shapes/sets.py": SETS, "shapes/io.py": IO, "shapes/img.py": IMG, "train.py": train}
    root = write(tmp_path, files)
    assert lint([root], "DL202") == []


def test_a_helper_no_dataset_calls_stays_silent(tmp_path: Path) -> None:
    unused = SETS.replace("return read_sample(self.paths[index])", "return self.paths[index]")
    root = write(tmp_path, {"shapes/sets.py": unused, "shapes/io.py": IO, "shapes/img.py": IMG})
    assert lint([root], "DL202") == []


BASE = '''
from torch.utils.data import Dataset


class BaseSegmentation(Dataset):
    def __init__(self, root):
        self.root = root
        self.files = []
        self._set_files()

    def _set_files(self):
        raise NotImplementedError

    def _load_data(self, index):
        raise NotImplementedError

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        image, label = self._load_data(index)
        return image, label
'''

VOC = '''
import os

import numpy as np
from PIL import Image
from torch.utils.data import DataLoader

from shapes.base import BaseSegmentation


class VOCSegmentation(BaseSegmentation):
    def _set_files(self):
        listing = os.path.join(self.root, "train.txt")
        self.files = [line.rstrip() for line in open(listing)]

    def _load_data(self, index):
        name = self.files[index]
        return np.asarray(Image.open(name + ".jpg")), np.asarray(Image.open(name + ".png"))


def loader(root):
    return DataLoader(VOCSegmentation(root), batch_size=8, num_workers=8)
'''


def test_a_list_a_subclass_reads_in_the_hook_its_base_getitem_calls_is_per_sample(tmp_path: Path) -> None:
    root = write(tmp_path, {"shapes/base.py": BASE, "shapes/voc.py": VOC})
    findings = lint([root], "DL301")
    assert [(Path(f.path).name, f.line) for f in findings] == [("voc.py", 13)]
    assert "`self.files`" in findings[0].message


def test_an_array_a_subclass_reads_in_the_hook_stays_silent(tmp_path: Path) -> None:
    arrays = VOC.replace(
        "self.files = [line.rstrip() for line in open(listing)]",
        "self.files = np.loadtxt(listing, dtype=np.bytes_)",
    )
    root = write(tmp_path, {"shapes/base.py": BASE, "shapes/voc.py": arrays})
    assert lint([root], "DL301") == []


TRANSFORMS = '''
import numpy as np

normalize = lambda image: np.asarray(image, dtype=np.float32) / 255.0
'''

IMAGES = '''
from PIL import Image
from torch.utils.data import Dataset


class Images(Dataset):
    def __init__(self, paths, transform=None):
        self.paths = paths
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        return self.transform(Image.open(self.paths[index]).convert("RGB"))
'''

TRAIN = '''
import glob

from torch.utils.data import DataLoader

from shapes.images import Images
from shapes.transforms import normalize

if __name__ == "__main__":
    dataset = Images(sorted(glob.glob("images/*.png")), transform=normalize)
    loader = DataLoader(dataset, batch_size=8, num_workers=4, multiprocessing_context="spawn")
    for batch in loader:
        pass
'''


def test_a_module_level_lambda_handed_to_a_dataset_in_another_file_is_reported_where_it_is_defined(
    tmp_path: Path,
) -> None:
    # The three files: the spawn loader's workers fail with `Can't pickle <function <lambda>>`.
    files = {"shapes/transforms.py": TRANSFORMS, "shapes/images.py": IMAGES, "train.py": TRAIN}
    root = write(tmp_path, files)
    findings = lint([root], "DL102")
    assert [(Path(f.path).name, f.line, f.severity) for f in findings] == [("transforms.py", 3, "error")]
    assert "the module-level lambda `normalize`" in findings[0].message
    assert [(Path(r.path).name, r.line) for r in findings[0].related] == [("train.py", 9)]
    assert "handed to `Images(...)`" in findings[0].related[0].message


def test_a_module_level_function_handed_the_same_way_stays_silent(tmp_path: Path) -> None:
    function = TRANSFORMS.replace(
        "normalize = lambda image: np.asarray(image, dtype=np.float32) / 255.0",
        "def normalize(image):\n    return np.asarray(image, dtype=np.float32) / 255.0",
    )
    files = {"shapes/transforms.py": function, "shapes/images.py": IMAGES, "train.py": TRAIN}
    assert lint([write(tmp_path, files)], "DL102") == []


AUGMENT = '''
import numpy as np


class RandomFlip:
    def __init__(self, p=0.5):
        self.p = p
        self.rng = np.random.default_rng(0)

    def __call__(self, image):
        if self.rng.random() < self.p:
            return image[:, ::-1]
        return image
'''

TRAIN_FLIPS = '''
from torch.utils.data import DataLoader

from shapes.augment import RandomFlip
from shapes.images import Images

if __name__ == "__main__":
    loader = DataLoader(Images(["a.png"], transform=RandomFlip()), batch_size=8, num_workers=4)
    for batch in loader:
        pass
'''


def test_an_rng_made_in_init_of_a_transform_handed_to_a_dataset_elsewhere_is_reported(tmp_path: Path) -> None:
    files = {"shapes/augment.py": AUGMENT, "shapes/images.py": IMAGES, "train.py": TRAIN_FLIPS}
    findings = lint([write(tmp_path, files)], "DL401")
    assert [(Path(f.path).name, f.line) for f in findings] == [("augment.py", 7)]
    assert [(Path(r.path).name, r.line) for r in findings[0].related] == [("train.py", 7)]
    assert "the Dataset `Images` holds it" in findings[0].related[0].message


def test_the_same_transform_given_to_no_dataset_stays_silent(tmp_path: Path) -> None:
    unused = TRAIN_FLIPS.replace('Images(["a.png"], transform=RandomFlip())', '[RandomFlip()]')
    files = {"shapes/augment.py": AUGMENT, "shapes/images.py": IMAGES, "train.py": unused}
    assert lint([write(tmp_path, files)], "DL401") == []


CACHE = '''
import pickle


def read_cache(path):
    with open(path, "rb") as f:
        return pickle.load(f)
'''

ITEMS = '''
import json

from torch.utils.data import DataLoader, Dataset

from shapes.cache import read_cache


class Items(Dataset):
    def __init__(self, path, cache=None):
        if cache is not None:
            self.items = read_cache(cache)
        else:
            self.items = [json.loads(line) for line in open(path)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


def loader(path):
    return DataLoader(Items(path), batch_size=8, num_workers=4)
'''


def test_a_helper_of_another_file_the_linter_cannot_read_does_not_silence_a_list_it_can(
    tmp_path: Path,
) -> None:
    findings = lint([write(tmp_path, {"shapes/cache.py": CACHE, "shapes/items.py": ITEMS})], "DL301")
    assert [(Path(f.path).name, f.line) for f in findings] == [("items.py", 13)]


def test_a_numpy_array_on_the_other_branch_still_silences_it(tmp_path: Path) -> None:
    arrays = ITEMS.replace("self.items = read_cache(cache)", "self.items = np.load(cache)").replace(
        "import json\n", "import json\n\nimport numpy as np\n"
    )
    assert lint([write(tmp_path, {"shapes/cache.py": CACHE, "shapes/items.py": arrays})], "DL301") == []


BASE_SET = '''
import cv2
from torch.utils.data import Dataset


class BaseSet(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def decode(self, path):
        return cv2.imread(path)
'''

FRAMES = '''
from torch.utils.data import DataLoader

from shapes.base_set import BaseSet


class Frames(BaseSet):
    def __getitem__(self, index):
        return self.decode(self.files[index])


loader = DataLoader(Frames(["a.png"]), batch_size=4, num_workers=4)
'''


def test_a_base_method_in_another_file_that_a_subclass_getitem_calls_runs_in_workers(tmp_path: Path) -> None:
    findings = lint([write(tmp_path, {"shapes/base_set.py": BASE_SET, "shapes/frames.py": FRAMES})], "DL202")
    assert [(Path(f.path).name, f.line) for f in findings] == [("base_set.py", 13)]
    assert [(Path(r.path).name, r.line) for r in findings[0].related] == [("frames.py", 6)]


def test_a_hook_a_base_getitem_in_another_file_calls_runs_in_workers_in_the_subclass(tmp_path: Path) -> None:
    base = BASE_SET.replace("import cv2\n", "").replace(
        "        return cv2.imread(path)",
        "        raise NotImplementedError\n\n    def __getitem__(self, index):\n"
        "        return self.decode(self.files[index])",
    )
    frames = FRAMES.replace("from torch", "import cv2\nfrom torch").replace(
        "    def __getitem__(self, index):\n        return self.decode(self.files[index])",
        "    def decode(self, path):\n        return cv2.imread(path)",
    )
    findings = lint([write(tmp_path, {"shapes/base_set.py": base, "shapes/frames.py": frames})], "DL202")
    assert [(Path(f.path).name, f.line) for f in findings] == [("frames.py", 9)]
    assert "call `self.decode`" in findings[-1].related[-1].message
    # Without the loader's workers' reach into the hook, the subclass alone is silent.
    assert lint([tmp_path / "shapes" / "base_set.py"], "DL202") == []


def test_a_thread_limit_in_the_base_init_covers_the_hook_its_subclass_fills(tmp_path: Path) -> None:
    limited = "        self.files = files\n        cv2.setNumThreads(0)"
    base = BASE_SET.replace("        self.files = files", limited).replace(
        "        return cv2.imread(path)",
        "        raise NotImplementedError\n\n    def __getitem__(self, index):\n"
        "        return self.decode(self.files[index])",
    )
    frames = FRAMES.replace("from torch", "import cv2\nfrom torch").replace(
        "    def __getitem__(self, index):\n        return self.decode(self.files[index])",
        "    def decode(self, path):\n        return cv2.imread(path)",
    )
    assert lint([write(tmp_path, {"shapes/base_set.py": base, "shapes/frames.py": frames})], "DL202") == []


FUNCTIONAL = '''
import cv2


def resize_clip(clip, size):
    return [cv2.resize(frame, size) for frame in clip]
'''

VIDEO_TRANSFORMS = '''
import shapes.functional as F


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, clip):
        for transform in self.transforms:
            clip = transform(clip)
        return clip


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, clip):
        return F.resize_clip(clip, self.size)
'''

CLIPS = '''
import numpy as np
from torch.utils.data import Dataset

from shapes import video_transforms


class Clips(Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.transform = video_transforms.Compose([video_transforms.Resize((224, 224))])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        return self.transform(np.load(self.paths[index]))
'''


def test_a_transform_in_a_compose_a_dataset_holds_reaches_a_helper_of_a_third_file(tmp_path: Path) -> None:
    files = {"shapes/functional.py": FUNCTIONAL, "shapes/video_transforms.py": VIDEO_TRANSFORMS}
    findings = lint([write(tmp_path, {**files, "shapes/clips.py": CLIPS})], "DL202")
    assert [(Path(f.path).name, f.line) for f in findings] == [("functional.py", 5)]
    chain = [(Path(r.path).name, r.message) for r in findings[0].related]
    assert chain == [
        ("clips.py", "`Clips` calls `Resize.__call__` here, in DataLoader workers"),
        ("video_transforms.py", "`Resize.__call__` calls `resize_clip` here, in DataLoader workers"),
    ]


def test_a_worker_init_fn_of_another_file_limiting_opencv_threads_covers_the_helpers(tmp_path: Path) -> None:
    hooks = '''
    import cv2


    def limit_threads(worker_id):
        cv2.setNumThreads(0)
    '''
    files = {"shapes/sets.py": SETS, "shapes/io.py": IO, "shapes/img.py": IMG, "shapes/hooks.py": hooks}
    assert lint([write(tmp_path, files)], "DL202") == []


COLLATE = '''
import torch

stack = lambda batch: torch.stack(batch)
'''

TRAIN_COLLATE = '''
from torch.utils.data import DataLoader

from shapes.collate import stack
from shapes.images import Images

if __name__ == "__main__":
    loader = DataLoader(Images(["a.png"]), batch_size=8, num_workers={workers}, collate_fn=stack)
    for batch in loader:
        pass
'''


def test_a_module_level_lambda_another_file_passes_as_collate_fn_is_reported_where_it_is_defined(
    tmp_path: Path,
) -> None:
    train = TRAIN_COLLATE.format(workers=4)
    files = {"shapes/collate.py": COLLATE, "shapes/images.py": IMAGES, "train.py": train}
    findings = lint([write(tmp_path, files)], "DL101")
    assert [(Path(f.path).name, f.line) for f in findings] == [("collate.py", 3)]
    assert [(Path(r.path).name, r.line) for r in findings[0].related] == [("train.py", 7)]


def test_the_same_lambda_for_a_loader_without_workers_stays_silent(tmp_path: Path) -> None:
    train = TRAIN_COLLATE.format(workers=0)
    files = {"shapes/collate.py": COLLATE, "shapes/images.py": IMAGES, "train.py": train}
    assert lint([write(tmp_path, files)], "DL101") == []


def test_a_helper_only_a_subclass_s_parent_side_method_calls_stays_silent(tmp_path: Path) -> None:
    # `Prepared` has no sample method: only the hooks its base's `__getitem__` calls run in workers.
    base = BASE_SET.replace("import cv2\n", "").replace(
        "        return cv2.imread(path)",
        "        raise NotImplementedError\n\n    def __getitem__(self, index):\n"
        "        return self.decode(self.files[index])",
    )
    prepared = '''
    import numpy as np
    from torch.utils.data import DataLoader

    from shapes.base_set import BaseSet
    from shapes.img import load_image


    class Prepared(BaseSet):
        def decode(self, path):
            return np.load(path)

        def export_previews(self, folder):
            return [load_image(path) for path in self.files]


    loader = DataLoader(Prepared(["a.npy"]), batch_size=4, num_workers=4)
    '''
    files = {"shapes/base_set.py": base, "shapes/prepared.py": prepared, "shapes/img.py": IMG}
    assert lint([write(tmp_path, files)], "DL202") == []


def test_a_function_stored_on_an_attribute_that_getitem_calls_runs_in_workers(tmp_path: Path) -> None:
    images = '''
    from torch.utils.data import DataLoader, Dataset

    from shapes.img import load_image


    class Images(Dataset):
        def __init__(self, paths, loader=load_image):
            self.paths = paths
            self.loader = loader

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, index):
            return self.loader(self.paths[index])


    loader = DataLoader(Images(["a.png"]), batch_size=4, num_workers=4)
    '''
    findings = lint([write(tmp_path, {"shapes/images.py": images, "shapes/img.py": IMG})], "DL202")
    assert [(Path(f.path).name, f.line) for f in findings] == [("img.py", 5)]
    assert [(Path(r.path).name, r.line) for r in findings[0].related] == [("images.py", 9)]


def test_a_script_folder_s_namespace_package_resolves_and_in_file_hooks_reach_a_held_class(
    tmp_path: Path,
) -> None:
    # `trainer/` is run as a script folder; `data/` has no __init__.py, as in many research repos.
    builder = '''
    import torch


    class Supervision:
        def __init__(self, net):
            self.net = net

        def score(self, image):
            return self.net(torch.as_tensor(image).cuda())
    '''
    sets = '''
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    from data.supervision.builder import Supervision


    class BaseSet(Dataset):
        def __init__(self, paths):
            self.paths = paths

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, index):
            return self.make_target(index)


    class Pseudo(BaseSet):
        def __init__(self, paths, net):
            super().__init__(paths)
            self.supervision = Supervision(net)

        def make_target(self, index):
            return self.supervision.score(np.load(self.paths[index]))


    def loader(paths, net):
        return DataLoader(Pseudo(paths, net), batch_size=4, num_workers=4)
    '''
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'trainer'\n")
    files = {"trainer/data/sets.py": sets, "trainer/data/supervision/builder.py": builder}
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"))
    findings = lint([tmp_path], "DL203")
    assert [(Path(f.path).name, f.line) for f in findings] == [("builder.py", 9)]
    assert "the Dataset `Pseudo` holds it" in findings[0].related[0].message


def test_a_dict_of_keywords_returned_by_a_helper_is_read_without_failing(tmp_path: Path) -> None:
    # `dict(input_ids=..., labels=...)` has no positional argument; the rule used to fail on it.
    tokens = '''
    import torch
    from torch.utils.data import DataLoader, Dataset


    def preprocess(rows):
        return dict(input_ids=torch.tensor(rows), labels=torch.tensor(rows))


    class Tokens(Dataset):
        def __init__(self, rows):
            data = preprocess(rows)
            self.input_ids = data["input_ids"]

        def __len__(self):
            return len(self.input_ids)

        def __getitem__(self, index):
            return self.input_ids[index]


    loader = DataLoader(Tokens([[1, 2]]), batch_size=2, num_workers=2)
    '''
    (tmp_path / "shapes").mkdir()
    assert lint([write(tmp_path, {"shapes/tokens.py": tokens})], "DL301") == []

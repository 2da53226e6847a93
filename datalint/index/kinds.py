"""Every finding kind the index holds: one entry each, and everything that names kinds reads it here.

The kinds are a public contract (docs/index.md, "Finding kinds"; docs/scan.md). What lists them is
derived from `KINDS`: the CLI's `--kinds` help and its check (`datalint.scan.policy.parse_kinds`),
the default policy, the SQL pre-filter of the per-sample pass (`candidate_where`), the severity
order of the quarantine list in Python and in SQL (`severity_rank`, `severity_sql`), the report's
words and what it hides on an image-file scan, and the docs table (`markdown_table`, written by
`python scripts/docs_check.py --write`). A new kind is one entry here plus the probe or policy
function that finds it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

# Families, in the order the docs list them.
SAMPLE_CONTRACT = "sample contract"  # what the training loop relies on each sample to be
DAMAGE = "damage"  # a file that is no good sample, whatever the installation
UNSUPPORTED = "unsupported"  # a valid file this installation cannot decode
IMAGE_INFORMATION = "image information"  # facts about valid image files
QUALITY = "quality"  # what an image looks like, judged against the scan's population
FAMILIES: tuple[str, ...] = (SAMPLE_CONTRACT, DAMAGE, UNSUPPORTED, IMAGE_INFORMATION, QUALITY)

# Candidate clauses: SQL over a `samples` row. The per-sample pass reads only the rows where one of
# them holds; `:name` is a value the policy supplies (None leaves the clause out, a list expands).
_FAILED = "status != 'ok'"
_REPORTED = "reported IS NOT NULL"  # findings the source (or the worker) decided for this row alone
_SIGNATURE = "signature IN (:signatures)"  # the ok signatures whose structure has findings

INFORMATION = 1000  # the rank of kinds that stop nothing: after every other, then by name
Judged = Literal["sample", "population"]  # from the sample alone, or against the others


@dataclass(frozen=True)
class Kind:
    """One finding kind.

    `severity`: its rank in "what stops a training job first" (lower is worse; equal ranks go by
    name). `judged`: from the sample alone, or against the others (the population). `candidates`:
    the SQL clauses under which the per-sample pass may find it in a row; empty for a kind found by
    a pass over the whole index. `file_scans`: an image-file scan can find it. `decodable`: the
    report may decode the file again for a preview after it. `label`: the report's words for it,
    when they differ from `meaning`. `said_by`: a fixed counterpart; where it holds for the sample,
    this relative kind says nothing more and is left out.
    """

    name: str
    family: str
    severity: int
    judged: Judged
    quarantined: bool  # by default
    meaning: str
    candidates: tuple[str, ...] = ()
    file_scans: bool = True
    decodable: bool = True
    label: str = ""
    said_by: str = ""

    @property
    def report_label(self) -> str:
        return self.label or self.meaning


def _sample(name: str, severity: int, judged: Judged, quarantined: bool, meaning: str, *candidates: str,
            file_scans: bool = False, decodable: bool = True) -> Kind:  # fmt: skip
    """A kind of the sample contract: found in a dataset sample (some also in image files)."""
    return Kind(
        name, SAMPLE_CONTRACT, severity, judged, quarantined, meaning, candidates, file_scans, decodable
    )


def _image(name: str, family: str, severity: int, quarantined: bool, meaning: str, **more: Any) -> Kind:
    """A kind the image source reports for one file (`samples.reported`)."""
    return Kind(name, family, severity, "sample", quarantined, meaning, (_REPORTED,), **more)


def _whole(name: str, family: str, judged: Judged, quarantined: bool, meaning: str, **more: Any) -> Kind:
    """A kind found by a pass over the whole index; information, whatever the policy quarantines."""
    return Kind(name, family, INFORMATION, judged, quarantined, meaning, **more)


# In the order of the docs, `--kinds all` and the list's `policy`.
KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        _sample("error", 30, "sample", True, "the sample raised an exception", _FAILED, file_scans=True),
        _sample("crash", 10, "sample", True, "the worker process died on this sample", _FAILED,
                file_scans=True, decodable=False),
        _sample("timeout", 20, "sample", True, "no result within --timeout", _FAILED,
                file_scans=True, decodable=False),
        _sample("missing_field", 100, "population", True,
                "a --label/--require field, or one its peers hold, is absent or None",
                "instr(labels, 'null') > 0", _SIGNATURE),  # a text test: json_each per row costs 3x
        _sample("uncollatable", 90, "population", True, "default_collate cannot batch it", _SIGNATURE),
        _sample("shape_mismatch", 110, "population", True, "structure or shape differs from the majority",
                _SIGNATURE),
        _sample("non_finite", 130, "sample", True, "NaN or Inf in a float tensor or array", "non_finite > 0"),
        _sample("label_out_of_range", 120, "sample", True, "a --label value outside [0, --num-classes)",
                "labels IS NOT NULL AND :num_classes IS NOT NULL"),
        _sample("requires_grad", 140, "sample", True, "a tensor that requires grad", "requires_grad = 1"),
        _sample("non_cpu_tensor", 150, "sample", True, "a tensor not on the CPU", "non_cpu = 1"),
        _sample("oversized", 160, "population", True, "far larger than its peers, or above --max-bytes",
                "nbytes > :largest"),
        _sample("duplicate_key", 165, "population", True,
                "its key names other samples too (a keyed list cannot tell them apart)", file_scans=True),
        _sample("dtype_mismatch", 170, "population", False,
                "dtype differs from the majority (the batch is silently promoted)", _SIGNATURE),
        _sample("slow", 180, "population", False, "far slower than its peers", "duration >= :slowest",
                file_scans=True),
        _sample("fd_leak", 190, "sample", False, "left file descriptors open", "fd_delta > 0"),
        _sample("side_effect", 200, "sample", False,
                "changed its worker: left a child process, moved the working directory, ...", _REPORTED,
                file_scans=True),
        _image("corrupt", DAMAGE, 40, True, "an image file that does not decode"),
        _image("empty", DAMAGE, 70, True, "an empty file"),
        _image("decompression_bomb", DAMAGE, 60, True,
               "an image whose header claims more pixels than --max-pixels", decodable=False),
        _image("unreadable", DAMAGE, 50, True, "a file that cannot be read"),
        # Not damage, but quarantined: a training loader on this machine fails on it just the same.
        _image("unsupported", UNSUPPORTED, 80, True,
               "a valid file this installation cannot decode (missing plugin, codec or program)"),
        _image("extension_mismatch", IMAGE_INFORMATION, INFORMATION, False,
               "the content is another format than the name says (a GIF named .jpg)"),
        _image("cmyk", IMAGE_INFORMATION, INFORMATION, False,
               "CMYK colour (convert('RGB') gives other colours than most viewers)"),
        # `grayscale` is also a quality kind: a picture that looks grey though stored as RGB.
        _image("grayscale", IMAGE_INFORMATION, INFORMATION, False,
               "one channel (mode L, LA, I;16, 1...) where RGB is usual",
               label="visually grey (or one channel) where RGB is usual"),
        _image("palette", IMAGE_INFORMATION, INFORMATION, False, "a palette image (mode P or PA)"),
        _image("alpha", IMAGE_INFORMATION, INFORMATION, False,
               "has transparency (RGBA, LA, PA, or a palette with a transparent colour)"),
        _image("high_bit_depth", IMAGE_INFORMATION, INFORMATION, False,
               "more than 8 bits per channel (16-bit PNG or TIFF)"),
        _image("exif_rotated", IMAGE_INFORMATION, INFORMATION, False,
               "EXIF orientation other than 1: viewers show it rotated or mirrored"),
        _image("bad_exif", IMAGE_INFORMATION, INFORMATION, False,
               "an EXIF block that cannot be parsed (exif_transpose() would raise)"),
        _image("multi_frame", IMAGE_INFORMATION, INFORMATION, False,
               "several frames or pages; only the first is decoded unless all frames are asked for"),
        _image("decoder_warning", IMAGE_INFORMATION, INFORMATION, False,
               "a decoder warning that does not mean damaged pixels"),
        _whole("tiny", IMAGE_INFORMATION, "sample", False, "a side shorter than 32 pixels"),
        _whole("extreme_aspect", IMAGE_INFORMATION, "sample", False, "one side more than 10 times the other"),
        _whole("duplicate", IMAGE_INFORMATION, "population", False,
               "the same bytes as another file of the scan (the first by key is not flagged)"),
        _whole("dark", QUALITY, "population", False,
               "even the brightest pixels are dark (99th-percentile luminance under the threshold)"),
        _whole("light", QUALITY, "population", False, "washed out (even the darkest pixels are bright)"),
        _whole("blurry", QUALITY, "population", False,
               "little fine detail for its coarse structure (out of focus or upscaled)"),
        _whole("low_information", QUALITY, "population", False,
               "few distinct grey levels (a blank, flat or nearly uniform image)"),
        _whole("odd_size", QUALITY, "population", False,
               "far smaller or larger than most images of the scan", said_by="tiny"),
        _whole("odd_aspect", QUALITY, "population", False, "a shape far from most images of the scan",
               said_by="extreme_aspect"),
        _whole("near_duplicate", QUALITY, "population", False,
               "looks the same as another image (perceptual hash); the representative is named",
               said_by="duplicate"),
        # what --against asks for: quarantined from this split
        _whole("leak", QUALITY, "population", True,
               "the same or nearly the same image is in the other split (--against)"),
    )
}  # fmt: skip

DEFAULT_KINDS: tuple[str, ...] = tuple(name for name, kind in KINDS.items() if kind.quarantined)


def of_family(family: str) -> tuple[str, ...]:
    """The kinds of one family, in the registry's order."""
    return tuple(name for name, kind in KINDS.items() if kind.family == family)


DAMAGE_KINDS: tuple[str, ...] = of_family(DAMAGE)
UNSUPPORTED_KIND: str = of_family(UNSUPPORTED)[0]
QUALITY_KINDS: tuple[str, ...] = of_family(QUALITY)
DATASET_ONLY_KINDS: frozenset[str] = frozenset(name for name, kind in KINDS.items() if not kind.file_scans)
UNDECODABLE_KINDS: frozenset[str] = frozenset(name for name, kind in KINDS.items() if not kind.decodable)
SAID_BY: dict[str, str] = {name: kind.said_by for name, kind in KINDS.items() if kind.said_by}


def severity_rank(kind: str) -> int:
    """Where a kind stands in what stops a training job first (lower is worse); an unknown kind
    (one a source reported) ranks with the information kinds."""
    known = KINDS.get(kind)
    return known.severity if known is not None else INFORMATION


def severity_sql(column: str = "kind") -> str:
    """`severity_rank` of `column` as an SQL expression (order by it, then by the kind's name)."""
    arms = " ".join(
        f"WHEN '{name}' THEN {kind.severity}" for name, kind in KINDS.items() if kind.severity != INFORMATION
    )
    return f"CASE {column} {arms} ELSE {INFORMATION} END"


def label(kind: str) -> str:
    """The report's words for a kind ("" for one the registry does not know)."""
    known = KINDS.get(kind)
    return known.report_label if known is not None else ""


def default_help() -> str:
    """What `--kinds default` quarantines, for the CLI's help: the sample kinds, then where others apply."""
    groups: dict[str, list[str]] = {}
    for name in DEFAULT_KINDS:
        groups.setdefault(_WHERE.get(KINDS[name].family, ""), []).append(name)
    return "; ".join(f"{where} {', '.join(names)}".strip() for where, names in groups.items())


_WHERE = {DAMAGE: "for image files", UNSUPPORTED: "for image files", QUALITY: "with --against"}


def candidate_clauses() -> tuple[str, ...]:
    """Every distinct candidate clause, in the registry's order."""
    return tuple(dict.fromkeys(clause for kind in KINDS.values() for clause in kind.candidates))


def candidate_where(values: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The pre-filter of the per-sample pass: `WHERE` one of the kinds' candidate clauses holds, and
    its parameters. A clause whose `:name` is None in `values` is left out (nothing can be past a
    limit there is none of); a list expands to one parameter per item, and an empty one drops the
    clause. Every value is a parameter, never text in the SQL: a limit may be `inf`."""
    clauses: list[str] = []
    parameters: list[Any] = []
    for clause in candidate_clauses():
        name = _PARAMETER.search(clause)
        if name is None:
            clauses.append(clause)
            continue
        value = values[name.group(1)]
        if value is None or (isinstance(value, list | tuple) and not value):
            continue
        items = list(value) if isinstance(value, list | tuple) else [value]
        clauses.append(_PARAMETER.sub(", ".join("?" for _ in items), clause))
        parameters.extend(items)
    return "WHERE " + " OR ".join(clauses), parameters


_PARAMETER = re.compile(r":([a-z_]+)")


def markdown_table() -> str:
    """The docs' table of every kind (docs/index.md, between the `kinds:start` and `kinds:end` marks)."""
    lines = [
        "| kind | family | judged | quarantined by default | meaning |",
        "|---|---|---|---|---|",
    ]
    for family in FAMILIES:
        for name, kind in KINDS.items():
            if kind.family == family:
                default = "yes" if kind.quarantined else "no"
                meaning = kind.meaning.replace("|", "\\|")
                lines.append(f"| `{name}` | {family} | {_JUDGED[kind.judged]} | {default} | {meaning} |")
    worst = sorted((kind.severity, name) for name, kind in KINDS.items() if kind.severity != INFORMATION)
    order = ", ".join(f"`{name}`" for _rank, name in worst)
    lines += ["", f"Most severe first (the order of a sample's `kinds` in the list): {order}; then every "
              "other kind, by name."]  # fmt: skip
    return "\n".join(lines) + "\n"


_JUDGED = {"sample": "per sample", "population": "against the population"}

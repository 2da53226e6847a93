"""How fast is `datalint check`? Throughput on a large real tree, and cold start on one file.

Compares, on the same files, in the same run:
- bare `ast.parse` + `ast.walk` (the floor any ast-based linter pays),
- datalint's engine with every default rule (`Linter.check_source`, in process),
- flake8 (`flake8 --isolated -j 1`, in a subprocess), where installed,
and times `datalint check one_file.py` from a fresh interpreter (cold start) against
`python -c pass` and `ruff check` on the same file.

The project model (`lint_paths`: summaries of every file, cross-file facts, the summary cache) is
timed on the same files copied into a project folder, in rounds that take turns with the bare
parse (each in a child process pinned to one CPU, `--cpu`; wall and CPU time): cold (empty
cache), warm (every summary cached); then with `--jobs N`; then a pre-commit run, `datalint
check CHANGED.py` in a fresh interpreter, after one file of that project changed; and the peak
RSS of the whole-project lint.

    .venv/bin/python benchmarks/lint_speed.py                 # the installed torch package
    .venv/bin/python benchmarks/lint_speed.py --tree PATH --no-flake8 --repeat 1
    .venv/bin/python benchmarks/lint_speed.py --project-only --rounds 2 --jobs 2
    .venv/bin/python benchmarks/lint_speed.py --cold-only --cold-runs 31 --import-profile 15
    .venv/bin/python benchmarks/lint_speed.py --cold-only --baseline ../other-checkout
"""

from __future__ import annotations

import argparse
import ast
import compileall
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_FILE = """\
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, index):
        return index * index


loader = DataLoader(Squares(), batch_size=8, num_workers=2, prefetch_factor=4)
"""


PYPROJECT = """\
[project]
name = "example"
requires-python = ">=3.10"

[tool.datalint]
extend-select = ["DL009"]
"""


def torch_tree() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or spec.origin is None:
        raise SystemExit("torch is not installed; pass --tree PATH")
    return Path(spec.origin).parent


def load_sources(tree: Path, limit: int | None) -> list[tuple[str, bytes]]:
    paths = sorted(tree.rglob("*.py"))[:limit]
    return [(str(path), path.read_bytes()) for path in paths]


def time_bare(sources: list[tuple[str, bytes]]) -> float:
    start = time.perf_counter()
    for path, data in sources:
        try:
            tree = ast.parse(data, filename=path)
        except (SyntaxError, ValueError):
            continue
        for _ in ast.walk(tree):
            pass
    return time.perf_counter() - start


def time_datalint(sources: list[tuple[str, bytes]]) -> tuple[float, int]:
    from datalint.config import Config
    from datalint.lint.engine import Linter

    linter = Linter(Config())
    start = time.perf_counter()
    findings = sum(len(linter.check_source(data, path)) for path, data in sources)
    return time.perf_counter() - start, findings


def time_flake8(sources: list[tuple[str, bytes]]) -> float | None:
    flake8 = shutil.which("flake8", path=str(Path(sys.executable).parent))
    if flake8 is None:
        return None
    start = time.perf_counter()
    for chunk in range(0, len(sources), 200):  # keep each command line short
        paths = [path for path, _ in sources[chunk : chunk + 200]]
        subprocess.run([flake8, "--isolated", "-j", "1", "--exit-zero", "-q", *paths], capture_output=True)
    return time.perf_counter() - start


def cold_start(runs: int, baseline: Path | None = None) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU times of fresh interpreters on one file: `datalint check one_file.py`
    (configuration discovery included; as the console script when it is installed next to this
    interpreter, and as `python -m datalint`), `python -c pass` (the floor) and `ruff check` on
    the same file; with `baseline`, also another checkout's `python -m datalint` (before/after).

    The commands take turns (datalint, python, ruff, datalint, ...), so load from other processes
    on a shared machine falls on all of them alike; CPU time (user + system of the child) moves
    less with load than wall time does. .pyc files are as an install leaves them.
    """
    import resource

    compileall.compile_dir(str(ROOT / "datalint"), quiet=1)
    bin_dir = str(Path(sys.executable).parent)
    ruff, script = shutil.which("ruff", path=bin_dir), shutil.which("datalint", path=bin_dir)
    # An installed package has its .pyc files; with PYTHONDONTWRITEBYTECODE set, every run would
    # recompile whatever compileall did not cover. Unset it, and let one warm-up run write them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)  # this checkout, whatever the venv's editable install points at
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "one_file.py"
        target.write_text(ONE_FILE)
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -m datalint check one_file.py": (
                [sys.executable, "-m", "datalint", "check", target.name],
                env,
            ),
            "python -c pass": ([sys.executable, "-c", "pass"], env),
        }
        if script is not None:
            commands["datalint check one_file.py (console script)"] = ([script, "check", target.name], env)
        if ruff is not None:
            commands["ruff check one_file.py"] = (
                [ruff, "check", "--no-cache", "--isolated", target.name],
                env,
            )
        # The same file in a project with its own pyproject.toml: discovery finds and reads it.
        project = Path(folder) / "project"
        project.mkdir()
        (project / "one_file.py").write_text(ONE_FILE)
        (project / "pyproject.toml").write_text(PYPROJECT)
        command = [sys.executable, "-m", "datalint", "check", "project/one_file.py"]
        commands["python -m datalint check project/one_file.py (with [tool.datalint])"] = (command, env)
        if baseline is not None:
            before = {**env, "PYTHONPATH": str(baseline.resolve())}
            command = [sys.executable, "-m", "datalint", "check", target.name]
            commands[f"python -m datalint check one_file.py ({baseline})"] = (command, before)
            command = [sys.executable, "-m", "datalint", "check", "project/one_file.py"]
            commands[f"python -m datalint check project/one_file.py ({baseline})"] = (command, before)
        for command, command_env in commands.values():  # warm-up: .pyc files, caches, the OS file cache
            subprocess.run(command, capture_output=True, env=command_env, cwd=folder)
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in commands}
        for _ in range(runs):
            for name, (command, command_env) in commands.items():
                used = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(command, capture_output=True, env=command_env, cwd=folder)
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
                times[name][0].append(wall)
                times[name][1].append(cpu)
    return times


def import_profile(top: int) -> list[tuple[float, str]]:
    """The modules `datalint check one_file.py` spends most import time in (-X importtime, self ms)."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "one_file.py").write_text(ONE_FILE)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(ROOT)
        command = [sys.executable, "-X", "importtime", "-m", "datalint", "check", "one_file.py"]
        best: dict[str, int] = {}
        for _ in range(5):  # the least of five runs per module: noise only ever adds
            err = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder).stderr
            for line in err.splitlines():
                if not line.startswith("import time:") or "self [us]" in line:
                    continue
                self_us, _, name = line.removeprefix("import time:").split("|")
                key = name.strip()
                best[key] = min(best.get(key, 1 << 60), int(self_us))
    ranked = sorted(((us / 1000, name) for name, us in best.items()), reverse=True)
    return ranked[:top]


def project_copy(tree: Path, folder: Path) -> Path:
    """The tree's `.py` files under a fresh project root (a `pyproject.toml` marks it)."""
    target = folder / "project"
    for path in sorted(tree.rglob("*.py")):
        destination = target / tree.name / path.relative_to(tree)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
    (target / "pyproject.toml").write_text("[project]\nname = 'bench'\n", encoding="utf-8")
    return target


_PINNED = """\
import os, sys
cpu = os.environ.get("LINT_SPEED_CPU")
if cpu:
    os.sched_setaffinity(0, {int(cpu)})  # one core, as the bare parse it is compared with
"""

_PROJECT_RUN = _PINNED + """\
import json, time
from pathlib import Path
from datalint.config import Config
from datalint.lint.engine import lint_paths
from datalint.lint.project import peak_rss_mib
start = time.perf_counter()
cpu_start = time.process_time()
cache = None if sys.argv[2] == "-" else Path(sys.argv[2])
report = lint_paths([sys.argv[1]], Config(), cache_dir=cache, jobs=int(sys.argv[3]))
seconds = time.perf_counter() - start
cpu_seconds = time.process_time() - cpu_start
print(json.dumps([seconds, report.files, len(report.findings), peak_rss_mib(), cpu_seconds]))
"""

# The floor, in a child process like the lint: every file of the tree read first (reading is not
# timed), then `ast.parse` + `ast.walk` of each, one after another, the garbage collector as
# Python sets it ("default"), or with the thresholds `datalint check` runs under ("as datalint").
_BARE_RUN = _PINNED + """\
import ast, gc, json, time
from pathlib import Path
sources = [(str(p), p.read_bytes()) for p in sorted(Path(sys.argv[1]).rglob("*.py"))]
if sys.argv[2] == "as-datalint":
    from datalint.lint.engine import LINT_GC_THRESHOLDS
    gc.set_threshold(*LINT_GC_THRESHOLDS)
start = time.perf_counter()
cpu_start = time.process_time()
for path, data in sources:
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError):
        continue
    for _ in ast.walk(tree):
        pass
print(json.dumps([time.perf_counter() - start, time.process_time() - cpu_start]))
"""


def child_env(cpu: int | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LINT_SPEED_CPU", None)
    if cpu is not None:
        env["LINT_SPEED_CPU"] = str(cpu)
    return env


def time_bare_child(tree: Path, cpu: int | None, gc_mode: str = "default") -> tuple[float, float]:
    """(wall, CPU) seconds of the bare parse + walk of `tree`'s files, in a child process."""
    command = [sys.executable, "-c", _BARE_RUN, str(tree), gc_mode]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(cpu), check=True)
    wall, cpu_seconds = json.loads(done.stdout.strip().splitlines()[-1])
    return wall, cpu_seconds


def time_project(
    project: Path, cache: Path | None, jobs: int, cpu: int | None = None
) -> tuple[float, int, int, float, float]:
    """(seconds, files, findings, peak RSS MiB, CPU seconds) of a whole-project lint, in a child."""
    command = [sys.executable, "-c", _PROJECT_RUN, str(project), str(cache) if cache else "-", str(jobs)]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(cpu), check=True)
    seconds, files, findings, rss, cpu_seconds = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, files, findings, rss, cpu_seconds


def precommit_run(project: Path, cache: Path, changed: Path, runs: int) -> tuple[float, float]:
    """Median wall and CPU time of `python -m datalint check CHANGED.py` (fresh interpreter,
    warm cache) after CHANGED.py was edited; CPU time does not grow when the machine is busy."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATALINT_CACHE_DIR": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "datalint", "check", "--isolated", "--exit-zero", str(changed)]
    changed.write_text(changed.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    subprocess.run(command, capture_output=True, env=env, cwd=project)  # summarizes the edit once
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, env=env, cwd=project)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def speed(bare: float, seconds: float) -> str:
    return f"{seconds:7.2f} s  {bare / seconds:.2f}x the bare parse's speed"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def project_figures(tree: Path, jobs: int, runs: int, rounds: int, cpu: int | None) -> None:
    """Rounds of bare parse, cold lint and warm lint, taking turns on the same files, so that
    load from other processes falls on each alike; then `--jobs`, pre-commit and peak RSS."""
    with tempfile.TemporaryDirectory() as folder:
        project = project_copy(tree, Path(folder))
        where = f"pinned to CPU {cpu}" if cpu is not None else "not pinned"
        print(f"project model, one process, {where}; load average 1/5/15 min at each step:")
        rss = 0.0
        for number in range(1, rounds + 1):
            cache = Path(folder) / f"cache{number}"
            before = load()
            bare, bare_cpu = time_bare_child(project, cpu)
            tuned, _ = time_bare_child(project, cpu, "as-datalint")
            cold, files, findings, rss, cold_cpu = time_project(project, cache, 1, cpu)
            warm, _, _, _, warm_cpu = time_project(project, cache, 1, cpu)
            print(f"round {number} (load {before} -> {load()}), {files:,} files, {findings} findings:")
            print(f"  bare parse + walk:              {bare:7.2f} s  (CPU {bare_cpu:.2f} s)")
            print(f"  bare, datalint's gc thresholds: {tuned:7.2f} s  ({bare / tuned:.2f}x the default's)")
            print(f"  cold cache: {speed(bare, cold)}  (CPU {cold_cpu:.2f} s: {bare_cpu / cold_cpu:.2f}x)")
            print(f"  warm cache: {speed(bare, warm)}  (CPU {warm_cpu:.2f} s: {bare_cpu / warm_cpu:.2f}x)")
        print(f"peak RSS of the cold whole-project lint: {rss:.0f} MiB")
        cache = Path(folder) / "cache1"
        if jobs > 1:
            one, _, _, _, _ = time_project(project, cache, 1)
            parallel, _, _, _, _ = time_project(project, cache, jobs)
            print(f"warm cache, not pinned (load {load()}):")
            print(f"  1 process {one:.2f} s, --jobs {jobs} {parallel:.2f} s")
            print(f"  --jobs {jobs} speed-up: {one / parallel:.2f}x")
            cold_one, _, _, _, _ = time_project(project, None, 1)
            cold_parallel, _, _, _, _ = time_project(project, None, jobs)
            print(f"no cache, not pinned (load {load()}):")
            print(f"  1 process {cold_one:.2f} s, --jobs {jobs} {cold_parallel:.2f} s")
            print(f"  --jobs {jobs} speed-up: {cold_one / cold_parallel:.2f}x")
        files_by_name = {p.name: p for p in sorted(project.rglob("*.py"))}
        for name in ("distributed.py", "dataloader.py"):
            changed = files_by_name.get(name)
            if changed is None:
                continue
            wall, cpu_seconds = precommit_run(project, cache, changed, runs)
            lines = changed.read_bytes().count(b"\n")
            print(
                f"pre-commit, one changed file ({changed.relative_to(project)}, {lines:,} lines) "
                f"of {files:,}, warm cache (load {load()}): median {wall * 1000:.0f} ms wall, "
                f"{cpu_seconds * 1000:.0f} ms CPU"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="folder to lint (default: the installed torch package)")
    parser.add_argument("--limit", type=int, help="only the first N files (sorted by path)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best one counts")
    parser.add_argument("--no-flake8", action="store_true")
    parser.add_argument(
        "--flake8-files", type=int, default=300, help="flake8 is slow: compare on the first N files (0: all)"
    )
    parser.add_argument("--cold-runs", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=2, help="processes for the --jobs figure")
    parser.add_argument("--project-only", action="store_true", help="only the project-model figures")
    parser.add_argument("--rounds", type=int, default=2, help="alternating bare / cold / warm rounds")
    parser.add_argument(
        "--cpu", type=int, default=0, help="pin the one-process runs to this CPU (-1: do not pin)"
    )
    parser.add_argument("--cold-only", action="store_true", help="only the cold-start comparison")
    parser.add_argument("--baseline", type=Path, help="another checkout to time the cold start of too")
    parser.add_argument(
        "--import-profile", type=int, default=0, metavar="N", help="also list the N slowest imports"
    )
    args = parser.parse_args()
    if args.cold_only:
        report_cold_start(args.cold_runs, args.import_profile, args.baseline)
        return

    tree = args.tree or torch_tree()
    sources = load_sources(tree, args.limit)
    lines = sum(data.count(b"\n") for _, data in sources)
    print(f"tree: {tree}\nfiles: {len(sources):,}  lines: {lines:,}")

    cpu = args.cpu if args.cpu >= 0 and hasattr(os, "sched_setaffinity") else None
    project_figures(tree, args.jobs, max(3, args.cold_runs // 3), args.rounds, cpu)
    if args.project_only:
        return
    bare = min(time_bare(sources) for _ in range(args.repeat))
    print(f"bare ast.parse + ast.walk: {bare:7.2f} s  {lines / bare:>10,.0f} lines/s")
    runs = [time_datalint(sources) for _ in range(args.repeat)]
    ours, findings = min(runs)
    print(
        f"datalint (all rules):      {ours:7.2f} s  {lines / ours:>10,.0f} lines/s  "
        f"{ours / bare:.2f}x the bare parse  ({findings} findings)"
    )
    if not args.no_flake8:
        subset = sources[: args.flake8_files or None]
        subset_lines = sum(data.count(b"\n") for _, data in subset)
        flake8 = time_flake8(subset)
        if flake8 is None:
            print("flake8: not installed")
        else:
            ours_subset, _ = time_datalint(subset)
            print(f"on the first {len(subset):,} files ({subset_lines:,} lines):")
            print(f"  flake8 -j 1:             {flake8:7.2f} s  {subset_lines / flake8:>10,.0f} lines/s")
            rate = subset_lines / ours_subset
            print(
                f"  datalint:                {ours_subset:7.2f} s  {rate:>10,.0f} lines/s"
                f"  (flake8 takes {flake8 / ours_subset:.1f}x as long)"
            )
    report_cold_start(args.cold_runs, args.import_profile, args.baseline)


def report_cold_start(runs: int, profile: int, baseline: Path | None = None) -> None:
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    times = cold_start(runs, baseline)
    for name, (wall, cpu) in times.items():
        print(
            f"cold start, {name}: wall median {statistics.median(wall) * 1000:.0f} ms, "
            f"best {min(wall) * 1000:.0f} ms; CPU median {statistics.median(cpu) * 1000:.0f} ms "
            f"({len(wall)} runs)"
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if profile:
        ranked = import_profile(10_000)
        print(
            f"imports (least of 5 runs, self time): {sum(ms for ms, _ in ranked):.1f} ms in all; the largest:"
        )
        for ms, name in ranked[:profile]:
            print(f"  {ms:5.2f} ms  {name}")


if __name__ == "__main__":
    main()

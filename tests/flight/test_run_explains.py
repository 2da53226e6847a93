"""`datalint run` says what it can prove: a worker-start pickling failure names the object and what
`datalint check` finds in the script's project; shared memory and open files point to their fix;
the processes a command leaves running are named; a command that kills its own process group does
not take the recorder with it; in a terminal, the command still sees one and Ctrl-C reaches it."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from datalint.flight.explain import explain, project_of, script_of

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def datalint_run(cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalint", "run", "--record", str(cwd / "run.db"), "--", *command],
        capture_output=True, text=True, timeout=180, cwd=cwd, env=_env(), start_new_session=True,
    )


# The messages as Python and torch print them (research: pitfalls B.2, P26, P27).
@pytest.mark.parametrize(("output", "subject"), [
    ("_pickle.PicklingError: Can't pickle <function <lambda> at 0x7f10>: attribute lookup <lambda> on "
     "__main__ failed", "<function <lambda>>"),
    ("AttributeError: Can't pickle local object 'LambdaTf.__init__.<locals>.<lambda>'",
     "LambdaTf.__init__.<locals>.<lambda>"),
    ("AttributeError: Can't get local object 'train.<locals>.<lambda>'", "train.<locals>.<lambda>"),
    ("AttributeError: Can't get attribute 'local_collate' on <module '__mp_main__' from 'train.py'>",
     "local_collate"),
    ("TypeError: cannot pickle 'sqlite3.Connection' object", "sqlite3.Connection"),
    ("TypeError: h5py objects cannot be pickled", "h5py"),
])
def test_each_pickling_message_names_what_could_not_be_pickled(output: str, subject: str) -> None:
    (found,) = explain(f"Traceback (most recent call last):\n  ...\n{output}\n")
    assert (found.cause, found.subject, found.message) == ("pickling", subject, output)
    assert "module level" in found.advice and "DL101" in found.advice


def test_shared_memory_and_open_files_point_to_their_fixes() -> None:
    shm = ("RuntimeError: unable to allocate shared memory(shm) for file </torch_2_1>: No space left on "
           "device (28)")
    files = "RuntimeError: Too many open files. Communication with the workers is no longer possible."
    found = explain(f"{shm}\nsomething else\n{files}\n")
    assert [f.cause for f in found] == ["shared memory", "open files"]
    assert "datalint doctor" in found[0].advice and "--shm-size" in found[0].advice
    assert "file_system" in found[1].advice and "ulimit -n" in found[1].advice
    assert explain("ValueError: a bug of the training's own\n") == []


def test_the_script_and_its_project_are_found_from_the_command(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    script = tmp_path / "src" / "train.py"
    script.parent.mkdir()
    script.write_text("pass\n")
    assert script_of(["python", "-u", str(script), "--epochs", "1"]) == script
    assert script_of([str(script)]) == script
    assert script_of(["python", "-m", "trainer"]) is None
    assert project_of(script) == tmp_path


SPAWN_WITH_A_LAMBDA = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Squares(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return torch.tensor([i * i])


    if __name__ == "__main__":
        loader = DataLoader(Squares(), batch_size=2, num_workers=1, multiprocessing_context="spawn",
                            collate_fn=lambda batch: torch.cat(batch))
        for batch in loader:
            print(batch)
    """
)


def test_a_worker_start_pickling_error_names_the_lambda_and_the_check_finding(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SPAWN_WITH_A_LAMBDA)
    done = datalint_run(tmp_path, sys.executable, "train.py")
    assert done.returncode == 1
    # the training's own output is passed through whole, then explained
    assert "Traceback (most recent call last)" in done.stderr
    assert "pickling: _pickle.PicklingError: Can't pickle <function <lambda>" in done.stderr
    assert "<function <lambda>> could not be pickled" in done.stderr
    assert f"`datalint check` in {tmp_path} finds:" in done.stderr
    assert re.search(r"^    train\.py:\d+:\d+: DL101 \[error\] `collate_fn` is a lambda", done.stderr, re.M)


def test_processes_the_command_leaves_running_are_named(tmp_path: Path) -> None:
    marker = f"datalint-left-{os.getpid()}"
    (tmp_path / "daemon.py").write_text(textwrap.dedent(
        f"""
        import os, subprocess, sys
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        # Daemons let go of the output pipes (as a daemon does), so the test's capture ends with datalint.
        quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.Popen([*sleeper, "{marker}-a"], start_new_session=True, **quiet)
        if os.fork() == 0:  # a daemon's double fork: its parent exits, init (or a subreaper) inherits it
            if os.fork() == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.execv(sys.executable, [*sleeper, "{marker}-b"])
            os._exit(0)
        os.wait()
        print("main done")
        """
    ))
    try:
        done = datalint_run(tmp_path, sys.executable, "daemon.py")
    finally:
        subprocess.run(["pkill", "-f", marker], check=False)
    assert done.returncode == 0 and done.stdout == "main done\n"
    left = [line for line in done.stderr.splitlines() if line.startswith("datalint run: left running: pid")]
    assert sorted(line.rsplit(" ", 1)[-1] for line in left) == [f"{marker}-a", f"{marker}-b"]
    assert all("time.sleep(60)" in line for line in left)


def test_a_resource_tracker_that_follows_its_main_is_not_called_left_running(tmp_path: Path) -> None:
    (tmp_path / "tracker.py").write_text(
        "import multiprocessing.resource_tracker as t\nt.ensure_running()\nprint('ok')\n"
    )
    done = datalint_run(tmp_path, sys.executable, "tracker.py")
    assert done.returncode == 0 and "left running" not in done.stderr


@pytest.mark.parametrize("name", ["SIGTERM", "SIGKILL"])
def test_a_command_that_signals_its_own_process_group_leaves_the_recorder_to_say_so(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / "group.py").write_text(
        f"import os, signal, time\ntime.sleep(0.5)\nos.killpg(0, signal.{name})\ntime.sleep(5)\n"
    )
    done = datalint_run(tmp_path, sys.executable, "group.py")
    number = getattr(signal, name).value
    assert done.returncode == 128 + number
    assert f"datalint run: the run ended badly (killed by {name})" in done.stderr
    assert f"datalint run: record in {tmp_path / 'run.db'}" in done.stderr


def run_in_a_terminal(folder: Path, script: str) -> tuple[int, int]:
    """`datalint run -- python SCRIPT` as a shell's job: a session whose controlling terminal is a pty.
    Returns (datalint's pid, the terminal's side the user types into and reads)."""
    pid, terminal = pty.fork()
    if pid == 0:
        # A shell's job starts with SIGINT at its default; a test runner's worker may ignore it, and
        # an ignored signal stays ignored across exec.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.chdir(folder)
        os.environ["PYTHONPATH"] = str(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "datalint", "run", "--record", "run.db", "--",
                                  sys.executable, script])
    return pid, terminal


def read_terminal(terminal: int, until: bytes | None = None, wait: float = 120.0) -> bytes:
    """What the terminal shows, until every line in `until` (newline-separated) has appeared, or,
    with None, until every holder of it has closed it."""
    output, deadline = b"", time.monotonic() + wait
    while time.monotonic() < deadline:
        if until is not None and all(part in output for part in until.split(b"\n")):
            break
        if select.select([terminal], [], [], 0.5)[0]:
            try:
                piece = os.read(terminal, 4096)
            except OSError:  # EIO: every holder of the terminal closed it
                break
            if not piece:
                break
            output += piece
    return output


def test_in_a_terminal_the_command_sees_one_and_ctrl_c_reaches_it(tmp_path: Path) -> None:
    (tmp_path / "interactive.py").write_text(textwrap.dedent(
        """
        import os, sys, time
        print(f"stderr is a terminal: {os.isatty(2)}", file=sys.stderr, flush=True)
        try:  # the Ctrl-C may come as soon as "ready" is out
            print("ready", flush=True)
            time.sleep(60)
        except KeyboardInterrupt:
            print("interrupted by the terminal", flush=True)
            sys.exit(3)
        """
    ))
    pid, terminal = run_in_a_terminal(tmp_path, "interactive.py")
    # Both lines read first: a Ctrl-C makes the terminal drop the output not yet read.
    output = read_terminal(terminal, until=b"ready\nstderr is a terminal")
    os.write(terminal, b"\x03")  # Ctrl-C, as typed
    output += read_terminal(terminal)
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    assert "stderr is a terminal: True" in text
    assert "interrupted by the terminal" in text, text
    assert os.waitstatus_to_exitcode(status) == 3
    assert "the run ended badly (exited with 3)" in text


def wait_stopped_or_ended(pid: int, within: float) -> int:
    """waitpid(pid, WUNTRACED), bounded: a datalint that neither stops nor ends is killed with its
    session, and the test fails saying so rather than hanging the suite."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if found:
            return status
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"datalint neither stopped nor ended within {within:.0f} s of the Ctrl-Z")


def test_a_stopped_process_is_told_by_its_state_whatever_sigchld_said() -> None:
    """The recorder's loop asks /proc as well as the SIGCHLD's details: two SIGCHLDs pending at once
    are kept as one, so a stop can come with the details of another child's signal."""
    from datalint.flight.supervise import stopped_by_signal

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not stopped_by_signal(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)  # stopped now
        assert stopped_by_signal(child.pid)
        os.kill(child.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while stopped_by_signal(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not stopped_by_signal(child.pid)
    finally:
        child.kill()
        child.wait()


def test_ctrl_z_stops_the_command_and_then_datalint_and_fg_resumes_both(tmp_path: Path) -> None:
    (tmp_path / "pausable.py").write_text(textwrap.dedent(
        """
        import time
        print("ready", flush=True)
        time.sleep(1.5)
        print("done", flush=True)
        """
    ))
    pid, terminal = run_in_a_terminal(tmp_path, "pausable.py")
    output = read_terminal(terminal, until=b"ready")
    os.write(terminal, b"\x1a")  # Ctrl-Z, as typed: the command's group is the terminal's foreground
    status = wait_stopped_or_ended(pid, within=60.0)
    assert os.WIFSTOPPED(status), "datalint stops itself once the command is stopped, as a shell's job does"
    time.sleep(2.0)  # the command is stopped too: its 1.5 s pass only after it is continued
    output += read_terminal(terminal, until=b"done", wait=0.5)
    assert b"done" not in output
    os.kill(pid, signal.SIGCONT)  # what `fg` does to the job
    output += read_terminal(terminal)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output.decode(errors="replace")
    assert b"done" in output

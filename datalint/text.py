"""Text on its way to a person or a file format: escaped, lossless, and never itself a crash.

File names on Linux are bytes. Python hands the ones that are not UTF-8 over as strings with
surrogate escapes (`b"\\xff"` becomes `"\\udcff"`), which no UTF-8 encoder, SQLite or terminal
accepts; and a name may hold newlines or a terminal's escape sequences (a window title, a
clipboard write). Everything printed for a person goes through `printable` or `shown_name`;
everything stored keeps the exact bytes. Standard library only: `datalint check` uses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# C0 and C1 controls, DEL, line/paragraph separators, bidirectional overrides and isolates (they
# reorder what a reader sees), and lone surrogates (bytes that were not UTF-8). A pattern as text:
# `re` compiles it on first use, not at import.
_UNPRINTABLE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: one byte of the original name
        return f"\\x{code - 0xDC00:02x}"
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character, bidi override and undecodable byte escaped (`\\e`, `\\xff`).

    For messages and details: what the terminal shows is what the text says, on one line.
    """
    return re.sub(_UNPRINTABLE, _escape, text)


def printable_lines(text: str) -> str:
    """`printable` line by line: a message that is meant to span lines keeps them."""
    return "\n".join(printable(line) for line in text.split("\n"))


def shown_name(name: str) -> str:
    """A file name or sample key for a person: as is when plain, else `$'...'` with escapes.

    The quoted form is the shell's ANSI-C quoting (what `ls` prints for such names), so it can
    be pasted into a shell, and it never equals another name's plain form.
    """
    if not re.search(_UNPRINTABLE, name) and not name.startswith("$'"):
        return name
    return "$'" + printable(name.replace("\\", "\\\\").replace("'", "\\'")) + "'"


def name_bytes(name: str) -> bytes:
    """The bytes a file name (or key) stands for: surrogate escapes back to the original bytes.

    A key made in Python may hold a surrogate that stands for no byte (`"\\ud800"`); it is
    written as UTF-8 would write it if it could, rather than refused.
    """
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")


def is_utf8(name: str) -> bool:
    """True when `name` can be written as UTF-8 as it is (no surrogate-escaped bytes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def safe_str(value: object) -> str:
    """`str(value)`, or a description of why it could not be had: a `__str__` may raise anything."""
    try:
        text = str(value)
        return text if isinstance(text, str) else "<str() returned no string>"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # user objects: their __str__ is as untrusted as their __getitem__
        try:
            return f"<str() failed: {type(exc).__name__}>"
        except BaseException:
            return "<str() failed>"


def exception_text(exc: BaseException) -> str:
    """`Type: message` of an exception, never raising, whatever its `__str__` does."""
    try:
        name = type(exc).__name__
    except Exception:
        name = "Exception"
    message = safe_str(exc).strip()
    return f"{name}: {message}" if message else name


def did_you_mean(given: str, choices: Iterable[str]) -> str:
    """` (did you mean 'corrupt'?)` for the choice closest to `given`, or '' when none is close."""
    import difflib  # only a usage error needs it; every start would pay for it

    close = difflib.get_close_matches(given, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""

"""The arguments the ``effsearch`` command and the Python API both take, and what each calls them.

A message names such an argument once, as the command's flag (``--storage``, or ``--pick=knee``
with its value: argparse takes both); whoever shows it words it for its reader (``said``): the
command as written, Python as the keyword the function takes (``storage=``, ``pick=knee``),
since a notebook has no flags. ``cli.main`` marks its commands
(``command_line``); anything else reads as Python. A leaf.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator

# Each flag and the api.py keyword that takes the same value (cli.py passes one to the other).
KEYWORDS = {
    "--storage": "storage",
    "--pick": "pick",
    "--n-trials": "n_trials",
    "--timeout": "timeout",
    "--budget": "budget",
    "--workers": "workers",
    "--warm-start": "warm_start",
    "--plugin": "plugins",
    "--data-dir": "data_dir",
    "--format": "format",
}
_FLAG = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in KEYWORDS) + r")(?![\w-])=?")

_ON_COMMAND_LINE: contextvars.ContextVar[bool] = contextvars.ContextVar("effsearch_command_line", default=False)


@contextlib.contextmanager
def command_line() -> Iterator[None]:
    """Messages shown within say the command's flags (one command of ``cli.main``)."""
    token = _ON_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_COMMAND_LINE.reset(token)


def said(text: str) -> str:
    """``text`` with each flag it names as its reader calls it: the flag on the command line,
    ``keyword=`` in Python."""
    if _ON_COMMAND_LINE.get():
        return text
    return _FLAG.sub(lambda m: f"{KEYWORDS[m.group(1)]}=", text)


def named(field: str) -> str:
    """A ConfigError's field as its reader calls it: a flag on the command line, else the keyword."""
    if _ON_COMMAND_LINE.get():
        return field
    return KEYWORDS.get(field, field)

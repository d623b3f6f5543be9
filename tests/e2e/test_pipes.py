"""A command whose reader goes away (``effsearch status S | head -2``) ends quietly, as Unix tools
do: no BrokenPipeError traceback, the exit status a shell shows for SIGPIPE."""

import os
import subprocess
import sys


def test_a_closed_pipe_ends_the_command_without_a_traceback():
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes its first line
    try:
        p = subprocess.run(
            [sys.executable, "-m", "effsearch.cli", "recipes"], stdout=write, stderr=subprocess.PIPE, text=True
        )
    finally:
        os.close(write)
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr
    assert p.returncode == 141, (p.returncode, p.stderr)

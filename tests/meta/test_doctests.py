"""The API's ``>>>`` examples run as written (``doctest``), so the documented calls and their
answers cannot drift from the code. Examples that run a study (minutes) are marked +SKIP:
``run_study`` and what reads its result in effsearch/__init__.py and effsearch/api.py."""

import doctest

import pytest

import effsearch
from effsearch import api


@pytest.mark.parametrize("module", [effsearch, api], ids=lambda m: m.__name__)
def test_the_api_examples_run(module, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes (a journal, a result) writes here
    failed, tried = doctest.testmod(module, globs={"effsearch": effsearch}, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failed == 0, f"{failed} of {tried} examples in {module.__name__} failed (printed above)"

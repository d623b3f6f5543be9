"""Everything effsearch needs to run cords 0.0.4 as installed; nothing else.

Why this module exists: ``cords`` (the CORDS subset-selection library, last
released as 0.0.4) cannot be imported on today's stack, and three of its
supervised strategies have bugs that silently change what they compute. The
strategies themselves are used unchanged; only these points are patched, here
and nowhere else, and ``tests/trainer/test_selection.py`` fails if any stops working:

1. Imports. ``import cords.selectionstrategies.SL`` pulls in
   ``cords.utils.data.datasets.SL.builder``, which at module level does
   ``from sklearn.datasets import load_boston`` (removed in scikit-learn 1.2)
   and ``import torchtext.data`` (not a dependency; torchtext is abandoned), and
   ``from cgi import test`` (``cgi`` is gone in Python 3.13). None of these is
   used by the strategies. We install stand-ins for the import only and take
   them away again, so no other code sees a fake ``load_boston`` or ``torchtext``.
2. CRAIG scores in a shuffled order. ``CRAIGStrategy.compute_score`` iterates
   ``SubsetRandomSampler(idxs)``, so the rows of its gradient-distance matrix
   are in random order while the code maps them back as if in ``idxs`` order:
   the chosen points and weights belong to other samples. We give it a sampler
   that keeps ``idxs`` order.
3. ``RandomStrategy.select`` calls ``np.random.seed()`` (seed from OS entropy)
   each time: runs are not reproducible and NumPy's global stream (MixUp uses
   it) is re-seeded under everyone's feet. Its ``np`` is a NumPy whose
   ``random.seed`` does nothing; :func:`seeded` makes every CORDS call
   reproducible and leaves the global RNG states as they were.
4. ``GradMatchStrategy.ompwrapper`` takes a NumPy branch when ``device ==
   "cpu"`` that drops ``lam`` and ``eps`` (it passes ``lam=0`` and the default
   tolerance); :func:`gradmatch_device` names the CPU so that the torch OMP
   solver, which honours both, runs there too.
5. CRAIG's facility-location solver, apricot, builds and numba-compiles its
   gain kernels inside every ``fit`` (about 1.5 s each on 2 cores; CRAIG per
   class fits once per class per selection). The kernel factories are memoised,
   so each compiles once per process.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import random
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

import numpy as np
import torch

_STRATEGIES: types.SimpleNamespace | None = None


@contextlib.contextmanager
def _import_stand_ins() -> Iterator[None]:
    """Stand-ins for cords' unused module-level imports, present only while importing it."""
    import sklearn.datasets

    added_boston = "load_boston" not in vars(sklearn.datasets)
    if added_boston:

        def load_boston(*_a: Any, **_k: Any) -> NoReturn:  # pragma: no cover - cords never calls it on our path
            raise ImportError("load_boston was removed from scikit-learn 1.2 (stand-in for cords' import)")

        sklearn.datasets.load_boston = load_boston
    added = []
    if importlib.util.find_spec("torchtext") is None:
        for name in ("torchtext", "torchtext.data"):
            sys.modules[name] = types.ModuleType(name)
            added.append(name)
        sys.modules["torchtext"].data = sys.modules["torchtext.data"]  # type: ignore[attr-defined]
    if importlib.util.find_spec("cgi") is None:  # Python >= 3.13
        cgi = types.ModuleType("cgi")
        cgi.test = None  # type: ignore[attr-defined]
        sys.modules["cgi"] = cgi
        added.append("cgi")
    try:
        yield
    finally:
        if added_boston:
            del sklearn.datasets.load_boston
        for name in added:
            sys.modules.pop(name, None)


class InOrderSampler(torch.utils.data.Sampler):
    """``SubsetRandomSampler``'s signature, without the shuffle (fix 2)."""

    def __init__(self, indices: Iterable[int], generator: torch.Generator | None = None) -> None:
        self.indices = [int(i) for i in indices]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


class _NumpyRandomNoReseed:
    def __getattr__(self, name: str) -> Any:
        if name == "seed":
            return lambda *_a, **_k: None
        return getattr(np.random, name)


class _NumpyNoReseed:
    """NumPy as cords' randomstrategy module sees it: ``np.random.seed()`` is a no-op (fix 3)."""

    random = _NumpyRandomNoReseed()

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def strategies() -> types.SimpleNamespace:
    """The patched ``cords.selectionstrategies.SL`` classes (imported once)."""
    global _STRATEGIES
    if _STRATEGIES is None:
        import warnings

        numpy_errors = np.geterr()
        with _import_stand_ins(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # cgi, pkg_resources in apricot
            sl = importlib.import_module("cords.selectionstrategies.SL")
        # Two cords helpers call np.seterr(all='raise') at import, for the whole process: an
        # underflow in Optuna's TPE (same process) then raised and lost a trial.
        np.seterr(**numpy_errors)
        craig = importlib.import_module("cords.selectionstrategies.SL.craigstrategy")
        craig.SubsetRandomSampler = InOrderSampler  # type: ignore[attr-defined]
        rnd = importlib.import_module("cords.selectionstrategies.SL.randomstrategy")
        rnd.np = _NumpyNoReseed()  # type: ignore[attr-defined]
        fl = importlib.import_module("apricot.functions.facilityLocation")
        for name in ("calculate_gains", "calculate_gains_sparse", "calculate_gains_sieve"):
            factory = getattr(fl, name)
            if not hasattr(factory, "cache_info"):
                setattr(fl, name, functools.lru_cache(maxsize=None)(factory))
        _STRATEGIES = types.SimpleNamespace(
            RandomStrategy=sl.RandomStrategy,
            GLISTERStrategy=sl.GLISTERStrategy,
            CRAIGStrategy=sl.CRAIGStrategy,
            GradMatchStrategy=sl.GradMatchStrategy,
        )
    return _STRATEGIES


def precompile_craig(optimizer: str | None, sparse: bool) -> None:
    """Compile the apricot kernels CRAIG's ``FacilityLocationSelection`` will use (fix 5), so the
    one-time JIT cost lands in setup, not in the first selection."""
    strategies()
    fl = importlib.import_module("apricot.functions.facilityLocation")
    lazy = optimizer in ("lazy", "approximate-lazy")
    factory = fl.calculate_gains_sparse if sparse else fl.calculate_gains
    factory(fl.sdtypes if sparse else fl.dtypes, not lazy, True, False)
    fl.calculate_gains_sieve(fl.sieve_dtypes, True, True, False)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed NumPy's and Python's global RNGs (CORDS draws from both) for one call, then restore them."""
    np_state, py_state = np.random.get_state(), random.getstate()
    np.random.seed(seed % 2**32)
    random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)


def gradmatch_device(device: str) -> str:
    """The device string for GradMatch: ``"cpu"`` would select its lossy NumPy OMP branch (fix 4)."""
    return "cpu:0" if str(device) == "cpu" else str(device)

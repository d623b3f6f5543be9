"""stratify.stratified_split is sklearn's stratified ``train_test_split``, draw for draw: the same
rows, in the same order, and a ValueError in the same cases (every split a study ever carved stays
as it was)."""

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from effsearch.trainer.data.stratify import stratified_split


def _cases():
    rng = np.random.default_rng(0)
    for case in range(300):
        k = int(rng.integers(1, 12))
        n = int(rng.integers(2, 400))
        # even, skewed and tied class sizes; labels that are not 0..k-1
        p = rng.dirichlet(np.full(k, 0.3 if case % 3 == 0 else 5.0))
        y = rng.choice(np.arange(k) * 7 + 3, size=n, p=p)
        idx = np.sort(rng.choice(10 * n, size=n, replace=False))  # positions, as _split passes them
        seed = int(rng.integers(0, 2**31 - 1))
        if case % 2:
            yield idx, y, seed, {"test_size": float(rng.choice([0.05, 0.1, 0.2, 0.25, 1 / 3, 0.5, 0.9]))}
        else:
            yield idx, y, seed, {"train_size": int(rng.integers(1, n))}


def test_stratified_split_returns_what_sklearn_returns_and_refuses_where_it_refuses():
    agreed = refused = 0
    for idx, y, seed, size in _cases():
        try:
            want = train_test_split(idx, stratify=y, random_state=seed, **size)
        except ValueError as e:
            with pytest.raises(ValueError) as ours:
                stratified_split(idx, y, seed, **size)
            assert str(ours.value) == str(e), (len(idx), size)
            refused += 1
            continue
        got = stratified_split(idx, y, seed, **size)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (len(idx), size)
        agreed += 1
    assert agreed > 100 and refused > 20  # both paths held to sklearn's


def test_each_class_keeps_its_share_on_both_sides():
    y = np.repeat(np.arange(4), [40, 20, 10, 10])
    kept, held = stratified_split(np.arange(80), y, 3, test_size=0.25)
    assert len(held) == 20 and len(set(kept) | set(held)) == 80
    counts = np.bincount(y[held]).tolist()  # 10, 5, 2.5, 2.5: the tie goes to one of the last two
    assert counts[:2] == [10, 5] and sorted(counts[2:]) == [2, 3]

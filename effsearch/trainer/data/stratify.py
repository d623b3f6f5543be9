"""Stratified splits of a user's classes (``stratified_split``), and why one could not be carved,
with what to do (``refusal``: the one message every carve, images and texts, test, validation or
a data fraction, refuses with).

``stratified_split`` is sklearn's stratified ``train_test_split``, draw for draw
(tests/trainer/test_stratify.py holds it to sklearn's): every run and worker carves its validation
split, and importing sklearn for it took 2-3 s of each process's start on two cores.

A stratified split needs two members a class (one each side) and, each side, a member of every
class: sklearn's message says which of these failed, but not what to change."""

from __future__ import annotations

import math

import numpy as np

from effsearch.config import ConfigError

# Where a source carries a split of its own, by dataset kind and split: no carving then.
OWN_SPLIT = {
    ("npz", "val"): "x_val and y_val in the .npz",
    ("import", "val"): "x_val and y_val in what the callable returns",
    ("imagefolder", "val"): "a val/ folder beside train/",
    ("imagefolder", "test"): "a test/ folder beside train/",
    ("hf", "val"): "a validation split in the saved DatasetDict",
    ("hf", "test"): "a test split in the saved DatasetDict",
    ("jsonl", "val"): "a split column (dataset.split_column) naming validation rows",
    ("jsonl", "test"): "a split column (dataset.split_column) naming test rows",
}
OWN_SPLIT[("csv", "val")], OWN_SPLIT[("csv", "test")] = OWN_SPLIT[("jsonl", "val")], OWN_SPLIT[("jsonl", "test")]


_SIZE = "either positive and smaller than the number of samples"


def stratified_split(
    idx: np.ndarray, y: np.ndarray, seed: int, test_size: float | None = None, train_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held out) of ``idx``, stratified by its labels ``y``: ``test_size`` (a share) held out,
    or ``train_size`` (a count) kept; as ``sklearn.model_selection.train_test_split(idx, test_size=...,
    train_size=..., stratify=y, random_state=seed)`` returns them, the same rows in the same order.
    ValueError, with sklearn's words, where it has no stratified split."""
    n = len(idx)
    if test_size is not None:
        if not 0 < test_size < 1:
            raise ValueError(f"test_size={test_size} should be {_SIZE} {n} or a float in the (0, 1) range")
        n_test = math.ceil(test_size * n)
        n_train = n - n_test
    else:
        assert train_size is not None
        if not 0 < train_size < n:
            raise ValueError(f"train_size={train_size} should be {_SIZE} {n} or a float in the (0, 1) range")
        n_train, n_test = train_size, n - train_size
    if n_train == 0:
        raise ValueError(
            f"With n_samples={n}, test_size={test_size} and train_size={train_size}, the resulting train set "
            "will be empty. Adjust any of the aforementioned parameters."
        )
    classes, y_indices, class_counts = np.unique(np.asarray(y), return_inverse=True, return_counts=True)
    k = len(classes)
    if class_counts.min() < 2:
        few = classes[class_counts < 2].tolist()
        raise ValueError(
            "The least populated classes in y have only 1 member, which is too few. The minimum number of "
            f"groups for any class cannot be less than 2. Classes with too few members are: {few}"
        )
    if n_train < k:
        raise ValueError(f"The train_size = {n_train} should be greater or equal to the number of classes = {k}")
    if n_test < k:
        raise ValueError(f"The test_size = {n_test} should be greater or equal to the number of classes = {k}")
    members = np.split(np.argsort(y_indices, kind="stable"), np.cumsum(class_counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(class_counts, n_train, rng)
    t_i = _approximate_mode(class_counts - n_i, n_test, rng)
    train: list = []
    test: list = []
    for i in range(k):
        shuffled = members[i].take(rng.permutation(class_counts[i]), mode="clip")
        train.extend(shuffled[: n_i[i]])
        test.extend(shuffled[n_i[i] : n_i[i] + t_i[i]])
    return idx[rng.permutation(train)], idx[rng.permutation(test)]


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.RandomState) -> np.ndarray:
    """How many of ``n_draws`` come from each class: the floor of each class's share, the rest to
    the largest remainders, ties broken at random (sklearn.utils.extmath._approximate_mode)."""
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need = int(n_draws - floored.sum())
    if need > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (tied,) = np.where(remainder == value)
            now = min(len(tied), need)
            floored[rng.choice(tied, size=now, replace=False)] += 1
            need -= now
            if need == 0:
                break
    return floored.astype(int)


def refusal(
    field: str,
    y: np.ndarray,
    share: float,
    what: str,
    unit: str,
    own: str | None,
    error: ValueError,
    names: list | None = None,
) -> ConfigError:
    """The refusal of a stratified carve of ``share`` from labels ``y``, sklearn's ``error`` the
    reason only where no simpler one is found (``what``, ``unit``: the sentence's words, "a test
    split of 0.2", "training images"; ``own``: the source's own split that would avoid carving;
    ``names``: each class's label, shown for its index)."""
    labels, counts = np.unique(y, return_counts=True)
    n, k = len(y), len(labels)
    single = [repr(names[c]) if names is not None else c for c in labels[counts < 2].tolist()]
    held = math.ceil(share * n)
    if single:
        shown = ", ".join(map(str, single[:10])) + (f" and {len(single) - 10} more" if len(single) > 10 else "")
        why = f"class{'es' if len(single) > 1 else ''} {shown} {'have' if len(single) > 1 else 'has'} one member"
        why += ": a stratified split needs two a class"
    elif held < k or n - held < k:
        why = f"{share:g} of them is {min(held, n - held)}, fewer than the {k} classes (one a class each side)"
    else:
        why = str(error)
    ways = [f"give the dataset {own}"] if own else []
    if single:
        ways.append("merge or drop the classes with one member")
    if not single and held < k and k / n <= 0.5:
        ways.append(f"raise {field} to at least {math.ceil(1000 * k / n) / 1000:g}")
    ways.append("add data")
    todo = ", ".join(ways[:-1]) + f", or {ways[-1]}" if len(ways) > 1 else ways[0]
    return ConfigError(field, f"cannot carve {what} stratified from {n} {unit} in {k} classes: {why}; {todo}")

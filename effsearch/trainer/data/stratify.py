"""Why a stratified split of a user's classes could not be carved, and what to do: the one
message every carve (images and texts; test, validation, a data fraction) refuses with.

A stratified split needs two members a class (one each side) and, each side, a member of every
class: sklearn's ``train_test_split`` says which of these failed, but not what to change."""

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


def refusal(
    field: str, y: np.ndarray, share: float, what: str, unit: str, own: str | None, error: ValueError
) -> ConfigError:
    """The refusal of a stratified carve of ``share`` from labels ``y``, sklearn's ``error`` the
    reason only where no simpler one is found (``what``, ``unit``: the sentence's words, "a test
    split of 0.2", "training images"; ``own``: the source's own split that would avoid carving)."""
    labels, counts = np.unique(y, return_counts=True)
    n, k = len(y), len(labels)
    single = labels[counts < 2].tolist()
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

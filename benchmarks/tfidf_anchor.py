"""The TF-IDF anchor of the Debian topic task: word 1-2 gram TF-IDF features and a linear SVM
(scikit-learn's LinearSVC), trained on the topic set's training split and scored on its test split,
as configs/debian-topics.yaml reads them (13 sections, the file's own split by source package).

What a transformer trained by effsearch should be read beside (docs/results.md): the classic
strong baseline of text classification, minutes on a CPU, no tuning but C.

    uv run python benchmarks/tfidf_anchor.py [--config configs/debian-topics.yaml] [--c 1.0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from effsearch.config import TrainConfig
from effsearch.trainer.data.textsources import Columns, read_jsonl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/debian-topics.yaml")
    ap.add_argument("--c", type=float, default=1.0, help="LinearSVC's C")
    args = ap.parse_args()
    from pathlib import Path

    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    d = TrainConfig.from_yaml(args.config).dataset
    rows = read_jsonl(Path(d.path), Columns(d.text_column, d.label_column, d.split_column))
    keep = [i for i, y in enumerate(rows.labels or []) if str(y) in {str(c) for c in d.classes or []}]
    split = rows.splits or []
    train = [i for i in keep if split[i] == "train"]
    test = [i for i in keep if split[i] == "test"]
    labels = np.asarray(rows.labels, dtype=object)
    t = time.perf_counter()
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
    x_train = vec.fit_transform([rows.texts[i] for i in train])  # fitted on training texts only
    clf = LinearSVC(C=args.c).fit(x_train, labels[train])
    fit = time.perf_counter() - t
    acc = float((clf.predict(vec.transform([rows.texts[i] for i in test])) == labels[test]).mean())
    print(f"train {len(train)} texts, test {len(test)}; {x_train.shape[1]:,} features; fit {fit:.1f}s")
    print(f"tfidf_test_accuracy={acc:.4f}")


if __name__ == "__main__":
    main()

"""A language model study's warm-up trains a few batches, not the whole baseline (its stream has no
labels to count examples by: the windows are its examples)."""

from effsearch.config import TrainConfig
from effsearch.search.run import workers
from tests.trainer.test_lm import corpus, lm_config


def test_a_language_model_s_warm_up_trains_a_few_batches(tmp_path):
    cfg = TrainConfig.from_dict(lm_config(corpus(tmp_path / "c.txt", n=400), epochs=2.0))
    seen = []

    def train_fn(short, **kw):
        seen.append(short)

    workers.warm_up(cfg, tmp_path / "data", train_fn)
    (short,) = seen
    windows = 0.8 * 400 * 30 // cfg.dataset.max_length  # about: a document is 30-90 bytes
    assert short.epochs < cfg.epochs / 10 and short.epochs <= workers.WARM_UP_BATCHES * cfg.batch_size / windows

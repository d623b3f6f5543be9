"""Models effsearch was not written for, each trained once on a tiny task (CPU, seconds each):
does it train, or is it refused with a message naming the field (never a traceback)?

    uv run python benchmarks/model_families.py text            # transformers configs as classifiers
    uv run python benchmarks/model_families.py lm              # ... as causal language models
    uv run python benchmarks/model_families.py images          # torchvision and timm models, 32x32 images
    uv run python benchmarks/model_families.py images timm:levit_128s   # named ones only
    uv run python benchmarks/model_families.py text --each     # each family: every dimension of its space once

Prints one line a model: ``OK`` (trained; its status and validation figure), ``REF`` (a
ConfigError: what the user is told) or ``FAIL`` (any other exception: a bug). Exits 1 if any
failed. ``--each``: each family's study space as a GPU gets it, every dimension once from that
family's config (``benchmarks/space_sweep.py``'s ``sweep_each``; minutes): ``FAIL`` names the
dimensions that crashed. Text and language models read the small topic set and corpus the tests write; images
are ``synthetic`` ones. Needs the ``text`` and ``timm`` extras.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # space_sweep, for --each

import effsearch  # noqa: E402
from tests.support.text import corpus, lm_config, tiny_text, write_jsonl  # noqa: E402

BERT_LIKE = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
GQA = {**BERT_LIKE, "num_key_value_heads": 1}
# Each family's smallest fields (their names differ: GPT-2's n_embd, DistilBERT's dim, T5's d_model).
CONFIGS = {
    "BertConfig": BERT_LIKE,
    "RobertaConfig": BERT_LIKE,
    "XLMRobertaConfig": BERT_LIKE,
    "ElectraConfig": {**BERT_LIKE, "embedding_size": 32},
    "DistilBertConfig": {"dim": 32, "n_layers": 1, "n_heads": 2, "hidden_dim": 64},
    "AlbertConfig": {**BERT_LIKE, "embedding_size": 16},
    "DebertaConfig": BERT_LIKE,
    "DebertaV2Config": BERT_LIKE,
    "ModernBertConfig": {**BERT_LIKE, "global_attn_every_n_layers": 1},
    "MPNetConfig": BERT_LIKE,
    "FunnelConfig": {"d_model": 32, "n_head": 2, "d_head": 16, "d_inner": 64, "block_sizes": [1, 1]},
    "BigBirdConfig": {**BERT_LIKE, "attention_type": "original_full"},
    "LongformerConfig": {**BERT_LIKE, "attention_window": 8},
    "GPT2Config": {"n_embd": 32, "n_layer": 1, "n_head": 2},
    "LlamaConfig": GQA,
    "MistralConfig": GQA,
    "Qwen2Config": GQA,
    "Qwen3Config": {**GQA, "head_dim": 16},
    "GemmaConfig": {**GQA, "head_dim": 16},
    "Phi3Config": GQA,
    "GPTNeoXConfig": BERT_LIKE,
    "OPTConfig": {
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "ffn_dim": 64,
        "word_embed_proj_dim": 32,
    },
    "GPTNeoConfig": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "attention_types": [[["global"], 1]]},
    "FalconConfig": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2},
    "BartConfig": {
        "d_model": 32,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "encoder_attention_heads": 2,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
    },
    "T5Config": {"d_model": 32, "num_layers": 1, "num_decoder_layers": 1, "num_heads": 2, "d_ff": 64, "d_kv": 16},
}
IMAGES = [
    *(
        f"torchvision:{n}"
        for n in (
            "mobilenet_v3_small efficientnet_b0 shufflenet_v2_x0_5 squeezenet1_1 densenet121 mnasnet0_5 "
            "regnet_y_400mf convnext_tiny swin_t vit_b_16 alexnet vgg11_bn googlenet inception_v3 maxvit_t"
        ).split()
    ),
    *(
        f"timm:{n}"
        for n in (
            "vit_tiny_patch16_224 deit_tiny_patch16_224 convnext_atto efficientnet_b0 mobilenetv3_small_050 "
            "resnet10t regnetx_002 levit_128s mobilevit_xxs edgenext_xx_small ghostnet_050 mixer_s32_224 "
            "resmlp_12_224 poolformer_s12 efficientvit_b0 fastvit_t8 tinynet_e lcnet_050 repvgg_a0 cspresnet50 "
            "dla34 hrnet_w18_small coatnet_nano_rw_224 swin_tiny_patch4_window7_224 pit_ti_224"
        ).split()
    ),
]


def config(kind: str, name: str, folder: Path) -> dict:
    if kind == "images":
        return {
            "dataset": {"name": "synthetic", "synthetic_size": 96, "image_size": 32},
            "model": {"name": name},
            "epochs": 1,
            "batch_size": 16,
            "optimizer": {"name": "sgd", "lr": 0.01},
            "device": "cpu",
            "target_accuracy": 0.5,
        }
    model = {"name": f"hf:{name}", "kwargs": CONFIGS[name]}
    if kind == "text":
        return tiny_text(write_jsonl(folder / "t.jsonl"), model=model, epochs=1)
    return lm_config(corpus(folder / "c.txt", n=120), model=model)


def each(kind: str, name: str, folder: Path) -> tuple[str, str]:
    """(word, what was said) for every dimension of ``name``'s study space trained once."""
    import io

    import yaml
    from space_sweep import sweep_each

    path = folder / f"{name.replace(':', '-')}.yaml"
    base = config(kind, name, folder)
    if kind != "lm":  # 2 epochs: the space keeps CORDS's model-based strategies (under 2 it drops them)
        base["epochs"] = 2
    path.write_text(yaml.safe_dump({"name": path.stem, "base": base, "n_trials": 1}))
    lines = io.StringIO()
    crashes = sweep_each(path, data_fraction=1.0, data_root=folder / "data", out=lines)
    trained = sum(": completed" in x or ": diverged" in x for x in lines.getvalue().splitlines())
    if crashes:
        return "FAIL", f"{len(crashes)} crashed of {trained + len(crashes)}: " + " | ".join(
            c.splitlines()[0] for c in crashes
        )
    return "OK", f"{trained} configurations trained, none crashed"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=("text", "lm", "images"))
    p.add_argument("names", nargs="*", help="models to try (default: all of the kind's)")
    p.add_argument("--each", action="store_true", help="every dimension of each family's space once")
    args = p.parse_args()
    names = args.names or (IMAGES if args.kind == "images" else list(CONFIGS))
    folder = Path(tempfile.mkdtemp(prefix="families-"))
    counts = {"OK": 0, "REF": 0, "FAIL": 0}
    for name in names:
        began = time.perf_counter()
        try:
            if args.each:
                word, said = each(args.kind, name, folder)
            else:
                r = effsearch.train(config(args.kind, name, folder), data_dir=folder / "data", progress=False)
                figure = r.final.val_loss if args.kind == "lm" else r.final.val_accuracy
                word, said = "OK", f"{r.status}, {'val loss' if args.kind == 'lm' else 'val accuracy'} {figure:.3f}"
        except effsearch.ConfigError as e:
            word, said = "REF", str(e)
        except Exception as e:  # noqa: BLE001 - what this script is for: an error that is not a refusal
            word, said = "FAIL", f"{type(e).__name__}: {e}"
        counts[word] += 1
        print(f"{word:4} {name:36} {time.perf_counter() - began:5.1f} s  {said[:400]}", flush=True)
    print(f"{args.kind}: {counts['OK']} trained, {counts['REF']} refused, {counts['FAIL']} failed of {len(names)}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())

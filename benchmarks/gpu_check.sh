#!/usr/bin/env bash
# The GPU check in one command: install effsearch its own way on a bare GPU machine,
# then train the baseline and the fast recipe, measure the trainer's per-step overhead
# against a plain loop, run the GPU study, and print the figures docs/benchmarks.md keeps.
#
#   bash benchmarks/gpu_check.sh prepare        # HERE, with a network: fill .gpu/ (wheels + data)
#   bash benchmarks/gpu_check.sh [all]          # THERE: install, then baseline, overhead, study
#   bash benchmarks/gpu_check.sh baseline|overhead|costs|shapes|recipe|study|fronts|text|lm|summary   # one part (each installs first)
#   bash benchmarks/gpu_check.sh compile-reset share resume   # GPU machines as users have them (~2 min each; compile-reset <= 6)
#   bash benchmarks/gpu_check.sh overhead shapes baseline                        # several, one install
# Sized for a 15-minute lease with 10-minute calls: on an H200 install + baseline + overhead took
# ~150 s, so `all` with the default 300 s study fits one call; `costs` (each method's cost a step,
# benchmarks/algorithm_cost.py, ~100 s; COSTS_ONLY="a,b" COSTS_ROUNDS=n) is a second call. On an
# H100, `overhead shapes costs baseline` (3 costs variants) plus a 200 s study took 538 s.
# `recipe` trains given configs briefly with TORCH_LOGS (RECIPES, RECIPE_EPOCHS, RECIPE_SECONDS;
# default: the H200 study's 208-second trial), its log streamed into $OUT.
# `fronts` runs the GPU study without its recipes' warm starts and as shipped (FRONTS, STUDY_SECONDS
# each); `STUDY_SECONDS=160 RUNS=fast bash benchmarks/gpu_check.sh baseline fronts` fits a 15-minute
# lease (519 s on an H100, 2026-11-27).
# `lm` times the built-in gpt against a plain PyTorch loop (bf16, compile), then trains the LM
# study's baseline and pick to the target loss; about 5 minutes at most (LM_SECONDS, LM_TRAIN_SECONDS).
#
# Install: with a network, the README's commands (uv and the committed uv.lock). Without one
# (the lent GPU machines have none), the wheels that `prepare` put in .gpu/wheels go on top of
# the machine's own torch, with --no-deps (mosaicml pins torch<2.7.1; the machine's newer torch
# is what is there). Data: $EFFSEARCH_DATA_DIR, else .gpu/data (prepare copies Fashion-MNIST).
# Output: .gpu/out/ (logs, result.json files, the study journal); with $OUT set, copies there.
# `text` trains the Debian topic task's baseline (configs/debian-topics.yaml) and its study's pick
# (docs/results/debian-topics-pick.yaml) with bf16 and compile, each under TEXT_SECONDS (75),
# about two minutes in all with the install: `bash benchmarks/gpu_check.sh text` (its .gpu alone:
# `PREPARE_DATA=debian-packages bash benchmarks/gpu_check.sh prepare`, about 29 MB).
# GPU_CHECK_SMOKE=1 runs every step tiny and on CPU: a check of this script, not of a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GPU=${GPU_CHECK_DIR:-$ROOT/.gpu}  # wheels, data, out/ (the tests point it elsewhere)
STUDY_SECONDS=${STUDY_SECONDS:-300}
SMOKE=${GPU_CHECK_SMOKE:-0}
step=${1:-all}
parts=("$@")

log() { printf '\n== %s\n' "$*"; }

prepare() {
  # Wheels for what the GPU image lacks (its list: /work/.library/device/KINDS.md), at the
  # versions uv.lock pins, for its Python 3.12; pure-Python ones built here when PyPI has no wheel.
  mkdir -p "$GPU/wheels" "$GPU/data"
  local pins
  pins=$(python3 - <<'EOF'
import re, pathlib
lock = pathlib.Path("uv.lock").read_text()
want = ["mosaicml", "torch-optimizer", "pytorch-ranger", "coolname", "cords", "apricot-select", "dotmap",
        "optuna", "alembic", "mako", "colorlog", "sqlalchemy", "greenlet", "plotly", "narwhals", "nose",
        # composer.loggers imports mcli at import time
        "mosaicml-cli", "argcomplete", "arrow", "backoff", "gql", "graphql-core", "prompt-toolkit", "wcwidth",
        "questionary", "ruamel-yaml", "validators", "termcolor", "tzdata",
        # not in the GPU image: gql's websockets transport (mcli imports it), and importlib_metadata
        # (composer.utils.collect_env); the first found by the rehearsal below, the second on the H200
        "websockets", "importlib-metadata",
        # dataset.tokenizer bpe (the text part); the image has one, but of its own version
        "tokenizers",
        # a lost trial's note (search/store/storage.save_note_by_id): found by `resume` on the H200
        "optuna-dashboard", "bottle"]
for name in want:
    m = re.search(r'\[\[package\]\]\nname = "%s"\nversion = "([^"]+)"' % re.escape(name), lock)
    if m:
        print(f"{name}=={m.group(1)}")
EOF
)
  for pin in $pins; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$GPU/wheels" "$pin" 2>/dev/null \
      || python3 -m pip wheel -q --no-deps -w "$GPU/wheels" "$pin"
  done
  local src=${EFFSEARCH_DATA_DIR:-$ROOT/../shared/data}
  # PREPARE_DATA: the data sets to carry (the text part alone needs only debian-packages, 7 MB,
  # tokenized there in seconds; with fashion-mnist's 30 MB and the wheels .gpu is about 58 MiB)
  local d
  for d in ${PREPARE_DATA:-fashion-mnist debian-packages}; do cp -r "$src/$d" "$GPU/data/"; done
  du -sh "$GPU"
  echo "carry .gpu: run(command='bash benchmarks/gpu_check.sh', carry=['.gpu'])"
}

install() {
  # GPU_CHECK_OFFLINE=1 takes the no-network path even with one; GPU_CHECK_PYTHON names the
  # python holding torch. Together they rehearse the GPU machine here on a copy of its torch
  # (a Python 3.12 venv with PyPI's torch==2.11.0 torchvision==0.26.0 and the image's usual
  # packages: numpy scipy scikit-learn pyyaml torchmetrics tabulate py-cpuinfo numba anyio httpx ...):
  #   GPU_CHECK_SMOKE=1 GPU_CHECK_OFFLINE=1 GPU_CHECK_PYTHON=/tmp/gpuenv/bin/python bash benchmarks/gpu_check.sh
  local base=${GPU_CHECK_PYTHON:-python3} offline=${GPU_CHECK_OFFLINE:-0}
  if [ "$SMOKE" = 1 ] && [ "$offline" != 1 ] && [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python; return; fi
  if [ "$offline" != 1 ] && "$base" -m pip download -q --no-deps -d /tmp/probe uv >/dev/null 2>&1; then
    log "install: README's commands (network)"
    python3 -m pip install -q uv && uv sync --frozen && PY=$ROOT/.venv/bin/python
  else
    log "install: no network; .gpu/wheels on the machine's own torch"
    ls "$GPU"/wheels/*.whl >/dev/null 2>&1 || { echo "no .gpu/wheels: run 'bash benchmarks/gpu_check.sh prepare' here and carry .gpu" >&2; exit 2; }
    "$base" -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/effsearch-site "$GPU"/wheels/*.whl
    export PYTHONPATH=/tmp/effsearch-site:$ROOT
    PY=$base
  fi
  "$PY" -c "import torch, composer, optuna, effsearch.cli; print('torch', torch.__version__, '| cuda:', torch.cuda.is_available(), '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
}

setup_run() {
  export EFFSEARCH_DATA_DIR=${EFFSEARCH_DATA_DIR:-$GPU/data}
  export PYTHONUNBUFFERED=1
  OUTDIR=$GPU/out
  mkdir -p "$OUTDIR"
  if [ "$SMOKE" = 1 ]; then
    DEV=cpu; PREC=fp32; COMPILE=false; SMOKE_SET=(--set epochs=0.2 --set dataset.data_fraction=0.05)
  else
    "$PY" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
      || { echo "no CUDA device here: this check needs a GPU (GPU_CHECK_SMOKE=1 tries the script on CPU)" >&2; exit 2; }
    DEV=cuda; PREC=amp_bf16; COMPILE=true; SMOKE_SET=()
  fi
}

baseline() {
  # RUNS picks among baseline, baseline-bf16 and fast (default: all three)
  log "baseline and fast recipe ($DEV): configs/fashion-mnist-baseline.yaml, configs/fashion-mnist-fast.yaml"
  local r
  for r in ${RUNS:-baseline baseline-bf16 fast}; do
    case "$r" in
      baseline) "$PY" -m effsearch.cli train configs/fashion-mnist-baseline.yaml --set device=$DEV "${SMOKE_SET[@]}" \
                  --out "$OUTDIR/baseline" 2>&1 | tail -3 ;;
      baseline-bf16) "$PY" -m effsearch.cli train configs/fashion-mnist-baseline.yaml --set device=$DEV \
                  --set precision=$PREC "${SMOKE_SET[@]}" --out "$OUTDIR/baseline-bf16" 2>&1 | tail -3 ;;
      fast) "$PY" -m effsearch.cli train configs/fashion-mnist-fast.yaml --set device=$DEV --set precision=$PREC \
                  "${SMOKE_SET[@]}" --out "$OUTDIR/fast" 2>&1 | tail -3 ;;
      *) echo "gpu_check: RUNS takes baseline, baseline-bf16, fast; not '$r'" >&2; exit 2 ;;
    esac
  done
}

overhead() {
  log "trainer overhead ($DEV): effsearch vs a plain loop, per step"
  if [ "$SMOKE" = 1 ]; then
    "$PY" benchmarks/trainer_overhead.py --device cpu --tiny --repeats 1 --epochs 0.5 --profile "$OUTDIR/profile.txt" \
      | tee "$OUTDIR/overhead.txt"
  else
    "$PY" benchmarks/trainer_overhead.py --device cuda --repeats 5 --profile "$OUTDIR/profile.txt" | tee "$OUTDIR/overhead.txt"
  fi
}

costs() {
  log "each method's cost a step ($DEV): benchmarks/algorithm_cost.py"
  if [ "$SMOKE" = 1 ]; then
    "$PY" benchmarks/algorithm_cost.py --device cpu --tiny --rounds 1 --epochs 0.2 --only ema sam | tee "$OUTDIR/costs.txt"
  else
    local only=()  # COSTS_ONLY: comma-separated variant names (they hold spaces: "sam/interval 10")
    if [ -n "${COSTS_ONLY:-}" ]; then IFS=, read -r -a only <<< "$COSTS_ONLY"; only=(--only "${only[@]}"); fi
    "$PY" benchmarks/algorithm_cost.py --device cuda --rounds "${COSTS_ROUNDS:-3}" "${only[@]}" 2>&1 \
      | grep -v "AUTOTUNE\|triton_mm\|^  mm \|strides:\|dtypes:\|num_choices\|Autotune" | tee "$OUTDIR/costs.txt"
  fi
  if [ -n "${OUT:-}" ]; then cp "$OUTDIR/costs.txt" "$OUT"/; fi
}

shapes() {
  log "a worker's first run of a new shape, cudnn_benchmark on/off, per-trial warm-up on/off ($DEV)"
  if [ "$SMOKE" = 1 ]; then
    "$PY" benchmarks/first_run_shapes.py --device cpu --tiny --epochs 0.2 --only channels_last | tee "$OUTDIR/shapes.txt"
  else
    "$PY" benchmarks/first_run_shapes.py --device cuda --repeats 1 | tee "$OUTDIR/shapes.txt"
  fi
  if [ -n "${OUT:-}" ]; then cp "$OUTDIR/shapes.txt" "$OUT"/; fi
}

recipe() {
  # Train given configs (RECIPES: comma-separated paths; default the study's 208-second trial) for
  # RECIPE_EPOCHS epochs, each under RECIPE_SECONDS, with TORCH_LOGS; the log streams into $OUT as it
  # goes, so a run the call's time limit kills still comes back.
  local list=() f name logf
  IFS=, read -r -a list <<< "${RECIPES:-benchmarks/data/gpu_slow_trial.yaml}"
  local changes=(--set epochs=${RECIPE_EPOCHS:-0.2})
  if [ "$SMOKE" = 1 ]; then changes=(--set device=cpu --set compile=false --set precision=fp32 --set epochs=0.5 \
                                 --set dataset.name=digits); fi  # no data to find
  for f in "${list[@]}"; do
    name=$(basename "$f" .yaml); logf=$OUTDIR/recipe-$name.log
    log "recipe $f (${RECIPE_SECONDS:-150} s at most)"
    local sinks=("$logf"); if [ -n "${OUT:-}" ]; then sinks+=("$OUT/recipe-$name.log"); fi
    { date +%T; TORCH_LOGS=${RECIPE_TORCH_LOGS:-recompiles} timeout "${RECIPE_SECONDS:-150}" \
        "$PY" -m effsearch.cli train "$f" "${changes[@]}" --quiet --out "$OUTDIR/recipe-$name" 2>&1 || echo "exit $?"; date +%T
      "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); f=r['final']; print('final', {k: f.get(k) for k in ('train_seconds','compile_seconds','steps','setup_seconds')}); print('points', [(round(p['epoch'],2), round(p['train_seconds'],2)) for p in r['history']])" \
        "$OUTDIR/recipe-$name/result.json" 2>&1 | tail -2
    } 2>&1 | tee "${sinks[@]}"
  done
}

study() {
  log "GPU study: studies/fashion-mnist-gpu.yaml, at most ${STUDY_SECONDS}s"
  local extra=()
  if [ "$SMOKE" = 1 ]; then
    # The GPU study file asks for device cuda: on CPU, a tiny copy of it.
    sed -e 's/device: cuda/device: cpu/' -e 's/name: fashion-mnist-gpu/name: fashion-mnist-gpu-smoke/' \
        -e 's/epochs: 10$/epochs: 2/' -e 's/{low: 2, high: 15}/{low: 0.5, high: 2}/' \
        -e 's/crop_padding: 2}/crop_padding: 2, data_fraction: 0.05}/' \
        studies/fashion-mnist-gpu.yaml > "$OUTDIR/study.yaml"
    STUDY_FILE=$OUTDIR/study.yaml; extra=(--n-trials 4)
  else
    STUDY_FILE=$OUTDIR/study.yaml
    cp studies/fashion-mnist-gpu.yaml "$STUDY_FILE"  # its journal and artifacts land beside it, in .gpu/out
  fi
  "$PY" -m effsearch.cli run "$STUDY_FILE" --timeout "$STUDY_SECONDS" "${extra[@]}" 2>&1 | tail -40
}

summary() {
  log "figures"
  "$PY" benchmarks/gpu_summary.py --out "$OUTDIR" --study "$OUTDIR/study.yaml"
  if [ -n "${OUT:-}" ]; then
    cp "$OUTDIR"/overhead.txt "$OUTDIR"/summary.txt "$OUTDIR"/profile.txt "$OUT"/ 2>/dev/null || true
    # `if`, not `&&`: a missing result (a part not run) must not make the loop, and so the script, fail
    for r in baseline baseline-bf16 fast; do if [ -f "$OUTDIR/$r/result.json" ]; then cp "$OUTDIR/$r/result.json" "$OUT/$r.json"; fi; done
  fi
}

fronts() {
  # The GPU study without its warm starts ("plain": its warm_start line removed), then as shipped
  # (warm_start: [recipes], every named recipe that fits its base), each starting trials for
  # STUDY_SECONDS; each study's figures (trials by state, compute in baseline runs, where it went, its
  # fastest front member with test >= 0.91) are printed, and copied to $OUT, as soon as it ends, so a
  # call cut short keeps them.
  local variant file
  for variant in ${FRONTS:-plain shipped}; do
    file=$OUTDIR/study-$variant.yaml
    case "$variant" in
      plain) sed -e '/^warm_start:/d' studies/fashion-mnist-gpu.yaml > "$file" ;;
      shipped) cp studies/fashion-mnist-gpu.yaml "$file" ;;
      *) echo "gpu_check: FRONTS takes plain, shipped; not '$variant'" >&2; exit 2 ;;
    esac
    sed -i "s/^name: fashion-mnist-gpu$/name: fashion-mnist-gpu-$variant/" "$file"
    if [ "$SMOKE" = 1 ]; then
      sed -i -e 's/device: cuda/device: cpu/' -e 's/epochs: 10$/epochs: 2/' -e 's/{low: 2, high: 15}/{low: 0.5, high: 2}/' \
          -e 's/crop_padding: 2}/crop_padding: 2, data_fraction: 0.05}/' "$file"
    fi
    log "GPU study, $variant: $file, trials started for ${STUDY_SECONDS}s"
    local extra=(); if [ "$SMOKE" = 1 ]; then extra=(--n-trials 2); fi
    # A study that ends with failed trials exits 1; its figures are still wanted.
    "$PY" -m effsearch.cli run "$file" --timeout "$STUDY_SECONDS" "${extra[@]}" > "$OUTDIR/study-$variant.log" 2>&1 \
      || echo "effsearch run exited $?"
    tail -25 "$OUTDIR/study-$variant.log"
    "$PY" benchmarks/gpu_summary.py --out "$OUTDIR" --study "$file" --study-only | tee "$OUTDIR/front-$variant.txt"
    if [ -n "${OUT:-}" ]; then
      cp "$OUTDIR/front-$variant.txt" "$OUTDIR/study-$variant.log" "$OUTDIR/study-$variant.journal" "$OUT"/
    fi
  done
}

text() {
  # The Debian topic task's baseline and its study's pick with bf16 and compile, each under
  # TEXT_SECONDS; a run's figures go to $OUT/text.txt, its result.json to $OUT, as soon as it ends, so
  # a call the device's time limit kills keeps the runs that finished. TEXT_DATA: another copy of
  # debian-packages.jsonl.gz (the test's small one); TEXT_RUNS picks among baseline and pick.
  local data=${TEXT_DATA:-$EFFSEARCH_DATA_DIR/debian-packages/debian-packages.jsonl.gz}
  [ -f "$data" ] || { echo "no $data: run 'bash benchmarks/gpu_check.sh prepare' here and carry .gpu" >&2; exit 2; }
  local sinks=("$OUTDIR/text.txt") r cfg
  if [ -n "${OUT:-}" ]; then sinks+=("$OUT/text.txt"); fi
  local changes=(--set device=$DEV --set precision=$PREC --set compile=$COMPILE --set "dataset.path=$data")
  if [ "$SMOKE" = 1 ]; then changes+=(--set epochs=0.5 --set dataset.tokenizer.vocab_size=300); fi
  for r in ${TEXT_RUNS:-baseline pick}; do
    case "$r" in
      baseline) cfg=configs/debian-topics.yaml ;;
      pick) cfg=docs/results/debian-topics-pick.yaml ;;
      *) echo "gpu_check: TEXT_RUNS takes baseline, pick; not '$r'" >&2; exit 2 ;;
    esac
    if [ ! -f "$cfg" ]; then echo "text $r: no $cfg, skipped" | tee -a "${sinks[@]}"; continue; fi
    log "text $r: $cfg ($DEV, $PREC, compile $COMPILE; ${TEXT_SECONDS:-75} s at most)"
    { timeout "${TEXT_SECONDS:-75}" "$PY" -m effsearch.cli train "$cfg" "${changes[@]}" --quiet \
        --out "$OUTDIR/text-$r" 2>&1 | tail -4 || echo "exit $?"
      "$PY" benchmarks/gpu_summary.py --out "$OUTDIR" --runs "text-$r"
    } 2>&1 | tee -a "${sinks[@]}"
    if [ -n "${OUT:-}" ] && [ -f "$OUTDIR/text-$r/result.json" ]; then cp "$OUTDIR/text-$r/result.json" "$OUT/text-$r.json"; fi
  done
}

lm() {
  # A language model (the built-in gpt): effsearch's trainer against a plain PyTorch loop of the same
  # model over the same windows (benchmarks/lm_overhead.py; bf16 and compile on CUDA), then the
  # study's baseline (configs/debian-lm.yaml) and its pick (docs/results/debian-lm-pick.yaml) to the
  # target loss, each under LM_TRAIN_SECONDS (default 90; the loop under LM_SECONDS, 110). Every line
  # goes into $OUT/lm.txt as it comes, each run's result.json beside it. LM_DATA: another corpus of
  # the same columns (the test's small one); LM_RUNS picks among overhead, baseline and pick.
  local sinks=("$OUTDIR/lm.txt") corpus=${LM_DATA:-$EFFSEARCH_DATA_DIR/debian-packages/debian-packages.jsonl.gz} r cfg
  if [ -n "${OUT:-}" ]; then sinks+=("$OUT/lm.txt"); fi
  for r in ${LM_RUNS:-overhead baseline pick}; do
    case "$r" in
      overhead|baseline|pick) ;;
      *) echo "gpu_check: LM_RUNS takes overhead, baseline, pick; not '$r'" >&2; exit 2 ;;
    esac
  done
  for r in ${LM_RUNS:-overhead baseline pick}; do
    if [ "$r" = overhead ]; then
      local from=(); if [ -f "$corpus" ]; then from=(--corpus "$corpus"); fi  # else its synthetic corpus
      log "language model ($DEV): gpt, effsearch vs a plain loop (benchmarks/lm_overhead.py)" | tee -a "${sinks[@]}"
      if [ "$SMOKE" = 1 ]; then
        "$PY" benchmarks/lm_overhead.py --device cpu --tiny --repeats 1 --steps 4 --data-dir "$OUTDIR/lm-data" 2>&1 \
          | tee -a "${sinks[@]}"
      else
        timeout "${LM_SECONDS:-110}" "$PY" benchmarks/lm_overhead.py --device cuda "${from[@]}" --repeats "${LM_REPEATS:-2}" \
          --steps "${LM_STEPS:-200}" --data-dir "$OUTDIR/lm-data" 2>&1 | grep --line-buffered -v "AUTOTUNE\|triton_mm\|^  mm " \
          | tee -a "${sinks[@]}" || echo "lm_overhead exited ${PIPESTATUS[0]}" | tee -a "${sinks[@]}"
      fi
      continue
    fi
    if [ ! -f "$corpus" ]; then echo "lm $r: no corpus $corpus, skipped" | tee -a "${sinks[@]}"; continue; fi
    case "$r" in baseline) cfg=configs/debian-lm.yaml ;; pick) cfg=docs/results/debian-lm-pick.yaml ;; esac
    local changes=(--set device=$DEV --set precision=$PREC --set compile=$COMPILE --set "dataset.path=$corpus")
    if [ "$SMOKE" = 1 ]; then  # a small corpus: a small vocabulary, a short validation stream
      changes+=(--set epochs=0.5 --set eval_every=0.25 --set dataset.tokenizer.vocab_size=300
                --set dataset.val_tokens=256 --set dataset.val_fraction=0.2 --set target.value=9.0)
    fi
    log "lm $r: $cfg ($DEV, $PREC, compile $COMPILE; ${LM_TRAIN_SECONDS:-90} s at most)" | tee -a "${sinks[@]}"
    { timeout "${LM_TRAIN_SECONDS:-90}" "$PY" -m effsearch.cli train "$cfg" "${changes[@]}" --data-dir "$OUTDIR/lm-data" \
        --quiet --out "$OUTDIR/lm-$r" 2>&1 | tail -6 || echo "exit $?"
      "$PY" benchmarks/gpu_summary.py --out "$OUTDIR" --runs "lm-$r"
    } 2>&1 | tee -a "${sinks[@]}"
    if [ -n "${OUT:-}" ] && [ -f "$OUTDIR/lm-$r/result.json" ]; then cp "$OUTDIR/lm-$r/result.json" "$OUT/lm-$r.json"; fi
  done
}

# GPU machines as users have them (docs/guide.md, "Several GPUs and several machines"), each part
# bounded to about two minutes and printing one summary line per figure, its results copied to $OUT
# as they come:
compile-reset() {
  # 5 consecutive compile trials in one worker, first-step seconds each: with the worker's reset
  # between trials (as shipped) and as before it (the loop's own Dynamo reset only), one call.
  # COMPILE_CONFIG: the trials' config, by default the fast recipe (a cold compile in seconds), so
  # the part takes at most 6 minutes; COMPILE_CONFIG=benchmarks/data/gpu_slow_trial.yaml is the GPU
  # study's slow trial (235 s to compile cold on an H200: a 10-minute call of its own, with
  # COMPILE_WARM_SECONDS=420).
  log "compile state per trial ($DEV): benchmarks/compile_reset.py"
  local out=(--out "$OUTDIR/compile-reset"); if [ -n "${OUT:-}" ]; then out=(--out "$OUT"); fi
  if [ "$SMOKE" = 1 ]; then
    "$PY" benchmarks/compile_reset.py --smoke --cold --trials 2 --arm-seconds 300 --arms after before "${out[@]}"
  else
    "$PY" benchmarks/compile_reset.py --device cuda --trials "${COMPILE_TRIALS:-5}" --config "${COMPILE_CONFIG:-configs/fashion-mnist-fast.yaml}" \
      --arm-seconds "${COMPILE_ARM_SECONDS:-90}" --warm-seconds "${COMPILE_WARM_SECONDS:-180}" \
      --arms ${COMPILE_ARMS:-after before} "${out[@]}"
  fi
}

share() {
  # share_devices: two workers on one GPU refused, then allowed, every trial marked shared.
  log "two workers on one GPU ($DEV): benchmarks/share_check.py"
  local out=(--out "$OUTDIR/share"); if [ -n "${OUT:-}" ]; then out=(--out "$OUT"); fi
  if [ "$SMOKE" = 1 ]; then "$PY" benchmarks/share_check.py --smoke "${out[@]}"
  else "$PY" benchmarks/share_check.py --device cuda "${out[@]}"; fi
}

resume() {
  # A trial checkpointed, its worker SIGKILLed and the trial resumed by another worker: the curve
  # against two uninterrupted runs of the same config.
  log "a trial resumed after its worker was killed ($DEV): benchmarks/resume_check.py"
  local out=(--out "$OUTDIR/resume"); if [ -n "${OUT:-}" ]; then out=(--out "$OUT"); fi
  if [ "$SMOKE" = 1 ]; then "$PY" benchmarks/resume_check.py --smoke "${out[@]}"
  else "$PY" benchmarks/resume_check.py --device cuda "${out[@]}"; fi
}

PARTS=(baseline overhead costs shapes recipe study fronts text lm compile-reset share resume summary)
known_part() { local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

case "$step" in
  prepare) prepare ;;
  *)
    if [ "${GPU_CHECK_PART:-0}" = 1 ]; then setup_run; "$step"; exit; fi
    if [ "$step" = all ]; then parts=(baseline overhead study); fi
    for part in "${parts[@]}"; do  # a typo fails here, before the install spends the lease
      known_part "$part" || { echo "gpu_check: unknown part '$part'; usage: $0 [prepare|all|$(IFS='|'; echo "${PARTS[*]}") ...]" >&2; exit 2; }
    done
    # One lease buys one try: a part that fails is reported and the others still run.
    # Each part runs as its own process (set -e holds inside it), on one install.
    install; export PY PYTHONPATH="${PYTHONPATH:-}" GPU_CHECK_PART=1; failed=()
    for part in "${parts[@]}"; do
      if [ "$part" != summary ]; then bash "$ROOT/benchmarks/gpu_check.sh" "$part" || failed+=("$part"); fi
    done
    setup_run; summary
    if [ ${#failed[@]} -gt 0 ]; then echo "gpu_check: failed: ${failed[*]}" >&2; exit 1; fi ;;
esac

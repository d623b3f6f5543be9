"""The ground floor of effsearch: what a config is and which configs are allowed.

``effsearch.spaces``, ``effsearch.trainer``, ``effsearch.objectives`` and
``effsearch.search`` stand on this package; it imports none of them.

* ``schema``: the TrainConfig dataclasses (and their YAML I/O);
* ``choices``: the allowed values by name (DATASETS, SELECTIONS, ...);
* ``fields``: field constraints (``spec``), one coercion, one dotted get/set, the YAML loader;
* ``algorithms``: the Composer algorithm table (no Composer import);
* ``rules``: every rule across fields, as data (validation, the space's gates, `space show`);
* ``readers``: the rules' and the space's readers over raw config dicts, with the schema's defaults;
* ``machine``: what this machine can run (device, bf16, extras, processes);
* ``options``: the study file's option mappings (sampler, pruner, tuning, heartbeat).
"""

from effsearch.config.choices import (
    BACKENDS,
    COMPILE_MODES,
    COMPRESSIONS,
    DATASETS,
    DEVICES,
    FUSABLE,
    GREEDY,
    LOADERS,
    MODEL_SELECTIONS,
    MODEL_WIDTHS,
    MODELS,
    OPTIMIZERS,
    PRECISIONS,
    QUANTIZE,
    QUANTIZERS,
    SCHEDULES,
    SELECTIONS,
    SPARSIFIERS,
    WEIGHTED_SELECTIONS,
)
from effsearch.config.fields import (
    MINIMAL_TRAIN,
    ConfigError,
    Loader,
    apply_override,
    check_finite,
    get_path,
    load_yaml,
    read_yaml,
    set_path,
    spec,
)
from effsearch.config.rules import validate
from effsearch.config.schema import (
    CompressionConfig,
    DatasetConfig,
    DistributedConfig,
    ModelConfig,
    OptimizerConfig,
    ScheduleConfig,
    SelectionConfig,
    SparsityConfig,
    TokenizerConfig,
    TrainFields,
    effective_batch,
    select_every,
)
from effsearch.config.trainconfig import TrainConfig

__all__ = [
    "BACKENDS",
    "COMPILE_MODES",
    "COMPRESSIONS",
    "DATASETS",
    "DEVICES",
    "FUSABLE",
    "GREEDY",
    "LOADERS",
    "MODEL_SELECTIONS",
    "MODEL_WIDTHS",
    "MODELS",
    "OPTIMIZERS",
    "PRECISIONS",
    "QUANTIZE",
    "QUANTIZERS",
    "SCHEDULES",
    "SELECTIONS",
    "SPARSIFIERS",
    "WEIGHTED_SELECTIONS",
    "MINIMAL_TRAIN",
    "ConfigError",
    "Loader",
    "apply_override",
    "check_finite",
    "get_path",
    "load_yaml",
    "read_yaml",
    "set_path",
    "spec",
    "validate",
    "CompressionConfig",
    "DatasetConfig",
    "DistributedConfig",
    "ModelConfig",
    "OptimizerConfig",
    "ScheduleConfig",
    "SelectionConfig",
    "SparsityConfig",
    "TokenizerConfig",
    "TrainConfig",
    "TrainFields",
    "effective_batch",
    "select_every",
]

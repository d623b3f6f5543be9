"""TrainConfig: the one currency between studies, the trainer and export.

The fields are ``effsearch.config.schema``'s plain dataclasses; a TrainConfig is built from a
mapping or a YAML file with every field checked on load (``effsearch.config.fields``), then every
rule across fields (``effsearch.config.rules``). Errors name the file, the dotted field and what is
allowed (exit code 2 in the CLI), in the spirit of scikit-learn's parameter validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from effsearch.config import rules, targets
from effsearch.config.fields import ConfigError, apply_override, build, overridden, read_yaml, set_path
from effsearch.config.schema import TrainFields


class TrainConfig(TrainFields):
    """A checked training config: construct it with ``from_dict``, ``from_yaml`` or ``replace``."""

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> TrainConfig:
        try:
            if isinstance(data, dict):
                targets.refuse(data.get("target_accuracy"))
                targets.refuse(data.get("target"), "target")
            cfg = build(cls, data, "")
            rules.validate(cfg)
        except ConfigError as e:
            if source:
                raise e.with_source(source) from None  # the same error, naming its source
            raise
        return cfg

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
        data = read_yaml(path)
        keys = [apply_override(data, item) for item in overrides or []]
        try:
            return cls.from_dict(data)
        except ConfigError as e:  # a value --set gave is the flag's error, not the file's
            raise e.with_source("--set" if overridden(e, keys) else str(path)) from None

    def replace(self, **dotted: Any) -> TrainConfig:
        """Copy with dotted keys replaced, validated: ``cfg.replace(**{"optimizer.lr": 0.1})``."""
        data = self.to_dict()
        for key, value in dotted.items():
            set_path(data, key, value)
        return TrainConfig.from_dict(data)

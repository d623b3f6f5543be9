"""Search spaces: which parts of a TrainConfig a study varies, and how.

``Space.build(base, section, machine)`` validates a study file's ``space:``
section against the default catalogue (``effsearch.spaces.default``);
``space.sample(trial)`` returns a config dict that passes TrainConfig's rules.
"""

from effsearch.config.machine import Machine, detect
from effsearch.spaces.default import GROUPS
from effsearch.spaces.space import Space

__all__ = ["GROUPS", "Machine", "Space", "detect"]

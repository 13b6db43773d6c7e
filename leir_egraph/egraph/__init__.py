"""The e-graph engine: LEIR in egglog, strategies as rule files, single-step rewrites."""

from .steps import (Transition, all_steps, applicable, sample_steps, single_steps,
                    steps_many)
from .strategy import RuleFileError, Strategy, load_rule_file, load_strategies

__all__ = ["Transition", "all_steps", "applicable", "sample_steps", "single_steps", "steps_many",
           "RuleFileError", "Strategy", "load_rule_file", "load_strategies"]

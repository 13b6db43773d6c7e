"""The e-graph engine: LEIR in egglog, strategies as rule files, single-step rewrites."""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "Transition": "steps", "all_steps": "steps", "applicable": "steps", "sample_steps": "steps",
    "single_steps": "steps", "steps_many": "steps", "undo_steps": "steps",
    "RuleFileError": "strategy", "Strategy": "strategy", "load_rule_file": "strategy",
    "load_strategies": "strategy", "strategy_by_id": "strategy", "UnknownStrategy": "strategy",
})

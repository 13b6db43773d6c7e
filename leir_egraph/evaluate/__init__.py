"""Single-step evaluation of a model: the paper's four pass rates, pass@k and strategy
attribution (docs/SEARCH.md §4). ``leir eval`` is the command."""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "LEVELS": "scoring", "Case": "scoring", "CaseError": "scoring", "Report": "scoring",
    "Scored": "scoring", "ask_model": "scoring", "evaluate": "scoring", "load_answers": "scoring",
    "load_cases": "scoring", "pass_at_k": "scoring", "program_from_prompt": "scoring",
})

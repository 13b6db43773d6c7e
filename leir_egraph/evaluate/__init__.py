"""Single-step evaluation of a model: the paper's four pass rates, pass@k and strategy
attribution (docs/SEARCH.md §4). ``leir eval`` is the command."""

from .scoring import (LEVELS, Case, CaseError, Report, Scored, ask_model, evaluate, load_answers,
                      load_cases, pass_at_k, program_from_prompt)

__all__ = ["evaluate", "load_cases", "load_answers", "ask_model", "program_from_prompt",
           "pass_at_k", "Case", "CaseError", "Report", "Scored", "LEVELS"]

"""The Step-TP dataset: verified single-step transitions as a dictionary dataset (Parquet,
JSONL) and chat-template training sets, balanced by difficulty (docs/DATASET.md).

    >>> from leir_egraph.dataset import DatasetConfig, Execution, build_dataset
    >>> result = build_dataset(DatasetConfig(programs=("ReLU",), per_strategy_cap=2),
    ...                        Execution(out="leir-out", workers=2))       # doctest: +SKIP
    >>> result.summary["verified"], result.rates()["transitions_per_min"]  # doctest: +SKIP
"""

from .balance import BalancePolicy, MultiEntry, balance_multi, balance_single, balance_table
from .build import BuildResult, build_dataset, finalize
from .config import DEMO_PROGRAMS, DatasetConfig, Execution
from .pipeline import StrategySelectionError, process_program, select_strategies
from .records import COLUMNS, SCHEMA
from .shards import OutputFolderError, ResumeError
from .sources import ProgramSource, SourceError, select_programs

__all__ = ["build_dataset", "finalize", "BuildResult", "DatasetConfig", "Execution",
           "DEMO_PROGRAMS", "BalancePolicy", "MultiEntry", "balance_single", "balance_multi",
           "balance_table", "process_program", "select_strategies", "StrategySelectionError",
           "COLUMNS", "SCHEMA", "ResumeError", "OutputFolderError", "ProgramSource", "SourceError",
           "select_programs"]

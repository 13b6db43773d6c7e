"""The ``leir`` command. Each subcommand lives next to the layer it exposes and provides
``register(subparsers)``; this file only assembles them.

    leir fmt FILE                          parse, validate, print canonical LEIR
    leir lower FILE --sig SIG              TIR (or CUDA source) of a program
    leir verify BEFORE AFTER --sig SIG     equivalence levels, errors, times
    leir from-torch FILE.py:Class          PyTorch module -> LEIR + signature
    leir steps FILE --sig SIG              single-step rewrites with their chain of thought
    leir search FILE --sig SIG             multi-step optimization search (verified, timed)
    leir eval CASES --answers FILE         single-step evaluation of a model's answers
"""

from __future__ import annotations

import argparse
import importlib
import sys

# (module, description) of every subcommand provider, in --help order.
SUBCOMMANDS = (
    "leir_egraph.leir.commands",
    "leir_egraph.lower.commands",
    "leir_egraph.verify.commands",
    "leir_egraph.frontend.commands",
    "leir_egraph.egraph.commands",
    "leir_egraph.search.commands",
    "leir_egraph.evaluate.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="leir", description="LEIR tensor programs: format, lower, verify, translate, rewrite.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        try:
            provider = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if module == err.name or module.startswith(f"{err.name}."):  # layer not built yet
                continue
            raise
        provider.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

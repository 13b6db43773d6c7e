"""``leir lower``: print the TIR (or CUDA source) of a LEIR program."""

from __future__ import annotations

import argparse

from ..cli import InputError
from ..leir.commands import load_program

LOWER_EXAMPLE = """example:
  leir lower leir_egraph/examples/softmax.leir --sig leir_egraph/examples/softmax.sig.json
  leir lower leir_egraph/examples/softmax.leir --sig leir_egraph/examples/softmax.sig.json --target cuda
  (TIR script for llvm, CUDA C for cuda; an invalid program or kernel prints one error line on
  stderr and exits with status 2)"""


def register(sub) -> None:
    p = sub.add_parser("lower", help="print the TIR or CUDA source of a LEIR program",
                       description="Lower a LEIR program to TVM TIR (llvm) or CUDA C source.",
                       epilog=LOWER_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="LEIR text file ('-' for standard input)")
    p.add_argument("--sig", required=True, help="signature JSON file")
    p.add_argument("--target", choices=("llvm", "cuda"), default="llvm",
                   help="llvm: print the TIR script; cuda: print the CUDA kernels (default llvm)")
    p.add_argument("--reverse-parallel", action="store_true",
                   help="run P/V/B loops serially in reverse (the Independent check's variant)")
    p.add_argument("--poison", action="store_true",
                   help="fill intermediates with NaN / the largest integer after allocation")
    p.set_defaults(handler=run_lower)


def run_lower(args) -> int:
    program = load_program(args.file, args.sig)
    from .build import build
    from .tir import lower
    options = {"reverse_parallel": args.reverse_parallel, "poison": args.poison}
    try:
        if args.target == "cuda":
            print(build(program, "cuda", **options).source())
        else:
            print(lower(program, "llvm", **options).script())
    except (RecursionError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 -- a valid program TVM refuses: the user's input
        from ..verify.session import describe_error
        raise InputError(f"{args.file}: error: {describe_error(err)}") from None
    return 0

"""``leir fmt``: parse, validate and print a LEIR file canonically."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .files import in_file, read_program, read_signature, read_text
from .parser import LeirSyntaxError, parse
from .printer import to_text
from .program import Program
from .validate import LeirValidationError, check

FMT_EXAMPLE = """example:
  leir fmt leir_egraph/examples/softmax.leir --sig leir_egraph/examples/softmax.sig.json
  (prints the canonical text; an error is one line on stderr, FILE:line:col: message, exit
  status 2)"""


def register(sub) -> None:
    p = sub.add_parser("fmt", help="parse, validate and print canonical LEIR",
                       description="Parse a LEIR file, validate it, print it canonically.",
                       epilog=FMT_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="LEIR text file ('-' for standard input)")
    p.add_argument("--sig", help="signature JSON file; enables the checks that need shapes")
    p.set_defaults(handler=run_fmt)


def load_program(path: str, sig_path: str) -> Program:
    """Read, parse and validate ``path`` with the signature at ``sig_path``; warnings go to
    stderr as ``FILE:line:col: warning: ...``. Raises LeirFileError (one line naming the file)
    for any problem."""
    program = read_program(path, read_signature(sig_path), name=Path(path).stem)
    try:
        warnings = check(program)
    except LeirValidationError as err:
        raise in_file(path, err) from None
    for warning in warnings:
        print(warning.render(path), file=sys.stderr)
    return program


def run_fmt(args) -> int:
    if args.sig:
        print(load_program(args.file, args.sig).text)
        return 0
    try:
        print(to_text(parse(read_text(args.file))))
    except LeirSyntaxError as err:
        raise in_file(args.file, err) from None
    return 0

"""``leir fmt``: parse, validate and print a LEIR file canonically."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .parser import LeirSyntaxError, parse
from .printer import to_text
from .program import Program
from .signature import Signature
from .validate import LeirValidationError, check

FMT_EXAMPLE = """example:
  leir fmt examples/softmax.leir --sig examples/softmax.sig.json
  (prints the canonical text; errors go to stderr as FILE:line:col: message, exit status 2)"""


def register(sub) -> None:
    p = sub.add_parser("fmt", help="parse, validate and print canonical LEIR",
                       description="Parse a LEIR file, validate it, print it canonically.",
                       epilog=FMT_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="LEIR text file ('-' for standard input)")
    p.add_argument("--sig", help="signature JSON file; enables the checks that need shapes")
    p.set_defaults(handler=run_fmt)


def read_source(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text()


def load_signature(path: str) -> Signature:
    """Read a signature JSON file, or exit with a one-line error naming the file."""
    try:
        return Signature.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError) as err:
        raise SystemExit(f"{path}: bad signature: {err}") from None


def load_program(path: str, sig_path: str) -> Program:
    """Parse and validate ``path`` with the signature at ``sig_path``; on a problem print
    ``FILE:line:col: message`` lines to stderr and exit with status 2."""
    text = read_source(path)
    try:
        program = Program(parse(text), load_signature(sig_path), name=Path(path).stem)
        for warning in check(program):
            print(warning.render(path), file=sys.stderr)
        return program
    except LeirSyntaxError as err:
        print(err.render(path), file=sys.stderr)
    except LeirValidationError as err:
        print(err.render(path), file=sys.stderr)
    raise SystemExit(2)


def run_fmt(args) -> int:
    if args.sig:
        print(load_program(args.file, args.sig).text)
        return 0
    try:
        print(to_text(parse(read_source(args.file))))
    except LeirSyntaxError as err:
        print(err.render(args.file), file=sys.stderr)
        return 2
    return 0

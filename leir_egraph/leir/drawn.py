"""Small valid LEIR programs drawn with hypothesis from the schema (docs/LEIR.md): the programs
the soundness check tries a rule on besides its examples (``egraph.soundcheck``), and a
strategy tests can draw from.

A drawn program has one or two nests over inputs ``A`` and ``D`` (f32 or f64):

* the first nest runs ``B^{n}_{tx=0}``, optionally with an inner ``L`` or ``U`` loop
  ``^{m}_{a=0}``; with the inner loop it writes ``C_{tx,a}`` element-wise or accumulates
  ``C_{tx} = C_{tx} op e`` (op ``+ * max min``: the implicit initialisation of docs/LEIR.md);
* the optional second nest ``B^{n}_{tx=0}`` reads ``C`` (and the inputs) into ``E_{tx}``;
* expressions are trees of depth up to 3 over reads of the inputs, small literals (0, 1,
  0.5, 2, 3, -1.5), ``+ - * /``, ``max``, ``min``, ``exp``, ``log``, ``sqrt``, ``abs`` and
  negation.

Extents ``n`` and ``m`` are 1..6. Every drawn program parses and validates (a test asserts it).
``draw_programs(seed, count)`` returns the same programs for the same arguments.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .program import Program
from .signature import Signature

LITERALS = ("0", "1", "0.5", "2", "3", "-1.5")
BINARY = ("+", "-", "*", "/")
CALLS = ("max", "min")
UNARY = ("exp", "log", "sqrt", "abs", "-")
ACCUMULATIONS = ("+", "*", "max", "min")


def expressions(reads: tuple[str, ...], depth: int = 3) -> st.SearchStrategy[str]:
    """LEIR value expressions over the texts ``reads`` (tensor reads), parenthesised."""
    leaves = st.one_of(st.sampled_from(reads), st.sampled_from(reads),
                       st.sampled_from(LITERALS).map(lambda v: f"({v})" if v[0] == "-" else v))
    if depth == 0:
        return leaves
    inner = expressions(reads, depth - 1)

    def binary(t):
        op, a, b = t
        return f"{op}({a},{b})" if op in CALLS else f"({a}{op}{b})"

    def unary(t):
        fn, a = t
        return f"(-{a})" if fn == "-" else f"{fn}({a})"

    return st.one_of(leaves,
                     st.tuples(st.sampled_from(BINARY + CALLS), inner, inner).map(binary),
                     st.tuples(st.sampled_from(UNARY), inner).map(unary))


@st.composite
def programs(draw) -> Program:
    """A hypothesis strategy of small valid LEIR programs (module docstring)."""
    code = draw(st.sampled_from(("f32", "f64")))
    n = draw(st.integers(1, 6))
    inner = draw(st.sampled_from((None, "L", "U")))
    m = draw(st.integers(1, 6))

    def read(name, subs):
        return f"{name}^{{{code},g}}_{{{subs}}}"

    subs = "tx,a" if inner else "tx"
    shape = [n, m] if inner else [n]
    loops = f"B^{{{n}}}_{{tx=0}}" + (f"{inner}^{{{m}}}_{{a=0}}" if inner else "")
    value = draw(expressions((read("A", subs), read("D", subs))))
    reduce = inner is not None and draw(st.booleans())
    outputs = []
    if reduce:
        op = draw(st.sampled_from(ACCUMULATIONS))
        target = read("C", "tx")
        value = (f"{op}({target},{value})" if op in CALLS else f"{target}{op}({value})")
        outputs.append(("C", [n]))
    else:
        target = read("C", subs)
        outputs.append(("C", shape))
    text = f"{loops}[{target}={value};];"
    if draw(st.booleans()):
        c_read = read("C", "tx") if reduce or not inner else read("C", "tx,0")
        second = draw(expressions((c_read, read("A", "tx") if not inner else read("A", "tx,0"),
                                   c_read), depth=2))
        text += f"B^{{{n}}}_{{tx=0}}[{read('E', 'tx')}={second};];"
        outputs.append(("E", [n]))
    inputs = [(name, shape) for name in ("A", "D") if f"{name}^" in text]
    signature = Signature.from_dict({
        "inputs": [{"name": k, "dtype": _DTYPES[code], "shape": s} for k, s in inputs],
        "outputs": [{"name": k, "dtype": _DTYPES[code], "shape": s} for k, s in outputs]})
    return Program.parse(text, signature)


_DTYPES = {"f32": "float32", "f64": "float64"}


def draw_programs(seed: int, count: int) -> list[Program]:
    """``count`` programs of ``programs()`` (fewer if hypothesis draws duplicates), the same
    ones for the same ``seed``."""
    out: list[Program] = []

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=False)
    @hypothesis_seed(seed)
    @given(programs())
    def collect(program):
        out.append(program)

    collect()
    return out

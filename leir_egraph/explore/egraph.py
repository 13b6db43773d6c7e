"""The space e-graph: one egglog e-graph holding every explored program, where each single step
really unions its two programs.

Every program is inserted once as ``(State <program term>)``; hash-consing stores a nest that
several programs share once. A step ``p -> q`` is ``(union (State p) (State q))``: a program
found by a step is inserted already unioned with the program it was reached from (one egglog
command: egglog costs about 1 ms per command here, whatever it does), and a union-find on the
Python side skips the unions between programs already in one e-class (in a breadth-first
exploration from one root every later step is such a no-op: all programs end in the root's
e-class). ``N k`` / ``P k`` are handle constructors naming a nest's / program's e-class. ``State``
is a wrapper no other term contains, so congruence closure merges nothing below it: a union
says "these two whole programs are equivalent" and never "these two suffixes are", which would
not hold (a suffix's meaning depends on what runs before it).

>>> from leir_egraph import Program
>>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 2]}],
...        "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 2]}]}
>>> p = Program.parse("L^{4}_{a=0}L^{2}_{c=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c};];", sig)
>>> q = Program.parse("L^{2}_{c=0}L^{4}_{a=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c};];", sig)
>>> g = SpaceEGraph()
>>> g.add(p.text, p); g.add(q.text, q); g.union(p.text, q.text); g.flush()   # all sent
True
>>> g.size()["State"]   # two State e-nodes, one e-class
(2, 1)
>>> g.find(q.text) == g.find(p.text)
True
"""

from __future__ import annotations

from ..egraph.encoding import encode, to_egglog
from ..egraph.engine import batches
from ..egraph.traversals import SCHEMA_FILE

PRIMITIVE_SORTS = {"i64", "f64", "String", "bool", "Unit", "BigInt", "BigRat"}
HANDLES = {"N", "P"}   # not counted: they only name e-classes


class SpaceEGraph:
    """Explored programs as e-classes of one egglog e-graph; steps as unions."""

    def __init__(self):
        from egglog import bindings

        self._egraph = bindings.EGraph()
        # N k and P k are handles (one e-node each, in the nest's / program's e-class): egglog
        # makes every global `let` a table of its own and each command then visits them all,
        # which grows quadratically with thousands of programs.
        self._run(SCHEMA_FILE.read_text() + "\n(datatype Explored (State Prog))\n"
                  "(constructor N (i64) Nest)\n(constructor P (i64) Explored)")
        self._programs = _UnionFind()       # program keys (find/union)
        self._handle: dict[str, int] = {}   # representative program -> its P handle
        self._pending: list[str] = []
        self._nests: dict = {}   # LoopNest -> handle number
        self._nest_classes = _UnionFind()   # nest handles (union_nests)

    def _run(self, text: str):
        return self._egraph.run_program(*self._egraph.parse_program(text))

    def add(self, key: str, program, parent: str | None = None) -> None:
        """Insert ``program`` (known by ``key``, its canonical text); with ``parent``, as the
        result of a step from that program (unioned with it in the same command). Each distinct
        nest is sent once; programs refer to it by its handle."""
        if key not in self._programs:
            self.add_program(key, [self.add_nest(nest) for nest in program.leir.nests], parent)

    def add_program(self, key: str, nests: list[int], parent: str | None = None) -> None:
        """Insert the program whose nests are these handles, in order (``add`` without a
        Program: the factored exploration knows its kernels by handle)."""
        if key in self._programs:
            return
        self._programs.add(key)
        if parent is None:
            self._handle[key] = len(self._handle)
        else:
            self._programs.union(parent, key)
        self._pending.append(f"(union (P {self._handle[self.find(key)]}) "
                             f"(State {_program_term(nests)}))")

    def add_nest(self, nest) -> int:
        """The handle of ``nest``'s e-class (the nest is sent once, whole: egglog's cost per
        command grows with the e-graph, so sending shared subterms as commands of their own
        was slower, measured on LayerNorm and attention explorations)."""
        k = self._nests.get(nest)
        if k is None:
            k = self._nests[nest] = len(self._nests)
            self._nest_classes.add(k)
            self._pending.append(f"(union (N {k}) {to_egglog(encode(nest))})")
        return k

    def union_nests(self, a: int, b: int) -> None:
        """``(union (N a) (N b))``: two kernels that compute the same (factored exploration:
        every program containing one is, by congruence, equivalent to the same program with
        the other)."""
        if self._nest_classes.union(a, b):
            self._pending.append(f"(union (N {a}) (N {b}))")

    def find(self, key: str) -> str:
        """The representative program of ``key``'s e-class (kept on the Python side, so that a
        step between two programs already known equal sends nothing)."""
        return self._programs.find(key)

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if self._programs.union(a, b):
            self._pending.append(f"(union (P {self._handle[ra]}) (P {self._handle[rb]}))")

    def flush(self, deadline=None) -> bool:
        """Send the pending insertions and unions (bounded batches, see ``engine.batches``);
        with a ``space.Deadline``, stop between two batches once it has passed and keep the
        rest pending. True when everything was sent."""
        texts = batches(self._pending)   # engine.BATCH_CHARS: egglog parses small batches faster
        sent = 0
        for batch in texts:
            if deadline is not None and deadline.passed():
                break
            self._run(batch)
            chars = len(batch) + 1        # the batch is its commands joined by newlines
            while chars > 0:
                chars -= len(self._pending[sent]) + 1
                sent += 1
        del self._pending[:sent]
        self._run("(run 1)")   # rebuild: canonicalise after the unions
        return not self._pending

    def size(self) -> dict[str, tuple[int, int]]:
        """Constructor -> (e-nodes, e-classes of its rows); ``"total"`` over all constructors."""
        frozen = self._egraph.freeze()
        out: dict[str, tuple[int, int]] = {}
        classes: set = set()
        nodes = 0
        for name, table in frozen.functions.items():
            if (table.is_let_binding or table.output_sort in PRIMITIVE_SORTS
                    or name in HANDLES):
                continue
            outputs = {(table.output_sort, row.output) for row in table.rows}
            out[name] = (len(table.rows), len(outputs))
            nodes += len(table.rows)
            classes |= outputs
        out["total"] = (nodes, len(classes))
        return out


def build_space_egraph(space) -> SpaceEGraph:
    """The space e-graph of an exploration's programs, as the explorer would have grown it:
    round ``d`` inserts every program first found at depth ``d`` (in discovery order), unioned
    with a program of depth ``d - 1`` that has a step to it, and is flushed; the round's
    ``eclasses`` / ``enodes`` are the e-graph's size then. Every other step joins two programs
    already in one e-class (breadth first from one root), so it adds no union."""
    graph = space.graph
    egraph = SpaceEGraph()
    by_depth: dict[int, list[tuple[int, str]]] = {}
    for key, attrs in graph.nodes(data=True):
        by_depth.setdefault(attrs["depth"], []).append((attrs["index"], key))
    (_, root), = by_depth.get(0, [(0, space.root_key)])
    egraph.add(root, space.programs[root])
    egraph.flush()
    for rnd in space.rounds:
        for _, key in sorted(by_depth.get(rnd.depth, ())):
            parent = min((graph.nodes[p]["index"], p) for p in graph.predecessors(key)
                         if graph.nodes[p]["depth"] == rnd.depth - 1)[1]
            egraph.add(key, space.programs[key], parent=parent)
        egraph.flush()
        rnd.enodes, rnd.eclasses = egraph.size()["total"]
    return egraph


def _program_term(nests: list[int]) -> str:
    term = "(PNil)"
    for k in reversed(nests):
        term = f"(PCons (N {k}) {term})"
    return term


class _UnionFind(dict):
    """Parent pointers with path halving; the first argument's root stays the root."""

    def add(self, x) -> None:
        self.setdefault(x, x)

    def find(self, x):
        while self[x] != x:
            self[x] = self[self[x]]
            x = self[x]
        return x

    def union(self, a, b) -> bool:
        """Merge b's class into a's; False when they were one class already."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self[rb] = ra
        return True

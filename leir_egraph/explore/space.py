"""The explored space: canonical programs with their depth, the single steps between them, and
per-round statistics; export as GraphML and JSONL.

>>> from leir_egraph import Program
>>> from leir_egraph.leir.canonical import canonical
>>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 2]}],
...        "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 2]}]}
>>> root = Program.parse("L^{4}_{a=0}L^{2}_{c=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c};];", sig)
>>> space = Exploration(root, ("loop_reorder",), depth=1)
>>> space.add_root(canonical(root))
'L^{4}_{a=0}L^{2}_{c=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c};];'
>>> swapped = Program.parse("L^{2}_{c=0}L^{4}_{a=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c};];", sig)
>>> key = space.add_step(space.root_key, canonical(swapped), "loop_reorder", "swap", 1)
>>> space.counts()        # programs at depth 0 and 1
[1, 1]
"""

from __future__ import annotations

import gc
import json
import resource
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..leir.program import Program

if TYPE_CHECKING:
    import networkx as nx

STOP_REASONS = ("closure", "depth", "max_programs", "time_limit", "memory_limit",
                "worker_died")


def _networkx():
    """networkx, imported on first use: a search imports this module (through
    ``explore.factored``'s ``nonlocal_reason``) and builds no graph (0.2 s of import)."""
    import networkx
    return networkx


class Deadline:
    """A time limit counted from a start (``time.perf_counter`` seconds); no limit when
    ``seconds`` is None. Long loops of the explorers ask ``passed()`` between pieces of work;
    ``left()`` sizes the next piece (docs/EXPLORE.md, "Time limit")."""

    def __init__(self, seconds: float | None, start: float | None = None):
        self.seconds = seconds
        self.start = time.perf_counter() if start is None else start

    def passed(self) -> bool:
        return self.seconds is not None and time.perf_counter() - self.start > self.seconds

    def left(self) -> float:
        """Seconds left (infinite without a limit, never below zero)."""
        if self.seconds is None:
            return float("inf")
        return max(0.0, self.seconds - (time.perf_counter() - self.start))


class Pace:
    """How many items (kernel variants, programs) the next indivisible engine run may take:
    all that are available without a time limit; under one, as many as the seconds per item
    measured so far say fit in the time left (``PROBE`` before anything is measured), never
    fewer than one. The estimate aims at half the time left, as the time per item varies from
    run to run (its items, the load)."""

    PROBE = 4

    def __init__(self):
        self.items, self.seconds = 0, 0.0

    def size(self, available: int, deadline: Deadline) -> int:
        if deadline.seconds is None:
            return available
        if not self.items:
            return min(available, self.PROBE)
        fits = int(deadline.left() / 2 * self.items / max(self.seconds, 1e-9))
        return max(1, min(available, fits))

    def record(self, items: int, seconds: float) -> None:
        self.items += items
        self.seconds += seconds


@contextmanager
def frozen_heap():
    """Within the block, the cyclic garbage collector leaves alone every object that existed
    before it (``gc.freeze``; unfrozen at the end unless something had frozen objects before).
    An exploration creates many objects and so triggers full collections, and each one walked
    the whole heap of the process -- torch's and TVM's modules included -- for about 0.15 s:
    on softmax at depth 2 that was more than the explorer's own work. The explorers and the
    oracle alike run inside it (docs/EXPLORE.md, "Measuring")."""
    already = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not already:
            gc.unfreeze()


def peak_rss_mb() -> float:
    """The process's peak resident set so far (egglog included), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass
class Round:
    """One BFS round: it expanded the programs at ``depth - 1`` and found those at ``depth``."""
    depth: int
    expanded: int = 0
    new_programs: int = 0
    steps: int = 0               # single steps found (edges, before dedup of targets)
    matching_s: float = 0.0      # facts, egglog matching (one iteration, helpers, read); the
                                 # per-program method and the oracle count placing here too
    placing_s: float = 0.0       # placing matches, canonical dedup (factored: growing its
                                 # space e-graph)
    seconds: float = 0.0
    eclasses: int | None = None  # of the space e-graph after the round; None until it is
    enodes: int | None = None    # built (Exploration.space_egraph(); factored: always built)
    peak_rss_mb: float = 0.0     # the process's peak resident set so far (egglog included)
    stopped: str = ""            # "" when the round ran to its end, else the budget that cut
                                 # it ("time_limit", "max_programs", "memory_limit",
                                 # "worker_died")

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Exploration:
    """Programs reachable from ``root`` in at most ``depth`` single steps, up to renaming.

    ``graph`` is a ``networkx.DiGraph`` whose nodes are canonical LEIR texts (attributes
    ``depth``: the fewest steps from the root, ``index``: discovery order) and whose edges are
    single steps (attribute ``steps``: the ``strategy/rule`` labels of every step between the
    two programs). ``programs[k]`` is the canonical Program of node ``k``'s text.
    """
    root: Program
    strategies: tuple[str, ...]
    depth: int
    graph: nx.DiGraph = field(default_factory=lambda: _networkx().DiGraph())
    programs: dict[str, Program] = field(default_factory=dict)
    rounds: list[Round] = field(default_factory=list)
    stopped: str = ""
    method: str = "egraph"
    seconds: float = 0.0
    cpu_seconds: float = 0.0   # process CPU, the shared database's process included
    root_key: str = ""
    seed: int = 0
    factored: object = None   # the FactoredSpace of a factored exploration (explore/factored.py)
    _egraph: object = field(default=None, repr=False)

    def space_egraph(self):
        """The space e-graph of the programs found (``explore/egraph.py``), built when first
        asked -- the explorers keep none while they run (the oracle keeps none either) -- round
        by round, each round's ``eclasses`` / ``enodes`` filled in as it is built. A factored
        exploration's rounds hold their statistics already (its e-graph is its storage)."""
        if self._egraph is None and self.factored is None:
            from .egraph import build_space_egraph
            self._egraph = build_space_egraph(self)
        return self._egraph

    def add_root(self, program: Program) -> str:
        self.root_key = program.text
        self.add_node(program, 0)
        return self.root_key

    def add_node(self, program: Program, depth: int, key: str | None = None) -> None:
        """Add a program at ``depth`` without a step to it (the root, or a program of a
        factored space); ``key`` is ``program.text`` when the caller already has it."""
        key = program.text if key is None else key
        self.programs[key] = program
        self.graph.add_node(key, depth=depth, index=len(self.programs) - 1)

    def add_step(self, source: str, target: Program, strategy: str, rule: str,
                 depth: int) -> bool:
        """Record the step ``source -> target``; True when ``target`` is a new program (it gets
        ``depth``). A step back to ``source`` itself (a rewrite that only renames) is dropped."""
        key = target.text
        if key == source:
            return False
        new = key not in self.programs
        if new:
            self.add_node(target, depth)
        label = f"{strategy}/{rule}"
        if self.graph.has_edge(source, key):
            labels = self.graph.edges[source, key]["steps"]
            if label not in labels:
                labels.append(label)
        else:
            self.graph.add_edge(source, key, steps=[label])
        return new

    def counts(self) -> list[int]:
        """Number of distinct programs at each depth 0..(deepest reached)."""
        deepest = max((a["depth"] for _, a in self.graph.nodes(data=True)), default=0)
        out = [0] * (deepest + 1)
        for _, a in self.graph.nodes(data=True):
            out[a["depth"]] += 1
        return out

    def space_counts(self) -> list[int]:
        """Distinct programs at each depth in the whole explored space: counted from the
        kernels for a factored exploration (which may hold fewer in its graph, up to
        ``max_programs``), else the graph's own ``counts()``."""
        return self.factored.counts() if self.factored is not None else self.counts()

    @property
    def space_complete(self) -> bool:
        """Whether ``space_counts`` counts every program within the depth: a factored
        exploration that ran out of neither time nor depth rounds (whatever its graph holds), or
        a per-program one that stopped at closure or depth."""
        if self.factored is not None:
            return self.factored.complete
        return self.stopped in ("closure", "depth")

    def keys(self, max_depth: int | None = None) -> set[str]:
        return {k for k, a in self.graph.nodes(data=True)
                if max_depth is None or a["depth"] <= max_depth}

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def summary(self) -> dict:
        return {"method": self.method, "strategies": list(self.strategies), "depth": self.depth,
                "programs": len(self), "per_depth": self.counts(),
                "space_programs": sum(self.space_counts()),
                "space_per_depth": self.space_counts(),
                "space_complete": self.space_complete,
                "steps": self.graph.number_of_edges(), "stopped": self.stopped,
                "seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
                "rounds": [r.to_dict() for r in self.rounds]}

    def write_graphml(self, path: str | Path) -> None:
        """GraphML: node ids are discovery indices (attributes ``program``, ``depth``), edges
        carry ``steps`` joined with ``;`` (GraphML has no list type)."""
        nx = _networkx()
        g = nx.DiGraph()
        index = {k: a["index"] for k, a in self.graph.nodes(data=True)}
        for k, a in self.graph.nodes(data=True):
            g.add_node(a["index"], program=k, depth=a["depth"])
        for u, v, a in self.graph.edges(data=True):
            g.add_edge(index[u], index[v], steps=";".join(a["steps"]))
        nx.write_graphml(g, str(path))

    def write_jsonl(self, path: str | Path) -> None:
        """One JSON object per line: every node (``{"node": i, "program", "depth"}``) then every
        edge (``{"edge": [i, j], "steps": [...]}``)."""
        index = {k: a["index"] for k, a in self.graph.nodes(data=True)}
        with open(path, "w") as f:
            for k, a in sorted(self.graph.nodes(data=True), key=lambda x: x[1]["index"]):
                f.write(json.dumps({"node": a["index"], "program": k, "depth": a["depth"]}) + "\n")
            for u, v, a in self.graph.edges(data=True):
                f.write(json.dumps({"edge": [index[u], index[v]], "steps": a["steps"]}) + "\n")

"""The parallel finish of a search: with more than one thread, run the outer parallel axis of
every nest of the best program on the cores, and keep that only if the paired timing confirms it.

Why (issue 39): a translated nest's outer loop is B, which the CPU runs serially, and a search's
16 samples rarely spend one on a P loop per nest -- at 2 threads the best programs barely used
the second core while torch did. ``bound_loop_parallelization`` turns a B loop whose iterations
are independent into P in one step, ``loop_parallelization`` an L loop
(rules/operator/bound_loop_parallelization.toml, loop_parallelization.toml); the finish takes
those steps on the best program after confirmation:

1. While some top-level nest holds no P loop, take the step of either strategy that
   puts one in the heaviest such nest (the cost model's seconds, its machine having the cores
   the timings run on), on that nest's outermost loop the rule allows, if the model expects
   the program to get faster by it; a nest the model expects to lose by it (too little work
   for a fork and join) is left serial. At most one step per nest: the trajectory stays a
   chain of ordinary strategy applications.
2. The finished program is judged like any candidate (``Judge.judge``: Equal and Independent
   against the root, the parallel claims checked under ``reverse_parallel``), then re-timed
   against the root with the confirmation rounds (``Judge.confirm``). It becomes the best
   node only if it is faster than the root beyond noise and its confirmed speedup exceeds the
   best node's: the rule ``run.confirm_best`` chooses the best by.

The finish runs only when the timings run on more than one thread (``lower.threads.wanted``)
and the search confirms its best (``confirm=True``); it judges one program beyond the sample
budget, listed in ``SearchResult.finish`` and not among the samples (the paper's metrics count
the algorithm's candidates). The steps' nodes join the tree (the intermediate ones untimed:
only the finished program is judged, every step being a sound rewrite).
"""

from __future__ import annotations

from typing import Any

from ..cost import Machine, cost
from ..egraph import Transition, single_steps
from ..leir.analysis import nest_loops
from ..leir.canonical import canonical_text
from ..leir.program import Program
from .rules_proposer import PARALLEL_ONLY, timing_machine
from .tree import Node

# the strategies whose steps put a P loop into a nest (the proposer's PARALLEL_ONLY), in a
# fixed order
STRATEGIES = tuple(sorted(PARALLEL_ONLY))


def _has_parallel(nest) -> bool:
    return any(loop.kind == "P" for loop in nest_loops(nest))


def _changed_nest(step: Transition) -> int | None:
    """The top-level nest a step changed (a parallelization changes exactly one)."""
    before, after = step.before.leir.nests, step.after.leir.nests
    changed = [k for k, (b, a) in enumerate(zip(before, after)) if b != a]
    return changed[0] if len(changed) == 1 and len(before) == len(after) else None


def _outer_position(step: Transition, k: int) -> int | None:
    """Where among nest ``k``'s own loops the step put its P loop (None: in a nested nest)."""
    for position, loop in enumerate(step.after.leir.nests[k].loops):
        if loop.kind == "P" and step.before.leir.nests[k].loops[position].kind != "P":
            return position
    return None


def next_step(program: Program, machine: Machine) -> Transition | None:
    """The parallelizing step of step 1 above, or None when no nest gets one."""
    now = cost(program, machine)
    if now.problem:
        return None
    weight = {n.nest: n.seconds for n in now.nests}
    choices = []
    for step in (t for sid in STRATEGIES for t in single_steps(program, sid)):
        k = _changed_nest(step)
        if k is None or _has_parallel(program.leir.nests[k]):
            continue
        position = _outer_position(step, k)
        if position is None:
            continue
        choices.append((-weight.get(k, 0.0), k, position, step))
    for _, k, _, step in sorted(choices, key=lambda c: c[:3]):
        after = cost(step.after, machine)
        if not after.problem and after.seconds < now.seconds:
            return step
    return None


def finish_steps(program: Program, machine: Machine) -> list[Transition]:
    """The finish's chain of steps from ``program`` (at most one per top-level nest)."""
    steps: list[Transition] = []
    for _ in program.leir.nests:
        step = next_step(program, machine)
        if step is None:
            break
        steps.append(step)
        program = step.after
    return steps


def parallel_finish(search, result, machine: Machine | None = None) -> dict[str, Any] | None:
    """Step 1 and 2 above on ``result.best`` (a confirmed ``SearchResult`` of ``search``);
    returns what was done (also ``result.finish``), None when the timings run on one thread."""
    from ..lower.threads import wanted
    if wanted() <= 1:
        return None
    if machine is None:
        machine = timing_machine()
    start = result.best
    steps = finish_steps(start.program, machine)
    record: dict[str, Any] = {"from_node": start.id, "steps": len(steps), "kept": False}
    result.finish = record
    if not steps:
        record["reason"] = "no nest the cost model expects to gain from a P loop"
        return record
    final = steps[-1].after
    record["text"] = final.text
    verdict = search.judge.judge(final, start.key)
    record["verdict"] = verdict.to_dict()
    if not verdict.valid:
        record["reason"] = f"not valid: {verdict.reason}"
        return record
    node = start
    for step in steps:
        key = canonical_text(step.after)
        child = Node(len(search.nodes), step.after, key, node, node.depth + 1, step.strategy,
                     step.cot)
        node.children.append(child)
        search.nodes.append(child)
        search.seen.add(key)
        node = child
    node.speedup, node.time_ms, node.faster = verdict.speedup or 1.0, verdict.time_ms, \
        verdict.faster
    node.slower = search.judge.slower(verdict)
    timed = search.judge.confirm(final)
    entry: dict[str, Any] = {"node": node.id, "strategy": steps[-1].strategy, "finish": True,
                             "search_speedup": node.speedup}
    if timed is None:
        entry["error"] = "could not be timed"
        record["reason"] = "could not be timed"
    else:
        entry.update(timed.to_dict())
        record["confirmed"] = timed.speedup
        held = result.confirmed if result.confirmed is not None else 1.0
        if timed.faster and timed.speedup > held:
            result.best, result.confirmed = node, timed.speedup
            record["kept"] = True
        else:
            record["reason"] = (f"confirmed {timed.speedup:.3g}x (faster beyond noise: "
                                f"{timed.faster}) does not beat the best's {held:.3g}x")
    result.confirmations.append(entry)
    return record

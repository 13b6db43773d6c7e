"""Dataset balancing (docs/STRATEGIES.md, "Dataset balancing"; Step-TP Sec. 3.4).

* Easy strategies are removed from the multi-answer set. In the single-answer set each easy
  strategy keeps 20% of its transitions when its rule file says ``direction = "simplify"``
  (or gives no direction) and 4% when it says ``direction = "expand"``.
* Medium strategies: every transition in the single-answer set; in the multi-answer set each
  medium strategy appears at most ``medium_cap`` (2,000) times.
* Difficult strategies: all kept.

Without filtering (``BalancePolicy.filter=False``, the paper's "without strategy filtering"
variant) every verified transition is a single-answer example, and the multi-answer set draws
from all of a program's verified transitions, easy ones included, with no medium cap.

Only verified transitions come in. Every choice is drawn from ``random.Random`` seeded with a
string naming the run seed and what is being chosen, so the outcome depends on the records and
the seed only -- never on the order workers finished in.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

Record = dict[str, Any]
CLASSES = ("easy", "medium", "difficult")


@dataclass(frozen=True)
class BalancePolicy:
    seed: int = 0
    easy_simplify_keep: float = 0.20
    easy_expand_keep: float = 0.04
    medium_cap: int = 2000
    multi_max_answers: int = 8
    multi_max_entries: int = 3
    filter: bool = True          # False: no difficulty balancing (module docstring)

    def easy_keep(self, direction: str) -> float:
        return self.easy_expand_keep if direction == "expand" else self.easy_simplify_keep


@dataclass(frozen=True)
class MultiEntry:
    """One multi-answer example: an original program and 2+ of its verified transitions."""
    program_id: str
    draw: int                    # which of the program's draws (0, 1, ...)
    answers: tuple[Record, ...]  # in the program's record order; idx = position


def _rng(policy: BalancePolicy, *what: object) -> random.Random:
    return random.Random("|".join(map(str, (policy.seed, *what))))


def balance_single(records: list[Record], policy: BalancePolicy) -> list[Record]:
    """The single-answer set: records kept, in their input order."""
    if not policy.filter:
        return list(records)
    by_strategy: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        if r["difficulty"] == "easy":
            by_strategy.setdefault(r["strategy"], []).append(i)
    dropped: set[int] = set()
    for sid in sorted(by_strategy):
        rows = by_strategy[sid]
        rng = _rng(policy, "single", sid)
        share = policy.easy_keep(records[rows[0]]["direction"]) * len(rows)
        # Stochastic rounding: the expected number kept is exactly the share, also for
        # strategies with only a handful of transitions.
        keep = math.floor(share) + (1 if rng.random() < share - math.floor(share) else 0)
        kept = set(rng.sample(rows, keep))
        dropped |= set(rows) - kept
    return [r for i, r in enumerate(records) if i not in dropped]


def balance_multi(records: list[Record], policy: BalancePolicy) -> list[MultiEntry]:
    """The multi-answer set. For each original with at least two non-easy verified
    transitions: 1..multi_max_entries draws, each of 2..multi_max_answers of them without
    replacement (a repeated set is skipped); then, visiting the drawn entries in a seeded
    shuffled order, answers of a medium strategy that reached ``medium_cap`` are dropped, and
    an entry left with fewer than two answers, or with the same answers as another entry of
    its original, is dropped."""
    pools: dict[str, list[Record]] = {}
    for r in records:
        if r["difficulty"] != "easy" or not policy.filter:
            pools.setdefault(r["program_id"], []).append(r)
    drawn: list[MultiEntry] = []
    for pid, pool in pools.items():
        n = len(pool)
        if n < 2:
            continue
        rng = _rng(policy, "multi", pid)
        seen: set[tuple[str, ...]] = set()
        for draw in range(rng.randint(1, policy.multi_max_entries)):
            k = rng.randint(2, min(n, policy.multi_max_answers))
            chosen = tuple(pool[i] for i in sorted(rng.sample(range(n), k)))
            key = tuple(r["id"] for r in chosen)
            if key not in seen:
                seen.add(key)
                drawn.append(MultiEntry(pid, draw, chosen))
    order = list(range(len(drawn)))
    _rng(policy, "medium-cap").shuffle(order)
    used: Counter = Counter()
    kept: dict[int, MultiEntry] = {}
    sets: dict[str, set[tuple[str, ...]]] = {}
    for i in order:
        entry = drawn[i]
        extra: Counter = Counter()
        answers = []
        for r in entry.answers:
            if r["difficulty"] == "medium" and policy.filter:
                if used[r["strategy"]] + extra[r["strategy"]] >= policy.medium_cap:
                    continue
                extra[r["strategy"]] += 1
            answers.append(r)
        key = tuple(r["id"] for r in answers)
        if len(answers) < 2 or key in sets.setdefault(entry.program_id, set()):
            continue
        sets[entry.program_id].add(key)
        used.update(extra)
        kept[i] = MultiEntry(entry.program_id, entry.draw, tuple(answers))
    return [kept[i] for i in sorted(kept)]


# ---------------------------------------------------------------- the before/after table

def balance_table(verified: list[Record], single: list[Record], multi: list[MultiEntry]
                  ) -> list[dict[str, Any]]:
    """One row per strategy: verified transitions (before balancing), single-answer entries,
    occurrences in multi-answer entries, and the total kept (single + multi occurrences)."""
    info: dict[str, tuple[str, str]] = {}
    before: Counter = Counter()
    for r in verified:
        before[r["strategy"]] += 1
        info[r["strategy"]] = (r["category"], r["difficulty"])
    one = Counter(r["strategy"] for r in single)
    many = Counter(a["strategy"] for e in multi for a in e.answers)
    order = {c: i for i, c in enumerate(("graph", "operator", "memory", "math"))}
    rows = []
    for sid in sorted(before, key=lambda s: (order.get(info[s][0], 9), s)):
        rows.append({"strategy": sid, "category": info[sid][0], "class": info[sid][1],
                     "verified": before[sid], "single": one[sid], "multi": many[sid],
                     "kept": one[sid] + many[sid]})
    return rows


def grouped(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The strategy table summed by ``category`` or ``class``, with each group's share of the
    occurrences before (verified) and after (kept) balancing."""
    sums: dict[str, Counter] = {}
    for r in rows:
        c = sums.setdefault(r[key], Counter())
        for col in ("verified", "single", "multi", "kept"):
            c[col] += r[col]
    total_before = sum(c["verified"] for c in sums.values()) or 1
    total_after = sum(c["kept"] for c in sums.values()) or 1
    order = CLASSES if key == "class" else ("graph", "operator", "memory", "math")
    out = []
    for name in sorted(sums, key=lambda g: (order.index(g) if g in order else 99, g)):
        c = sums[name]
        out.append({key: name, "verified": c["verified"],
                    "verified_share": round(100 * c["verified"] / total_before, 2),
                    "single": c["single"], "multi": c["multi"], "kept": c["kept"],
                    "kept_share": round(100 * c["kept"] / total_after, 2)})
    return out

"""``report.md`` and its plots: what was generated, what failed, what balancing kept, and how
many tokens each program takes as LEIR, TIR and CUDA C (``dataset/tokens.py``).

Nothing measured about the run itself (wall time, throughput) goes in here, so the report is
byte-identical between runs with the same settings; the CLI prints those figures instead.
"""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

from .balance import CLASSES, grouped
from .records import STAGES

LEVEL_ORDER = ("none", "diff", "build", "exec", "equal", "independent")
CLASS_COLOURS = {"easy": "#8fbf7f", "medium": "#f0b95a", "difficult": "#d9534f"}


def markdown_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    if not rows:
        return "_(none)_\n"
    columns = columns or list(rows[0])
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---" if isinstance(rows[0][c], str) else "---:" for c in columns) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(_cell(r[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def summarize(programs: list[dict[str, Any]], failures: list[dict[str, Any]],
              levels: Counter, table: list[dict[str, Any]], n_single: int, n_multi: int
              ) -> dict[str, Any]:
    """The figures of the run, for summary.json, the report and the CLI's final table."""
    return {
        "programs": len(programs),
        "programs_ok": sum(p["status"] == "ok" for p in programs),
        "programs_failed": sum(p["status"] != "ok" for p in programs),
        "transitions_enumerated": sum(p["enumerated"] for p in programs),
        "transitions": sum(p["selected"] for p in programs if p["status"] == "ok"),
        "verified": sum(p["verified"] for p in programs),
        "failures": len(failures),
        "failures_by_stage": {s: n for s in STAGES
                              if (n := sum(f["stage"] == s for f in failures))},
        "levels": {lv: levels[lv] for lv in LEVEL_ORDER if levels[lv]},
        "single_answer": n_single,
        "multi_answer": n_multi,
        "strategies": table,
    }


def enumerated_label(per_strategy_cap: int | None) -> str:
    """What the summary's ``transitions_enumerated`` counts: with a cap, the rule applications
    the e-graph found (the draw builds only what it keeps, docs/DATASET.md); without, the
    distinct transitions."""
    return ("rule applications found (the cap draws from them)" if per_strategy_cap
            else "transitions enumerated")


def write_report(settings: dict[str, Any], summary: dict[str, Any],
                 failures: list[dict[str, Any]], speedups: dict[str, list[float]]) -> str:
    table = summary["strategies"]
    by_class, by_category = grouped(table, "class"), grouped(table, "category")
    parts = ["# Step-TP dataset report\n\n",
             f"Programs: `{' '.join(settings['programs'])}` (count {settings['count']}, size "
             f"{settings['size']}, dtype {','.join(settings.get('dtypes') or [settings['dtype']])}"
             f"), seed {settings['seed']}, target "
             f"{settings['target']}, strategies: "
             f"{', '.join(settings['strategies']) if settings['strategies'] else 'all'}, "
             f"per-strategy cap: {settings['per_strategy_cap'] or 'none'}.\n",
             "\n## Overview\n\n",
             markdown_table([
                 {"what": "programs", "count": summary["programs"]},
                 {"what": "programs failed", "count": summary["programs_failed"]},
                 {"what": enumerated_label(settings["per_strategy_cap"]),
                  "count": summary["transitions_enumerated"]},
                 {"what": "transitions verified (attempted)", "count": summary["transitions"]},
                 {"what": "transitions verified (Equal/Independent)", "count": summary["verified"]},
                 {"what": "failure rows", "count": summary["failures"]},
                 {"what": "single-answer examples", "count": summary["single_answer"]},
                 {"what": "multi-answer examples", "count": summary["multi_answer"]},
             ]),
             "\n## Verification levels reached\n\n",
             markdown_table([{"level": k, "transitions": v} for k, v in summary["levels"].items()]),
             "\n## Balancing by difficulty class\n\n",
             "`verified` is before balancing; `kept` counts strategy occurrences in the training "
             "sets (single-answer entries plus answers inside multi-answer entries).\n\n",
             markdown_table(by_class),
             "\n![difficulty mix](plots/difficulty_mix.png)\n",
             "\n## Balancing by category\n\n",
             markdown_table(by_category),
             "\n## Balancing by strategy\n\n",
             markdown_table(table),
             "\n![strategy distribution](plots/strategy_distribution.png)\n",
             "\n## Failures by stage\n\n",
             markdown_table(_failure_table(failures))]
    if speedups:
        parts += ["\n## Measured speedups of verified transitions\n\n",
                  markdown_table([{"strategy": s, "n": len(v), "median": _median(v),
                                   "max": max(v)} for s, v in sorted(speedups.items())])]
    if "splits" in summary:
        parts += ["\n## Splits\n\n",
                  "Whole kinds per split (splits.json); `programs` are the test cases (one per "
                  "instance, dtype and shape draw), `integer_tensors` those with integer or "
                  "boolean tensors, `shapes` distinct (kind, shapes) pairs.\n\n",
                  markdown_table(summary["splits"])]
    if len(summary.get("chat", {})) > 1:
        parts += ["\n## Chat sets per variant and split\n\n",
                  "`classes` counts strategy occurrences (single-answer examples plus the "
                  "answers of multi-answer examples) as difficult:medium:easy.\n\n",
                  markdown_table([{"set": k, "variant": c["describe"], "split": c["split"],
                                   "verified": c["verified"], "single": c["single"],
                                   "multi": c["multi"],
                                   "classes": ":".join(str(v) for v in c["classes"].values())}
                                  for k, c in summary["chat"].items()])]
    if "tokens" in summary:
        parts.append(token_section(summary["tokens"], settings["target"]))
    text = "".join(parts)
    return text


def _median(v: list[float]) -> float:
    s = sorted(v)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def _failure_table(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts: Counter = Counter((f["stage"], f["strategy"] or "") for f in failures)
    examples: dict[tuple, str] = {}
    for f in failures:
        examples.setdefault((f["stage"], f["strategy"] or ""), f["reason"])
    order = {s: i for i, s in enumerate(STAGES)}
    return [{"stage": st, "strategy": sid, "count": counts[(st, sid)],
             "first reason": _clip(examples[(st, sid)])}
            for st, sid in sorted(counts, key=lambda k: (order.get(k[0], 99), k[1]))]


def _clip(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


# ---------------------------------------------------------------- token counts

TOKEN_PLOT = "token_counts.png"
REPRESENTATION_NAMES = {"leir": "LEIR", "tir": "TIR (TVMScript)", "cuda": "CUDA C"}
REPRESENTATION_COLOURS = {"leir": "#357", "tir": "#f0b95a", "cuda": "#d9534f"}


def token_section(tokens: dict[str, Any], target: str) -> str:
    """The report's "Token counts" section from ``summary["tokens"]``: the tables, or the
    sentence saying why counting was skipped."""
    head = "\n## Token counts (LEIR vs TIR vs CUDA)\n\n"
    if "skipped" in tokens:
        return head + f"Token counts were skipped: {tokens['skipped']}.\n"
    return (head + f"Tokenizer: {tokens['tokenizer']}, encodings "
            f"{', '.join(tokens['encodings'])} (OpenAI's BPE ranks, bundled with the package; "
            f"docs/DATASET.md). TIR is the TVMScript of our lowering for the target "
            f"({target}); CUDA C is TVM's whole generated source, header included. "
            "`originals`: one row per program in the dictionary; `rewrites`: the transformed "
            "program of every transition. Ratios are taken over the programs that have both "
            "representations: the ratio of the means, and the median of the per-program "
            "ratios.\n\n" + token_tables(tokens["populations"])
            + f"\n![token counts](plots/{TOKEN_PLOT})\n")


def token_tables(populations: dict[str, dict[str, Any]], with_missing: bool = True) -> str:
    """Markdown: distributions, ratios and (``with_missing``) the representations that could
    not be produced, with their reasons, of each population (``name -> statistics(...)``)."""
    dist, ratios, missing = [], [], []
    for name, stats in populations.items():
        for enc, e in stats["encodings"].items():
            for rep, d in e["representations"].items():
                dist.append({"programs": name, "encoding": enc,
                             "representation": REPRESENTATION_NAMES[rep], **d})
            if e["cuda_header"]["n"]:
                dist.append({"programs": name, "encoding": enc,
                             "representation": "(CUDA C header, counted above)",
                             **e["cuda_header"]})
            for ratio, r in e["ratios"].items():
                a, b = ratio.split("/")
                ratios.append({"programs": name, "encoding": enc,
                               "ratio": f"{REPRESENTATION_NAMES[a]} / {REPRESENTATION_NAMES[b]}",
                               "n": r["n"],
                               "ratio of means": r["of_means"], "median ratio": r["median"]})
        for rep, reasons in stats["missing"].items():
            missing.extend({"programs": name, "representation": REPRESENTATION_NAMES[rep],
                            "count": n, "reason": _clip(reason)} for reason, n in reasons.items())
    text = ("### Tokens per program\n\n" + markdown_table(dist)
            + "\n### Ratios\n\n" + markdown_table(ratios))
    if with_missing:
        text += "\n### Representations that could not be produced\n\n" + markdown_table(missing)
    return text


def token_plot(populations: dict[str, list], encoding: str) -> bytes:
    """PNG like the paper's Figure 4: for each population (``name -> [ProgramTokens]``) the
    distribution of tokens per program of LEIR, TIR and CUDA C as boxes on a log scale: the box
    spans the quartiles, the line is the median, the diamond the mean, the whiskers reach the
    5th and 95th percentiles and the dots beyond them go up to the max."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [n for n, rows in populations.items() if rows]
    fig, axes = plt.subplots(1, max(len(names), 1), figsize=(3.2 * max(len(names), 1) + 0.8, 4),
                             squeeze=False, sharey=True)
    for ax, name in zip(axes[0], names):
        reps = [r for r in REPRESENTATION_NAMES
                if any(r in p.tokens for p in populations[name])]
        values = [[p.tokens[r][encoding] for p in populations[name] if r in p.tokens]
                  for r in reps]
        boxes = ax.boxplot(values, whis=(5, 95), showmeans=True, patch_artist=True, widths=0.6,
                           meanprops={"marker": "D", "markerfacecolor": "white",
                                      "markeredgecolor": "black", "markersize": 5},
                           medianprops={"color": "black"},
                           flierprops={"marker": ".", "markersize": 3, "alpha": 0.5})
        for patch, rep in zip(boxes["boxes"], reps):
            patch.set_facecolor(REPRESENTATION_COLOURS[rep])
            patch.set_alpha(0.75)
        for i, vs in enumerate(values, start=1):
            ax.annotate(f"{np.mean(vs):,.0f}", (i, np.mean(vs)), textcoords="offset points",
                        xytext=(14, -3), fontsize=7)
        ax.set_xticks(range(1, len(reps) + 1),
                      [REPRESENTATION_NAMES[r].replace(" (", "\n(") for r in reps], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{name} ({len(populations[name])})", fontsize=10)
        ax.grid(axis="y", which="major", alpha=0.3)
    axes[0, 0].set_ylabel(f"tokens per program ({encoding})")
    fig.suptitle("Tokens per program: LEIR vs TIR vs CUDA C (diamond and number: mean)",
                 fontsize=10)
    fig.tight_layout()
    data = _png(fig)
    plt.close(fig)
    return data


# ---------------------------------------------------------------- plots

def plots(table: list[dict[str, Any]], tokens: dict[str, list] | None = None
          ) -> dict[str, bytes]:
    """PNG bytes by file name: the strategy distribution, the difficulty mix and, given the
    token counts (population -> [ProgramTokens]), their distribution (o200k_base)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    names = [r["strategy"] for r in table]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.32 * len(names) + 1.2)))
    ys = range(len(names))
    ax.barh([y - 0.2 for y in ys], [r["verified"] for r in table], height=0.4,
            label="verified (before balancing)", color="#9ab")
    ax.barh([y + 0.2 for y in ys], [r["kept"] for r in table], height=0.4,
            label="kept (single + multi occurrences)", color="#357")
    ax.set_yticks(list(ys), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("transitions")
    ax.set_title("Strategy distribution")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out["strategy_distribution.png"] = _png(fig)
    plt.close(fig)

    by_class = {r["class"]: r for r in grouped(table, "class")}
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = ["before balancing", "after balancing"]
    bottoms = [0.0, 0.0]
    for cls in CLASSES:
        r = by_class.get(cls)
        shares = [r["verified_share"], r["kept_share"]] if r else [0.0, 0.0]
        ax.bar(labels, shares, bottom=bottoms, label=cls, color=CLASS_COLOURS[cls])
        bottoms = [b + s for b, s in zip(bottoms, shares)]
    ax.set_ylabel("% of strategy occurrences")
    ax.set_ylim(0, 100)
    ax.set_title("Difficulty mix")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # clear of the bars
    fig.tight_layout()
    out["difficulty_mix.png"] = _png(fig)
    plt.close(fig)
    if tokens and any(tokens.values()):
        out[TOKEN_PLOT] = token_plot(tokens, "o200k_base")
    return out


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # No metadata: the bytes depend on the figure only.
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return buf.getvalue()

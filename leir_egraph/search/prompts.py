"""The paper's search prompt (docs/REFERENCE.md §5), built from the dataset's single- and
multi-answer prompts (``dataset.chat``), so that a model fine-tuned on the paper's data or
ours sees the wording it was trained on.

    <method sentence>
    Give the current IR of <name>: '<current IR>', where the known variables are ... Do not
    change the names, shapes or dtypes of these known variables in the IR.
    [History: the parent IR ...]                       (not in chain_no_parent)
    <the current IR's speedup, depth, the strategy that produced it; failed attempts, the last
     failed IR and "You are FORBIDDEN to generate this failed transformed IR again">
    **Target hardware**: ... binding rules ... memory usage rules ...
    The following strategies and any other mathematical strategies can be considered: ...
    **Task**: <the single/multi-answer request, rewritten to ask for runtime-optimized IRs>
    CRITICAL: 1. build on the current IR ... 2. do not revert to the parent IR (inverse pairs)
"""

from __future__ import annotations

from ..dataset.chat import multi_prompt, single_prompt
from .proposer import Request
from .tree import Node

SYSTEM_PROMPT = "You are a helpful IR optimization assistant."

METHOD = {
    "chain": "Chain-based", "chain_no_parent": "Chain-based", "greedy": "Greedy-Search-based",
    "beam": "Beam-Search-based", "bfs": "Breadth-first-based", "dfs": "Depth-first-based",
    "mcts": "Monte-Carlo-Tree-Search-based",
}

HARDWARE = {
    "cpu": ("**Target hardware**: a {cores}-core x86-64 CPU (TVM llvm backend). Loops marked P "
            "run in parallel on the cores, V loops as vector instructions, U loops are "
            "unrolled, and B (GPU-bound) loops run serially.\n"
            "Memory usage rules: shared (s) and local (l) scopes are plain memory on the CPU; "
            "the loop order decides which accesses are contiguous.\n"),
    "gpu": ("**Target hardware**: NVIDIA {gpu} GPU.\nCUDA binding rules: Loop axes bound to "
            "block (along x,y,z axis, max dimension value: 2^31-1, 65535, 65535) MUST be renamed "
            "with prefixes bx, by, bz and unique, respectively, followed by other unique "
            "lowercase letters. Loop axes bound to thread (along x,y,z axis, max dimension "
            "value: 1024, 1024, 64) MUST be renamed with prefixes tx, ty, tz, respectively, "
            "followed by other unique lowercase letters.\nMemory usage rules: Data indexed by "
            "block-level loops may be placed in shared (s) or global (g) memory. Data indexed "
            "by thread-level loops may be placed in local (l), shared (s) or global (g) "
            "memory.\n"),
}

INVERSE_PAIRS = ("operator fusion <-> operator fission, loop tiling <-> loop fusion, loop split "
                 "<-> loop fusion, apart <-> together, collect <-> expand collect")


def strategy_list() -> str:
    """The strategy names of the loaded rule files, spelled with spaces as the paper does."""
    from ..egraph.steps import default_strategies
    names = [s.id.replace("_", " ") for s in default_strategies()]
    return ("The following strategies and any other mathematical strategies can be "
            "considered:\n" + ", ".join(names) + ".\n")


def _task(request: Request, name: str) -> str:
    node = request.node
    sig = node.program.signature
    if request.k > 1:
        text = multi_prompt(name, node.program.text, sig, request.k)
        ask = ("Please give me at least {k} different **numerically equivalent, "
               "runtime-performance-optimized** IRs").format(k=request.k)
        text = text[text.index("Please give me"):]
        text = ask + text[text.index(" IRs") + 4:]
        tail = "values"
        each = "each "
    else:
        text = single_prompt(name, node.program.text, sig)
        text = text[text.index("Please give me"):].replace(
            "numerically equivalent transformed", "numerically equivalent, "
            "runtime-performance-optimized")
        tail = "value"
        each = ""
    text = text.replace("(bitwise identical),", f"(bitwise identical) to achieve higher speedup "
                                                f"{tail} (should be more than 1),")
    critical = (
        f"\nCRITICAL:\n1. Before you suggest {each or 'a '}new transformation, you MUST identify "
        "what has been changed in the current IR compared to the root IR. You MUST build your "
        "new optimization ON TOP OF these existing changes, namely ON TOP OF the current IR. The "
        f"strategies MUST be used on the current IR! You MUST compare your modified parts in "
        f"{each or 'the '}transformed IR with the current IR. If they are identical strings, "
        "your answer is WRONG. If the unmodified part in the transformed IR is different from "
        "the current IR, your answer is WRONG.\n2.Don't repeat the current or parent IRs! You "
        "MUST NOT revert to the parent IR: In particular, you are NOT allowed to apply any "
        "reverse or undo operation that reconstructs the current IR from its parent IR, "
        f"including inverse transformations such as {INVERSE_PAIRS}, or similar reversals.")
    return "**Task**:\n" + text + critical


def _current_info(node: Node) -> str:
    if node.parent is None:
        info = f"The current IR is the same as the root IR, and the depth is {node.depth}"
    else:
        info = (f"The speedup value of the current IR: {node.speedup:.4g}, the depth is "
                f"{node.depth}, and the current IR is obtained from the parent IR using the "
                f"strategy '{node.strategy}'")
    if node.failures:
        last, reason = node.failures[-1]
        info += (f". This current IR has been transformed {len(node.failures)} times but failed "
                 f"to pass the verification. Last time, the transformed IR, '{last}', failed "
                 f"({reason}). You MUST compare with this failed transformed IR when generating "
                 "new IR. You are FORBIDDEN to generate this failed transformed IR again. \n")
    else:
        info += ".\n"
    return info


def _parent_info(node: Node) -> str:
    parent = node.parent
    if parent is None:
        return ""
    if parent.parent is None:
        return "History:\nThe parent IR: same as the root IR, depth:0, speedup value: 1. \n"
    answer = {"transformed_IR": parent.program.text, "applied_strategy": parent.strategy}
    return (f"History:\nThe parent IR: '{answer}', depth:{parent.depth}, speedup value: "
            f"{parent.speedup:.4g}\n")


def search_prompt(request: Request, *, cores: int = 2, gpu: str = "H100") -> str:
    """The user message for one query of a search."""
    node = request.node
    name = node.program.name or "the program"
    opening = single_prompt(name, node.program.text, node.program.signature)
    opening = opening[:opening.index("Please give me")].replace(
        "Give the following IR", "Give the current IR", 1)
    method = (f"{METHOD.get(request.algorithm, 'Search-based')} optimization is used on a given "
              "IR to improve performance. Each IR is a state, and has a parent transformation "
              "and speedup performance.")
    history = _parent_info(node) if request.with_parent else ""
    hardware = HARDWARE["gpu" if request.hardware.startswith("gpu") else "cpu"].format(
        cores=cores, gpu=gpu)
    return (method + "\n" + opening + history + _current_info(node) + hardware + strategy_list()
            + _task(request, name))


__all__ = ["search_prompt", "strategy_list", "SYSTEM_PROMPT"]

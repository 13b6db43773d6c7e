"""Soak test of issue 37 (not in the suite): nothing lost when the sampler is killed, nothing
unbounded when a model server misbehaves.

    .venv/bin/python benchmarks/soak.py [--kills 20] [--seed 0] [--programs ReLU softmax ...]
        [--requests 40] [--part sampler|search|both] [--work DIR]

**sampler**: one uninterrupted run of ``python -m leir_egraph.sample`` (two instances of each
kind, shard size 1), then the
same run started in a fresh folder and killed (SIGKILL to its whole process group: the CLI,
its workers, their TVM workers) ``--kills`` times, each at a seeded random moment: a random
0-1 s after the run reaches a random point of its progress (the shards it already has, or one
more), so kills land in start-up, inside and between shards, and once every shard is there in
the final files; resumed with ``--resume`` each time, and finally
resumed to the end. Every file of the two folders is compared byte for byte; the figures are
the kills that landed before the run ended and the wall times.

**search**: ``leir search`` (greedy, the llm proposer) on a small program against a server on
127.0.0.1 (tests/unreliable_server.py) that answers each request with a seeded random failure
mode of issue 37 or, one time in four, a correct single step. Printed: the modes served, the
longest request, the search's wall time and the process's peak memory, against the bounds the
client was given (--llm-deadline 2 s, --llm-max-bytes 1 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from results_file import recorded  # noqa: E402  (benchmarks/ is the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def _sampler_cmd(programs: list[str], out: Path, resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "leir_egraph.sample", "--programs", *programs, "--count", "2",
           "--strategies", "loop_split,loop_reorder,logsimp", "--per-strategy-cap", "1",
           "--shard-size", "1", "--workers", "1", "--seed", "3", "--out", str(out), "--quiet"]
    return cmd + (["--resume"] if resume else [])


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def _shards_on_disk(out: Path) -> int:
    folder = out / "programs"
    return len(list(folder.glob("part-*.jsonl"))) if folder.is_dir() else 0


def soak_sampler(programs: list[str], kills: int, seed: int, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ref, out = work / "reference", work / "killed"
    t0 = time.perf_counter()
    subprocess.run(_sampler_cmd(programs, ref, False), cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    reference_s = time.perf_counter() - t0
    rng = random.Random(seed)
    landed, finished_early = 0, 0
    progress: list[int] = []    # complete shards on disk at each kill
    shards = 2 * len(programs)  # two instances of each kind, shard size 1
    first = True
    t0 = time.perf_counter()
    while landed < kills and landed + finished_early < 3 * kills:
        # the moment: a random wait after the run reaches a random point of its progress (the
        # shards it has, or one more), so kills land in start-up, inside and between shards
        # and, once every shard is there, in the final files
        done = _shards_on_disk(out)
        target = min(done + rng.choice((0, 1)), shards)
        extra = rng.uniform(0.0, 1.0)
        proc = subprocess.Popen(_sampler_cmd(programs, out, not first), cwd=ROOT, env=env,
                                start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and _shards_on_disk(out) < target:
            time.sleep(0.02)
        try:
            proc.wait(timeout=extra)
            finished_early += 1      # it ended before its kill
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            landed += 1
            progress.append(_shards_on_disk(out))
        err = proc.stderr.read()
        proc.stderr.close()
        if proc.returncode not in (0, -signal.SIGKILL):
            raise SystemExit(f"sampler exited {proc.returncode}: {err.strip()}")
        first = first and not (out / "run.json").exists()
    final = subprocess.run(_sampler_cmd(programs, out, not first), cwd=ROOT, env=env,
                           capture_output=True, text=True)
    if final.returncode != 0:
        raise SystemExit(f"final resume exited {final.returncode}: {final.stderr.strip()}")
    killed_s = time.perf_counter() - t0
    a, b = _files(ref), _files(out)
    differ = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
    manifest = json.loads((out / ".leir-manifest.json").read_text())
    shards = len([f for f in manifest["files"] if f.startswith("programs/")])
    return {"programs": 2 * len(programs), "reference_s": round(reference_s, 1),
            "kills_landed": landed, "ended_before_its_kill": finished_early,
            "shards_on_disk_at_each_kill": progress,
            "killed_and_resumed_s": round(killed_s, 1), "files": len(a),
            "shards": shards, "files_differing": differ}


def soak_search(requests: int, seed: int) -> dict:
    from unreliable_server import MODES, UnreliableServer

    from leir_egraph import Program
    from leir_egraph.egraph import single_steps
    from leir_egraph.search import ChatClient, LLMProposer, search
    from leir_egraph.search.judge import Judge
    from leir_egraph.verify import Verifier

    sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [16, 32]}],
           "outputs": [{"name": "D", "dtype": "float32", "shape": [16]}]}
    root = Program.parse("B^{16}_{tx=0}L^{32}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+"
                         "A^{f32,g}_{tx,a};];", sig, "row_sum")
    step = single_steps(root, "loop_reorder")[0]
    answer = (f"<think>{step.cot}</think><answer>" + json.dumps(
        {"transformed_IR": step.after.text, "applied_strategy": step.strategy}) + "</answer>")
    unsound = "B^{16}_{tx=0}L^{32}_{a=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx,a};];"
    rng = random.Random(seed)
    failures = [m for m in MODES if m != "ok"]
    plan = [("ok" if rng.random() < 0.25 else rng.choice(failures)) for _ in range(requests)]
    durations: list[float] = []

    class Timed(ChatClient):
        def complete(self, prompt, n=1, temperature=None):
            t = time.perf_counter()
            try:
                return super().complete(prompt, n, temperature)
            finally:
                durations.append(time.perf_counter() - t)

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with UnreliableServer(lambda n: plan[n % len(plan)], answer, unsound) as url:
        client = Timed(url, "soak", timeout=1.0, deadline=2.0, max_bytes=1_000_000)
        t0 = time.perf_counter()
        with Verifier() as v:
            result = search(root, "chain", LLMProposer(client), iterations=requests,
                            max_samples=requests, judge=Judge(root, verifier=v, trials=1),
                            confirm=False)
        wall = time.perf_counter() - t0
    reasons = Counter(("valid" if s.valid else (s.reason or "?"))[:48] for s in result.samples)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"requests": len(durations), "modes_planned": dict(Counter(plan[:len(durations)])),
            "longest_request_s": round(max(durations, default=0.0), 2),
            "search_wall_s": round(wall, 1), "samples": len(result.samples),
            "valid": sum(s.valid for s in result.samples), "reasons": dict(reasons),
            "peak_rss_mb_before": round(rss_before / 1024), "peak_rss_mb": round(peak / 1024),
            "stopped": result.stopped, "bounds": {"deadline_s": 2.0, "max_bytes": 1_000_000}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--programs", nargs="+", default=["ReLU", "softmax", "Sigmoid", "Tanh",
                                                      "GELU", "LeakyReLU"])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--part", choices=("sampler", "search", "both"), default="both")
    ap.add_argument("--work", type=Path)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}", flush=True)
    if args.part in ("search", "both"):
        print("search:", json.dumps(soak_search(args.requests, args.seed)), flush=True)
    if args.part in ("sampler", "both"):
        work = args.work or Path(tempfile.mkdtemp(prefix="leir-soak-"))
        try:
            figures = soak_sampler(args.programs, args.kills, args.seed, work)
        finally:
            if args.work is None:
                shutil.rmtree(work, ignore_errors=True)
        print("sampler:", json.dumps(figures), flush=True)
        if figures["files_differing"]:
            raise SystemExit("files differ after kills and resumes")
    print(f"load average {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    sys.exit(recorded(main))

"""Run the CUDA source leir-egraph ships on a real GPU and compare with PyTorch's outputs.

Two halves, run on two machines:

    # here (TVM, egglog): golden programs + a seeded sample of single-step rewrites -> a bundle
    python benchmarks/cuda_device_check.py export --out BUNDLE [--limit N] [--steps K --seed S]
    # on a GPU machine (Python 3, numpy, CuPy; no TVM, no egglog, no leir_egraph)
    python cuda_device_check.py run --bundle BUNDLE --out gpu.jsonl [--dry]

``export`` writes, per program, the CUDA C that ``lower.cuda_source`` gives (the text every
dataset row carries), the kernels in launch order with their grid/block dimensions and
their arguments mapped to tensor names, every buffer's shape and dtype (global intermediates
too: TVM's host code allocates them, so the runner does), the stored inputs, the expected
outputs (a golden entry's PyTorch output; a rewrite's: its root's, since a step is Equal to
its root) and the verdict the CPU (LLVM) build gives for the same program at the same
tolerance (``golden.check_entry``). Launch order, arguments and dimensions are read from TVM's
lowered host function (``tirx.call_ffi_kernel(symbol, operands..., launch values...)`` with
its ``launch_params`` tags, interpreted as TVM's runtime ``LaunchParamConfig`` does:
``blockIdx.*``/``threadIdx.*`` values in tag order, flag tags taking no value, dynamic shared
memory bytes last) and checked against the device PrimFuncs' ``params`` and
``tirx.kernel_launch_params`` and the source's own kernel declarations.

``run`` compiles each program's source with NVRTC (``cupy.RawModule``), fills outputs and
intermediates with ``lower.build.fill_value``'s value (NaN for floats; the export records it),
launches the kernels in order, synchronises, compares with the expected outputs at
``GOLDEN_RTOL`` (the comparison is ``leir_egraph/lower/compare.py``, copied into the bundle and
loaded by path), runs the program a second time and compares the two runs bitwise (a race shows
as a difference), and writes one JSON line per program. Programs run in worker processes; a
program that outlives ``--timeout`` or breaks its CUDA context costs only its worker. ``--dry``
does everything but the CuPy calls (bundle parsing, buffer allocation, argument and launch
checks).

The run half needs a GPU: the test suite never runs it (tests/test_cuda_device_check.py
checks the export and the dry run); its figures are in benchmarks/results/cuda_device_check.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np

# Strategies whose rewrites change how a kernel uses the GPU (thread binding, shared/local
# memory, register tiles); the step sample takes them first.
GPU_STRATEGIES = ("loop_binding", "cache_read_write", "set_storage_scope", "set_storage_layout",
                  "register_tiling", "reduction_factorization")
OTHER_STRATEGIES = ("loop_tiling", "loop_split", "loop_fusion", "loop_reorder", "loop_unrolling",
                    "loop_vectorization", "operator_fusion", "compute_inline", "online_softmax")
MAX_LAUNCHES = 20000          # a host loop around a kernel is unrolled into this many launches
DTYPES = ("float32", "float64")
FLAG_TAGS = ("tirx.use_programtic_dependent_launch", "tirx.use_cooperative_launch",
             "tirx.use_required_block_dimension")
DYN_SHARED_TAG = "tirx.use_dyn_shared_memory"
AXES = {"blockIdx.x": ("grid", 0), "blockIdx.y": ("grid", 1), "blockIdx.z": ("grid", 2),
        "threadIdx.x": ("block", 0), "threadIdx.y": ("block", 1), "threadIdx.z": ("block", 2)}
C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "int64_t",
           "bool": "bool", "int8": "int8_t", "uint8": "uint8_t"}


class Unsupported(Exception):
    """A program's host code or kernels are outside what the runner can launch."""


# ================================================================== export (TVM side)

def _children(stmt):
    for attr in ("seq", "body", "then_case", "else_case"):
        child = getattr(stmt, attr, None)
        if child is None:
            continue
        if isinstance(child, (list, tuple)) or type(child).__name__ == "Array":
            yield from child
        else:
            yield child


def _is_kernel_call(expr) -> bool:
    op = getattr(expr, "op", None)
    return getattr(op, "name", None) == "tirx.call_ffi_kernel"


def _holds_kernel_call(stmt) -> bool:
    if type(stmt).__name__ == "Evaluate":
        return _is_kernel_call(stmt.value)
    return any(_holds_kernel_call(c) for c in _children(stmt))


def _evaluate(expr, env) -> int | float:
    """A host-side scalar: constants, loop variables and integer arithmetic on them."""
    import tvm
    kind = type(expr).__name__
    if kind in ("IntImm", "FloatImm"):
        return expr.value
    if kind == "Var":
        for var, value in env:
            if var.same_as(expr):
                return value
        raise Unsupported(f"host value {expr} is not a loop variable or a constant")
    if kind == "Cast":
        value = _evaluate(expr.value, env)
        return float(value) if "float" in str(expr.dtype) else int(value)
    binary = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
              "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b,
              "Min": min, "Max": max}
    if kind in binary:
        return binary[kind](_evaluate(expr.a, env), _evaluate(expr.b, env))
    del tvm
    raise Unsupported(f"host expression {kind} {expr} is not evaluated here")


class _Host:
    """TVM's lowered host function, interpreted for its kernel launches (in order)."""

    def __init__(self, kernels: dict[str, dict]):
        self.kernels = kernels
        self.aliases: list = []          # (buffer var, root tensor name)
        self.buffers: dict[str, dict] = {}
        self.launches: list[dict] = []

    def root(self, var) -> str:
        for known, name in self.aliases:
            if known.same_as(var):
                return name
        raise Unsupported(f"kernel argument {var} is no buffer the host declared")

    def walk(self, stmt, env):
        kind = type(stmt).__name__
        if kind in ("DeclBuffer", "AllocBuffer"):
            buf = stmt.buffer
            data = getattr(stmt, "data", None)   # DeclBuffer: what the buffer views
            if kind == "DeclBuffer" and getattr(getattr(data, "op", None), "name", "") == \
                    "tirx.buffer_data":
                self.aliases.append((buf, self.root(data.args[0])))
            else:
                name = buf.name   # a signature tensor (the packed API's argument) or a new one
                if kind == "DeclBuffer" and name not in self.buffers:
                    raise Unsupported(f"host buffer {name} is neither a tensor nor allocated")
                if kind == "AllocBuffer":
                    if name in self.buffers:
                        raise Unsupported(f"two host allocations named {name}")
                    if buf.scope() != "global":
                        raise Unsupported(f"host allocation {name} in scope {buf.scope()}")
                    self.buffers[name] = {"shape": [int(d) for d in buf.shape],
                                          "dtype": str(buf.dtype), "role": "intermediate"}
                self.aliases.append((buf, name))
            return
        if kind == "Evaluate":
            if _is_kernel_call(stmt.value):
                self.launch(stmt.value, env)
            return
        if kind == "For":
            if not _holds_kernel_call(stmt):
                return
            start, extent = _evaluate(stmt.min, env), _evaluate(stmt.extent, env)
            for i in range(start, start + extent):
                self.walk(stmt.body, env + [(stmt.loop_var, i)])
            return
        if kind in ("SeqStmt", "AttrStmt"):
            for child in _children(stmt):
                self.walk(child, env)
            return
        if _holds_kernel_call(stmt):
            raise Unsupported(f"kernel launch under host {kind}")

    def launch(self, call, env):
        args = list(call.args)
        symbol = args[0].value
        kernel = self.kernels.get(symbol)
        if kernel is None:
            raise Unsupported(f"host launches {symbol}, which no device module defines")
        params = kernel["params"]
        operands, values = args[1:1 + len(params)], args[1 + len(params):]
        tags = [str(t) for t in call.attrs.launch_params]
        if tags != kernel["launch_tags"]:
            raise Unsupported(f"{symbol}: host tags {tags} vs kernel's {kernel['launch_tags']}")
        dims = {"grid": [1, 1, 1], "block": [1, 1, 1]}
        shared = 0
        taking = [t for t in tags if t not in FLAG_TAGS]
        if len(values) != len(taking):
            raise Unsupported(f"{symbol}: {len(values)} launch values for tags {tags}")
        for tag, value in zip(taking, values):
            value = int(_evaluate(value, env))
            if tag == DYN_SHARED_TAG:
                shared = value
            elif tag in AXES:
                which, axis = AXES[tag]
                dims[which][axis] = max(value, 1)   # TVM's runtime: 0 is taken as 1
            else:
                raise Unsupported(f"{symbol}: launch tag {tag}")
        mapped = []
        for param, operand in zip(params, operands):
            if param["kind"] == "buffer":
                if getattr(getattr(operand, "op", None), "name", "") != "tirx.buffer_data":
                    raise Unsupported(f"{symbol}: pointer argument {operand} is not a buffer")
                mapped.append({"buffer": self.root(operand.args[0])})
            else:
                mapped.append({"scalar": _evaluate(operand, env), "dtype": param["dtype"]})
        if len(self.launches) >= MAX_LAUNCHES:
            raise Unsupported(f"more than {MAX_LAUNCHES} kernel launches")
        self.launches.append({"kernel": symbol, "args": mapped, "grid": dims["grid"],
                              "block": dims["block"], "shared": shared,
                              "flags": [t for t in tags if t in FLAG_TAGS]})


def _device_kernels(device) -> dict[str, dict]:
    kernels = {}
    for mod in device.values():
        for gv, fn in mod.functions.items():
            params = []
            for p in fn.params:
                ty = p.ty
                if type(ty).__name__ == "PointerType":
                    params.append({"name": p.name, "kind": "buffer",
                                   "dtype": str(ty.element_type.dtype)})
                else:
                    params.append({"name": p.name, "kind": "scalar", "dtype": str(ty.dtype)})
            tags = [str(t) for t in fn.attrs.get("tirx.kernel_launch_params", [])]
            kernels[gv.name_hint] = {"params": params, "launch_tags": tags}
    return kernels


_DECLARATION = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\((\d+)\) )?(\w+)'
                          r'\(([^)]*)\)')


def source_declarations(source: str) -> dict[str, dict]:
    """Kernel name -> its launch bound (or None) and parameter C types, read from the source."""
    out = {}
    for bound, name, params in _DECLARATION.findall(source):
        types = [" ".join(p.replace("__restrict__", "").replace("*", " * ").split()[:-1])
                 for p in params.split(",") if p.strip()]
        out[name] = {"bound": int(bound) if bound else None, "types": types}
    return out


def describe(program) -> dict:
    """The CUDA source of ``program`` and how to launch it: kernels, launches, buffers.

    Raises ``CudaInvalid`` (no valid kernels) or :class:`Unsupported`."""
    from leir_egraph.lower import cuda_source, lower
    from leir_egraph.lower.build import fill_value, numpy_dtype
    from leir_egraph.lower.cuda import device_modules
    from leir_egraph.lower.targets import target_dict
    source = cuda_source(program)
    host, device = device_modules(lower(program, "cuda"), target_dict("cuda"))
    kernels = _device_kernels(device)
    interp = _Host(kernels)
    for spec in list(program.signature.inputs) + list(program.signature.outputs):
        role = "input" if spec.name in program.signature.input_names else "output"
        interp.buffers[spec.name] = {"shape": list(spec.shape), "dtype": spec.dtype, "role": role}
    functions = list(host.functions.items())
    if len(functions) != 1:
        raise Unsupported(f"{len(functions)} host functions")
    interp.walk(functions[0][1].body, [])
    declared = source_declarations(source)
    for name, kernel in kernels.items():
        decl = declared.get(name)
        want = [C_TYPES.get(p["dtype"], p["dtype"]) + (" *" if p["kind"] == "buffer" else "")
                for p in kernel["params"]]
        if decl is None or decl["types"] != want:
            raise Unsupported(f"{name}: source declares {decl and decl['types']}, TVM's "
                              f"device function takes {want}")
        kernel["bound"] = decl["bound"]
    for launch in interp.launches:
        for arg, param in zip(launch["args"], kernels[launch["kernel"]]["params"]):
            if "buffer" not in arg:
                continue
            buf = interp.buffers[arg["buffer"]]
            if buf["dtype"] != param["dtype"]:
                # TVM's storage rewrite reuses a dead intermediate's memory for another one of
                # another type; the kernel takes that memory as a pointer of its own type
                if buf["role"] != "intermediate":
                    raise Unsupported(f"{launch['kernel']}: {arg['buffer']} is {buf['dtype']}, "
                                      f"parameter {param['name']} {param['dtype']}")
                arg["as"] = param["dtype"]
    for buf in interp.buffers.values():
        if buf["role"] != "input":   # what the program finds there before it runs
            buf["fill"] = fill_value(numpy_dtype(buf["dtype"]))
    return {"source": source, "kernels": kernels, "launches": interp.launches,
            "buffers": interp.buffers}


def _cpu_verdict(entry: dict, directory) -> dict:
    from leir_egraph.lower.golden import check_entry
    outcome = check_entry(entry, directory)
    return {"status": outcome.status, "detail": outcome.detail,
            "max_abs_err": outcome.max_abs_err}


def _sample_steps(roots, k: int, seed: int, every_strategy: bool = False) -> list:
    """``k`` single-step rewrites of ``roots`` (entry, program) drawn with ``seed``: strategy by
    strategy in turn, GPU strategies first, a strategy's shared/local-memory rewrites first;
    ``every_strategy``: every built-in strategy takes part, the others after those named here."""
    import random

    from leir_egraph.egraph.steps import all_steps, default_strategies
    named = GPU_STRATEGIES + OTHER_STRATEGIES
    if every_strategy:
        named += tuple(s.id for s in default_strategies() if s.id not in named)
    rng = random.Random(seed)
    pools: dict[str, list] = {}
    for entry, program in roots:
        for step in all_steps(program, named):
            pools.setdefault(step.strategy, []).append((entry, step))
    for pool in pools.values():
        rng.shuffle(pool)
        pool.sort(key=lambda es: not re.search(r"\{f(32|64),[sl]\}", es[1].after.text))
    order = [s for s in named if pools.get(s)]
    chosen: list = []
    while len(chosen) < k and any(pools.get(s) for s in order):
        for s in order:
            if pools.get(s) and len(chosen) < k:
                chosen.append(pools[s].pop(0))
    return chosen


def export(args) -> int:
    from leir_egraph.leir import Program
    from leir_egraph.leir.validate import LeirValidationError, check
    from leir_egraph.lower.golden import DEFAULT_DIR, GOLDEN_RTOL, KNOWN_FAILING, load_corpus
    directory = Path(args.dir or DEFAULT_DIR)
    corpus = load_corpus(directory)
    if args.ids:
        wanted = args.ids.split(",")
        corpus = [e for e in corpus if e["id"] in wanted]
    corpus = corpus[: args.limit]
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    (out / "data").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "leir_egraph" / "lower" / "compare.py",
                out / "compare.py")
    skipped, records, programs = [], [], {}
    start = time.process_time()

    def add(ident, entry, program, extra):
        try:
            described = describe(program)
        except Exception as err:  # noqa: BLE001 -- named in the manifest, never silent
            skipped.append({"id": ident, "reason": f"{type(err).__name__}: {err}"})
            return
        if not (out / "data" / entry["data_file"]).exists():
            shutil.copy(directory / "data" / entry["data_file"], out / "data")
        cpu_entry = dict(entry, leir=program.text, signature=program.signature.to_dict())
        records.append({"id": ident, "root": entry["id"], "name": entry["name"],
                        "leir": program.text, "signature": program.signature.to_dict(),
                        "dtype": entry["dtype"], "data": entry["data_file"],
                        "rtol": GOLDEN_RTOL[entry["dtype"]],
                        "known_failing": KNOWN_FAILING.get(entry["id"]),
                        "cpu": _cpu_verdict(cpu_entry, directory), **extra, **described})
        print(f"[{len(records)}] {ident}: {len(described['launches'])} launches, cpu "
              f"{records[-1]['cpu']['status']}", file=sys.stderr)

    for entry in corpus:
        if entry["dtype"] not in DTYPES:
            skipped.append({"id": entry["id"], "reason": f"dtype {entry['dtype']}"})
            continue
        program = Program.parse(entry["leir"], entry["signature"], name=entry["name"])
        try:
            check(program)
        except LeirValidationError as err:
            skipped.append({"id": entry["id"], "reason": f"invalid LEIR: {err}"})
            continue
        programs[entry["id"]] = (entry, program)
        add(entry["id"], entry, program, {"kind": "golden"})
    if args.steps:
        exported = {r["id"] for r in records}
        small = sorted((p for i, p in programs.items() if i in exported),
                       key=lambda ep: len(ep[1].text))[: args.step_roots]
        drawn = _sample_steps(small, args.steps, args.seed, args.every_strategy)
        for n, (entry, step) in enumerate(drawn):
            add(f"{entry['id']}/step{n}", entry, step.after,
                {"kind": "step", "strategy": step.strategy, "rule": step.rule,
                 "path": list(step.path)})
    with open(out / "programs.jsonl", "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    manifest = {"programs": len(records), "golden": sum(r["kind"] == "golden" for r in records),
                "steps": sum(r["kind"] == "step" for r in records), "skipped": skipped,
                "command": " ".join(sys.argv), "seed": args.seed,
                "export_cpu_s": round(time.process_time() - start, 1)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"bundle {out}: {manifest['golden']} golden programs, {manifest['steps']} steps, "
          f"{len(skipped)} skipped", file=sys.stderr)
    for s in skipped:
        print(f"  skipped {s['id']}: {s['reason']}", file=sys.stderr)
    return 0


# ================================================================== run (GPU side)

def _compare_module(bundle: Path):
    spec = importlib.util.spec_from_file_location("leir_compare", bundle / "compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(record: dict, bundle: Path):
    """Host arrays for one program: inputs from the bundle, outputs and intermediates NaN;
    launch checks. Returns (arrays, expected, launches)."""
    data = np.load(bundle / "data" / record["data"])
    arrays, expected = {}, {}
    for name, buf in record["buffers"].items():
        dtype = np.dtype(buf["dtype"])
        if buf["role"] == "input":
            array = np.asarray(data[name]).astype(dtype, order="C")   # keeps a 0-d shape
            if list(array.shape) != buf["shape"]:
                raise Unsupported(f"input {name}: shape {list(array.shape)} vs {buf['shape']}")
            arrays[name] = array
        else:   # lower.build.fill_value's, recorded by describe
            arrays[name] = np.full(buf["shape"], buf["fill"], dtype=dtype)
            if buf["role"] == "output":
                expected[name] = np.asarray(data[name])
    launches = []
    for launch in record["launches"]:
        kernel = record["kernels"][launch["kernel"]]
        if launch["flags"]:
            raise Unsupported(f"{launch['kernel']}: launch flags {launch['flags']}")
        threads = int(np.prod(launch["block"]))
        if threads > 1024 or (kernel["bound"] and threads > kernel["bound"]):
            raise Unsupported(f"{launch['kernel']}: {threads} threads per block")
        args = []
        for arg, param in zip(launch["args"], kernel["params"], strict=True):
            if "buffer" in arg:
                if arg["buffer"] not in arrays:
                    raise Unsupported(f"{launch['kernel']}: unknown buffer {arg['buffer']}")
                args.append(arg["buffer"])
            else:
                args.append(np.dtype(param["dtype"]).type(arg["scalar"]))
        launches.append((launch["kernel"], tuple(launch["grid"]), tuple(launch["block"]),
                         launch["shared"], args))
    return arrays, expected, launches


_INCLUDE_PROBE = "#include <cuda/std/cstdint>\n#include <math_constants.h>\n" \
                 'extern "C" __global__ void probe(float* x) { x[0] = CUDART_INF_F; }\n'


def nvrtc_options():
    """NVRTC options under which TVM's CUDA source compiles: include folders that hold
    ``cuda/std/cstdint`` (CCCL) and ``math_constants.h``, found on this machine and probed."""
    import glob

    import cupy
    roots = [os.environ.get("CUDA_PATH", ""), "/usr/local/cuda", cupy.cuda.get_cuda_path() or ""]
    roots += glob.glob("/usr/local/cuda-*")
    candidates = []
    for root in filter(None, roots):
        candidates += [f"{root}/include", f"{root}/include/cccl",
                       f"{root}/targets/x86_64-linux/include",
                       f"{root}/targets/x86_64-linux/include/cccl"]
    for site in sys.path:
        candidates += glob.glob(f"{site}/nvidia/*/include") + glob.glob(f"{site}/nvidia/*/include/cccl")
        candidates += glob.glob(f"{site}/cupy/_core/include") + \
            glob.glob(f"{site}/cupy/_core/include/cupy/_cccl/libcudacxx")
    found = []
    for need in ("cuda/std/cstdint", "math_constants.h"):
        hit = next((c for c in candidates if os.path.exists(f"{c}/{need}")), None)
        if hit and hit not in found:
            found.append(hit)
    tried = [("-std=c++17",) + tuple(f"-I{d}" for d in found), ("-std=c++17",), ()]
    errors = []
    for options in tried:
        try:
            cupy.RawModule(code=_INCLUDE_PROBE, options=options, backend="nvrtc").get_function("probe")
            return options, errors
        except Exception as err:  # noqa: BLE001 -- the next option set is tried
            errors.append(f"{options}: {str(err)[:300]}")
    return tried[0], errors


def gpu_program(record: dict, bundle: Path, options, compare) -> dict:
    """Compile, launch twice, compare; one JSON-able result."""
    import cupy
    out = {"status": None}
    start = time.perf_counter()
    arrays, expected, launches = prepare(record, bundle)
    try:
        module = cupy.RawModule(code=record["source"], options=options, backend="nvrtc")
        functions = {name: module.get_function(name) for name in record["kernels"]}
    except Exception as err:  # noqa: BLE001 -- NVRTC's log is the result
        return {"status": "compile_error", "detail": str(err)[-2000:],
                "seconds": round(time.perf_counter() - start, 3)}
    out["compile_s"] = round(time.perf_counter() - start, 3)
    runs = []
    for attempt in range(2):
        device = {name: cupy.asarray(array) for name, array in arrays.items()}
        t0 = time.perf_counter()
        try:
            for kernel, grid, block, shared, args in launches:
                functions[kernel](grid, block, tuple(device[a] if isinstance(a, str) else a
                                                     for a in args), shared_mem=shared)
            cupy.cuda.runtime.deviceSynchronize()
        except Exception as err:  # noqa: BLE001 -- the context may be broken: worker exits
            return {"status": "launch_error", "detail": f"run {attempt + 1}: {err}"[:2000],
                    "seconds": round(time.perf_counter() - start, 3), "fatal": True}
        runs.append({name: cupy.asnumpy(device[name]) for name in expected})
        out[f"run{attempt + 1}_s"] = round(time.perf_counter() - t0, 4)
    status, detail, worst = compare.compare_outputs(runs[0], expected, list(expected),
                                                    record["rtol"])
    out.update(status=status, detail=detail, max_abs_err=worst)
    differ = [n for n in expected if not np.array_equal(runs[0][n], runs[1][n], equal_nan=True)]
    out["run_to_run"] = "identical" if not differ else "differ: " + ", ".join(
        f"{n} ({int(np.sum(~((runs[0][n] == runs[1][n]) | (np.isnan(runs[0][n]) & np.isnan(runs[1][n])))))} elements)"
        for n in differ)
    if status == "mismatch":
        out["second_run"] = compare.compare_outputs(runs[1], expected, list(expected),
                                                    record["rtol"])[1]
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def _worker(bundle: str, records: list, tasks, results, trace: bool = False):
    bundle = Path(bundle)
    compare = _compare_module(bundle)
    options, _ = nvrtc_options()
    while True:
        index = tasks.get()
        if index is None:
            return
        results.put(("start", index, os.getpid()))
        if trace:   # under compute-sanitizer: its reports follow the program they are about
            print(f"start {records[index]['id']}", file=sys.stderr, flush=True)
        try:
            result = gpu_program(records[index], bundle, options, compare)
        except Unsupported as err:
            result = {"status": "unsupported", "detail": str(err)}
        except Exception as err:  # noqa: BLE001 -- one program never stops the rest
            result = {"status": "error", "detail": f"{type(err).__name__}: {err}"[:2000],
                      "fatal": True}
        results.put(("done", index, result))
        if result.get("fatal"):
            return      # a broken CUDA context: a fresh worker takes the next program


def _result_line(record: dict, result: dict) -> dict:
    line = {"id": record["id"], "kind": record["kind"], "name": record["name"],
            "dtype": record["dtype"], "strategy": record.get("strategy"),
            "rule": record.get("rule"), "cpu": record["cpu"]["status"],
            "known_failing": bool(record.get("known_failing")),
            "kernels": len(record["kernels"]), "launches": len(record["launches"])}
    line.update({k: v for k, v in result.items() if k != "fatal"})
    return line


def environment() -> dict:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    return {"device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "compute_capability": f"{props['major']}.{props['minor']}",
            "driver": cupy.cuda.runtime.driverGetVersion(),
            "runtime": cupy.cuda.runtime.runtimeGetVersion(),
            "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
            "cupy": cupy.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}


def run(args) -> int:
    bundle = Path(args.bundle)
    with open(bundle / "programs.jsonl") as f:
        records = [json.loads(line) for line in f]
    if args.shared_only:   # kernels that use shared memory (compute-sanitizer's racecheck)
        records = [r for r in records if "__shared__" in r["source"]]
    if args.kind:
        records = [r for r in records if r["kind"] == args.kind]
    records = records[: args.limit]
    out = open(args.out, "w")
    if args.dry:
        for record in records:
            try:
                arrays, expected, launches = prepare(record, bundle)
                result = {"status": "dry", "buffers": len(arrays), "outputs": sorted(expected)}
            except Unsupported as err:
                result = {"status": "unsupported", "detail": str(err)}
            out.write(json.dumps(_result_line(record, result)) + "\n")
        out.close()
        print(f"dry run: {len(records)} programs prepared", file=sys.stderr)
        return 0
    import multiprocessing as mp
    env = environment()
    options, errors = nvrtc_options()
    env["nvrtc_options"] = list(options)
    env["option_probe_errors"] = errors
    print(json.dumps(env), file=sys.stderr)
    out.write(json.dumps({"environment": env}) + "\n")
    ctx = mp.get_context("spawn")
    tasks, results = ctx.Queue(), ctx.Queue()
    for i in range(len(records)):
        tasks.put(i)
    workers: dict[int, object] = {}

    def spawn():
        p = ctx.Process(target=_worker, args=(str(bundle), records, tasks, results, args.trace),
                        daemon=True)
        p.start()
        workers[p.pid] = p

    for _ in range(args.workers):
        spawn()
    running: dict[int, tuple[int, float]] = {}   # index -> (pid, since)
    done: set[int] = set()
    deadline = time.monotonic() + args.budget
    counts: dict[str, int] = {}
    while len(done) < len(records) and time.monotonic() < deadline:
        try:
            kind, index, payload = results.get(timeout=0.5)
        except Exception:  # noqa: BLE001 -- queue.Empty: look at the running programs
            kind = None
        if kind == "start":
            running[index] = (payload, time.monotonic())
        elif kind == "done" and index not in done:
            running.pop(index, None)
            done.add(index)
            line = _result_line(records[index], payload)
            counts[line["status"]] = counts.get(line["status"], 0) + 1
            out.write(json.dumps(line) + "\n")
            out.flush()
            print(f"[{len(done)}/{len(records)}] {line['id']} {line.get('strategy') or ''} "
                  f"{line['status']} {line.get('run_to_run', '')} {line.get('detail', '')[:160]}",
                  file=sys.stderr)
        for index, (pid, since) in list(running.items()):
            if time.monotonic() - since > args.timeout:
                workers[pid].kill()
                running.pop(index)
                done.add(index)
                counts["timeout"] = counts.get("timeout", 0) + 1
                out.write(json.dumps(_result_line(records[index], {
                    "status": "timeout", "detail": f"over {args.timeout} s"})) + "\n")
        for pid, p in list(workers.items()):
            if not p.is_alive():
                p.join()
                del workers[pid]
                for index, (owner, _) in list(running.items()):
                    if owner == pid:   # died without reporting (a crash)
                        running.pop(index)
                        done.add(index)
                        counts["crash"] = counts.get("crash", 0) + 1
                        out.write(json.dumps(_result_line(records[index], {
                            "status": "crash", "detail": f"exit code {p.exitcode}"})) + "\n")
                if len(done) + len(running) < len(records):
                    spawn()
    for index in range(len(records)):
        if index not in done:
            counts["not_run"] = counts.get("not_run", 0) + 1
            out.write(json.dumps(_result_line(records[index], {
                "status": "not_run", "detail": f"budget of {args.budget} s spent"})) + "\n")
    out.close()
    for p in workers.values():
        p.kill()
    print(f"done: {json.dumps(counts, sort_keys=True)}", file=sys.stderr)
    return 0


# ================================================================== summary (either side)

STATUSES = ("equal", "mismatch", "compile_error", "launch_error", "timeout", "crash", "error",
            "unsupported", "not_run")


def _independence(record: dict) -> str:
    """The verifier's static independence verdict on a program (here only: needs leir_egraph)."""
    try:
        from leir_egraph.leir import Program
        from leir_egraph.verify.independence import check_independent
    except ImportError:
        return "(not checked: no leir_egraph)"
    result = check_independent(Program.parse(record["leir"], record["signature"]))
    return "independent" if result.ok else result.reason.replace("|", "\\|")[:300]


def summarise(args) -> int:
    """Markdown tables of a run's JSON lines (and the bundle's export skips)."""
    lines = [json.loads(line) for line in open(args.results)]
    env = next((line["environment"] for line in lines if "environment" in line), {})
    results = [line for line in lines if "id" in line]
    manifest = json.loads((Path(args.bundle) / "manifest.json").read_text())
    print(f"- device: {env.get('device')} (compute capability {env.get('compute_capability')}), "
          f"CUDA driver API {env.get('driver')}, runtime {env.get('runtime')}, NVRTC "
          f"{env.get('nvrtc')}, CuPy {env.get('cupy')}, NumPy {env.get('numpy')}, Python "
          f"{env.get('python')}; NVRTC options {' '.join(env.get('nvrtc_options', []))}")
    print(f"- bundle: {manifest['golden']} golden programs, {manifest['steps']} steps; "
          f"{len(manifest['skipped'])} not exported (listed below)")

    def row(label, group):
        counts = [sum(r["status"] == s for r in group) for s in STATUSES]
        differ = sum(r.get("run_to_run", "").startswith("differ") for r in group)
        cpu_equal = sum(r["cpu"] == "equal" for r in group)
        print(f"| {label} | {len(group)} | " + " | ".join(map(str, counts)) +
              f" | {differ} | {cpu_equal} |")

    print("\n| programs | n | " + " | ".join(STATUSES) + " | run-to-run differ | CPU equal |")
    print("|---" * (len(STATUSES) + 4) + "|")
    golden = [r for r in results if r["kind"] == "golden"]
    steps = [r for r in results if r["kind"] == "step"]
    for dtype in DTYPES:
        row(f"golden {dtype}", [r for r in golden if r["dtype"] == dtype])
    row("golden, all", golden)
    by_strategy: dict[str, list] = {}
    for r in steps:
        by_strategy.setdefault(r["strategy"], []).append(r)
    for strategy in sorted(by_strategy):
        row(f"step: {strategy}", by_strategy[strategy])
    row("steps, all", steps)
    print("\nGPU verdict against the CPU (LLVM) verdict, every program:\n")
    pairs: dict[tuple, int] = {}
    for r in results:
        pairs[(r["cpu"], r["status"])] = pairs.get((r["cpu"], r["status"]), 0) + 1
    print("| CPU | GPU | programs |\n|---|---|---|")
    for (cpu, gpu), n in sorted(pairs.items()):
        print(f"| {cpu} | {gpu} | {n} |")
    with open(Path(args.bundle) / "programs.jsonl") as f:
        records = {r["id"]: r for r in map(json.loads, f)}
    print("\nEvery program that is not equal on the GPU or whose two runs differ, with the "
          "verifier's static independence check of its LEIR (`verify.independence`; "
          "independent: no two iterations of a P/V/B loop write one element):\n")
    print("| id | name | strategy / rule | CPU | GPU | run to run | detail | static independence |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        if r["status"] != "equal" or r.get("run_to_run", "identical") != "identical":
            rule = f"{r['strategy']} / {r['rule']}" if r.get("strategy") else ""
            detail = (r.get("detail") or "").replace("|", "\\|").replace("\n", " ")[:300]
            print(f"| {r['id']} | {r['name']} | {rule} | {r['cpu']}"
                  f"{' (known)' if r.get('known_failing') else ''} | {r['status']} | "
                  f"{r.get('run_to_run', '')} | {detail} | {_independence(records[r['id']])} |")
    if manifest["skipped"]:
        print("\nNot exported:\n")
        for s in manifest["skipped"]:
            print(f"- {s['id']}: {s['reason'][:300]}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write a bundle (here: TVM, egglog)")
    ex.add_argument("--out", required=True)
    ex.add_argument("--dir", help="golden corpus directory")
    ex.add_argument("--limit", type=int, help="only the first N golden entries")
    ex.add_argument("--ids", help="only these golden ids (comma-separated)")
    ex.add_argument("--steps", type=int, default=0, help="single-step rewrites to add")
    ex.add_argument("--step-roots", type=int, default=12,
                    help="the steps' roots: this many of the shortest exported programs")
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--every-strategy", action="store_true",
                    help="draw the steps from every built-in strategy (default: the GPU and loop ones)")
    rn = sub.add_parser("run", help="run a bundle on the GPU (numpy + CuPy)")
    rn.add_argument("--bundle", required=True)
    rn.add_argument("--out", required=True)
    rn.add_argument("--limit", type=int)
    rn.add_argument("--dry", action="store_true", help="everything except the CuPy calls")
    rn.add_argument("--shared-only", action="store_true",
                    help="only programs whose kernels use shared memory")
    rn.add_argument("--kind", choices=("golden", "step"), help="only these programs")
    rn.add_argument("--trace", action="store_true",
                    help="print each program's id before it runs (for compute-sanitizer logs)")
    rn.add_argument("--workers", type=int, default=8)
    rn.add_argument("--timeout", type=float, default=30.0, help="seconds per program")
    rn.add_argument("--budget", type=float, default=170.0, help="seconds for the whole run")
    sm = sub.add_parser("summary", help="markdown tables of a run's results")
    sm.add_argument("--results", required=True)
    sm.add_argument("--bundle", required=True)
    args = parser.parse_args(argv)
    return {"export": export, "run": run, "summary": summarise}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

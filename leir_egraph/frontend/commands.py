"""``leir from-torch``: translate a PyTorch module defined in a Python file to LEIR."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from ..cli import InputError

FROM_TORCH_EXAMPLE = """examples:
  leir from-torch model.py:Net --init-args '[64, 32]' --input-shapes '[[16, 64]]' --sig-out net.sig.json
  leir from-torch 23_Softmax.py          (a KernelBench file: class Model, get_inputs(),
                                          get_init_inputs() supply everything)
  leir from-torch 33_BatchNorm.py --train --dtype f64 --values-out bn.npz

The LEIR text goes to standard output; the signature (inputs: forward inputs, constants,
parameters; outputs) to --sig-out, or to standard error when that is not given. Errors are one
line on standard error, exit status 2.

The model file's code runs in a child process whose standard output goes to standard error:
its prints never mix with the LEIR, a sys.exit() or os._exit() in it is an error (never an
empty success), and it is stopped after --timeout seconds."""

TIMEOUT = 300.0  # seconds for the model file's code: import, construction, inputs, tracing


def register(sub) -> None:
    from ..cli import positive_float
    p = sub.add_parser("from-torch", help="translate a PyTorch module to LEIR",
                       description="Trace a PyTorch nn.Module with torch.fx and print its LEIR "
                                   "program (one loop nest per elementary step).",
                       epilog=FROM_TORCH_EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="FILE.py[:Class]",
                   help="Python file and the module class in it (default class: Model)")
    p.add_argument("--init-args", metavar="JSON",
                   help="constructor arguments: a JSON list (positional) or object (keywords); "
                        "default: the file's get_init_inputs(), else none")
    p.add_argument("--input-shapes", metavar="JSON",
                   help="forward input shapes, e.g. '[[16, 256], [256]]' (standard normal "
                        "values); default: the file's get_inputs()")
    p.add_argument("--dtype", default="f32", choices=["f16", "f32", "f64"],
                   help="dtype of the module and its floating-point inputs (default f32)")
    p.add_argument("--train", action="store_true",
                   help="translate in training mode (BatchNorm uses batch statistics)")
    p.add_argument("--sig-out", metavar="FILE", help="write the signature JSON here")
    p.add_argument("--values-out", metavar="FILE.npz",
                   help="write the constant and parameter values (by LEIR name) here")
    p.add_argument("--timeout", type=positive_float, default=TIMEOUT, metavar="S",
                   help=f"seconds for the model file's code, tracing included (default "
                        f"{TIMEOUT:g})")
    p.set_defaults(handler=run_from_torch)


def _check_module_file(path: str) -> Path:
    file = Path(path)
    if not file.is_file():
        problem = "is a folder, not a file" if file.is_dir() else "no such file"
        raise InputError(f"{path}: {problem}")
    if file.suffix != ".py":
        raise InputError(f"{path}: not a Python file (.py)")
    return file


def _load_module_file(path: str):
    file = _check_module_file(path)
    spec = importlib.util.spec_from_file_location(file.stem.replace("-", "_"), file)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except SystemExit as stop:  # the file is a script: it must not end this command
        raise InputError(f"{path}: importing it called sys.exit({stop.code!r}); a model file "
                         "must only define the module (guard scripts with "
                         "if __name__ == '__main__')") from None
    except Exception as err:  # noqa: BLE001 -- the user's file: report, do not crash
        raise InputError(f"{path}: importing it failed: {type(err).__name__}: {err}") from None
    finally:
        sys.path.pop(0)
    return module


def _json(text: str, what: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"--{what}: not valid JSON ({err.msg} at column {err.colno})") from None


def build_model(args):
    """``(module, example_inputs)`` from the command line and the file's helpers."""
    import torch

    from ..workloads.registry import DTYPES
    path, _, cls_name = args.target.partition(":")
    source = _load_module_file(path)
    cls_name = cls_name or "Model"
    cls = getattr(source, cls_name, None)
    if cls is None:
        raise InputError(f"{path}: defines no class '{cls_name}'")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise InputError(f"{path}: '{cls_name}' is not a torch.nn.Module subclass "
                         f"({type(cls).__name__} {cls!r:.60})")
    if args.init_args is not None:
        init = _json(args.init_args, "init-args")
    elif hasattr(source, "get_init_inputs"):
        init = source.get_init_inputs()
    else:
        init = []
    try:
        module = cls(**init) if isinstance(init, dict) else cls(*init)
    except SystemExit as stop:
        raise InputError(f"{path}: constructing {cls_name} called sys.exit({stop.code!r})") \
            from None
    except Exception as err:  # noqa: BLE001
        raise InputError(f"{path}: constructing {cls_name}({init!r}) failed: "
                         f"{type(err).__name__}: {err}") from None
    dtype = DTYPES[args.dtype]
    # Translation needs only shapes and dtypes: inputs live on the meta device, so a KernelBench
    # file asking for a 4096 x 393216 input costs no memory.
    with torch.device("meta"):
        if args.input_shapes is not None:
            shapes = _json(args.input_shapes, "input-shapes")
            if not isinstance(shapes, list) or not all(
                    isinstance(s, list) and all(type(d) is int and d >= 1 for d in s)
                    for s in shapes):
                raise InputError("--input-shapes: expected a list of shapes of sizes >= 1, "
                                 "e.g. [[16, 256]]")
            inputs = [torch.empty(s, dtype=dtype) for s in shapes]
        elif hasattr(source, "get_inputs"):
            try:
                given = source.get_inputs()
            except (Exception, SystemExit) as err:  # noqa: BLE001 -- the user's code
                raise InputError(f"{path}: get_inputs() failed: {type(err).__name__}: {err}") \
                    from None
            inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
                      else x for x in given]
        else:
            raise InputError(f"{path}: has no get_inputs(); pass --input-shapes")
    module = module.to(dtype)
    module.train(args.train)
    return module, inputs, cls_name


def translate(args) -> tuple[str, dict, dict]:
    """``(LEIR text, signature dict, values)`` of the model the arguments name, in this
    process (``run_from_torch`` calls it in a child process)."""
    from .errors import TranslationError, UnsupportedOp
    from .translate import TraceFailure, from_torch
    path = args.target.partition(":")[0]
    module, inputs, name = build_model(args)
    try:
        program = from_torch(module, inputs, name=name)
    except (UnsupportedOp, TraceFailure) as err:
        raise InputError(f"{path}: {err}") from None
    except TranslationError as err:
        raise InputError(f"{path}: translation error: {err}") from None
    except (RecursionError, MemoryError):
        raise
    except SystemExit as stop:
        raise InputError(f"{path}: tracing {name} called sys.exit({stop.code!r})") from None
    except Exception as err:  # noqa: BLE001 -- the user's module failed while being traced
        raise InputError(f"{path}: tracing {name} failed: {type(err).__name__}: {err}") from None
    return program.text, program.signature.to_dict(), dict(program.values)


def _child_main(result_fd: int) -> None:
    """The child process (``python -c``): the arguments come pickled on standard input; the
    user's code runs with standard output already pointing at the parent's standard error;
    the outcome goes back pickled on ``result_fd``."""
    import os
    import pickle
    from ..leir.limits import allow_deep_programs
    from ..verify.worker import die_with_parent
    die_with_parent()
    allow_deep_programs()
    args = pickle.load(sys.stdin.buffer)
    path = args.target.partition(":")[0]
    try:
        outcome = ("ok", translate(args))
    except InputError as err:
        outcome = ("input", str(err))
    except RecursionError:
        outcome = ("recursion", "")
    except MemoryError:
        outcome = ("memory", "")
    except SystemExit as stop:
        outcome = ("input", f"{path}: the model's code called sys.exit({stop.code!r})")
    except BaseException as err:  # noqa: BLE001 -- reported by the parent as internal
        outcome = ("internal", f"{type(err).__name__}: {err}")
    with os.fdopen(result_fd, "wb") as out:
        pickle.dump(outcome, out)
    # done: no interpreter teardown (the user's module and torch may linger in theirs)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def _isolated(args) -> tuple[str, dict, dict]:
    """``translate(args)`` in a child process, within ``args.timeout`` seconds."""
    import os
    import pickle
    import selectors
    import subprocess
    import time
    path = args.target.partition(":")[0]
    fields = {k: v for k, v in vars(args).items() if k != "handler"}
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [package_root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    read_end, write_end = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys\nfrom leir_egraph.frontend.commands import "
             "_child_main\n_child_main(int(sys.argv[1]))", str(write_end)],
            stdin=subprocess.PIPE, stdout=2, pass_fds=(write_end,),
            env=env)
    finally:
        os.close(write_end)
    data, overran = bytearray(), False
    try:
        process.stdin.write(pickle.dumps(argparse.Namespace(**fields)))
        process.stdin.close()
        deadline = time.monotonic() + args.timeout
        with selectors.DefaultSelector() as selector:
            selector.register(read_end, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise InputError(f"{path}: the model's code did not finish within "
                                     f"{args.timeout:g} s (--timeout)")
                chunk = os.read(read_end, 1 << 20)
                if not chunk:
                    break
                data += chunk
    except BrokenPipeError:   # the child ended before reading its arguments
        pass
    except BaseException:     # the time ran out, Ctrl-C, SIGTERM: stop the child at once
        overran = True
        raise
    finally:
        os.close(read_end)
        try:
            process.wait(timeout=0 if overran else 10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    try:
        kind, value = pickle.loads(bytes(data))
    except Exception:  # noqa: BLE001 -- no outcome: the child ended early
        raise InputError(f"{path}: the model's code ended the process (exit status "
                         f"{process.returncode}) before the translation finished") from None
    if kind == "ok":
        return value
    if kind == "recursion":
        raise RecursionError()
    if kind == "memory":
        raise MemoryError()
    if kind == "input":
        raise InputError(value)
    raise RuntimeError(value)


def run_from_torch(args) -> int:
    path = args.target.partition(":")[0]
    if args.init_args is not None:
        init = _json(args.init_args, "init-args")
        if not isinstance(init, (list, dict)):
            raise InputError("--init-args: expected a JSON list or object")
    _check_module_file(path)
    text, signature, values = _isolated(args)
    print(text)
    signature = json.dumps(signature)
    if args.sig_out:
        Path(args.sig_out).write_text(signature + "\n")
    else:
        print(f"signature: {signature}", file=sys.stderr)
    if args.values_out:
        import numpy as np
        np.savez(args.values_out, **values)
    return 0

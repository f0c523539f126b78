"""torch-bisect-bot's triage shim: every torch.compile call uses the backend a variable names."""

# Python imports `sitecustomize` at startup from sys.path (site.py, "sitecustomize"), so this
# file, in a per-run directory prepended through PYTHONPATH, runs before the reproducer without
# touching the environment. It does not import torch: it waits for the reproducer to (a
# sys.meta_path finder wraps torch's loader), so variables the reproducer sets before
# `import torch` still count. It then wraps torch.compile, on real torch 2.x and on the synthetic
# torch of the demo alike.
#   TBB_FORCE_BACKEND=eager|aot_eager|aot_eager_decomp_partition|inductor|none (none: no
#   compile at all, torch.compile returns the function as it is).
#   TORCH_COMPILE_BACKEND, set by `python -m torch._inductor.compiler_bisector run` for each
#   step (torch/_inductor/compiler_bisector.py), is honoured too, so that the bisector can
#   steer an unmodified reproducer.
#   TBB_STATIC_SHAPES=1: every torch.compile call gets dynamic=False (whatever the reproducer
#   passed) and Dynamo's automatic dynamic shapes go off, so a recompile for a new size stays
#   static too; the backend stays the reproducer's unless a variable above forces one.
#   TBB_LADDER_PASSED=eager,aot_eager,... (the bisector's run only): the backends whose run of
#   the ladder passed. The bisector's first steps try one backend each, TORCH_COMPILE_BACKEND
#   and TORCH_BISECT_BACKEND set and no TORCH_BISECT_SUBSYSTEM, and ask only for the exit
#   status; for such a backend the ladder's run was that very run, so the step exits 0 here,
#   before the reproducer (and `import torch`, and the compile) would start. The check lives
#   in the shim because every step already starts it first: the reproducer runs unchanged
#   when it runs at all, and the bisector is torch's own, unpatched.
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

FORCE_VAR = "TBB_FORCE_BACKEND"
STATIC_VAR = "TBB_STATIC_SHAPES"
USED_MARK = "[torch-bisect-bot] the forced torch.compile was called"
BISECTOR_VAR = "TORCH_COMPILE_BACKEND"
LADDER_PASSED_VAR = "TBB_LADDER_PASSED"
_HERE = os.path.dirname(os.path.abspath(__file__))


def forced_backend():
    return os.environ.get(FORCE_VAR) or os.environ.get(BISECTOR_VAR) or None


def answered_from_ladder():
    """The backend of a bisector step the ladder already ran and saw pass, else None.
    TORCH_BISECT_BACKEND is set only by compiler_bisector for its steps, so the bisector's
    own process is never answered, even when the issue sets TORCH_COMPILE_BACKEND; a step
    with TORCH_BISECT_SUBSYSTEM disables part of the backend, which no ladder run did."""
    backend = os.environ.get(BISECTOR_VAR)
    if (not backend or os.environ.get("TORCH_BISECT_BACKEND") != backend
            or os.environ.get("TORCH_BISECT_SUBSYSTEM") or os.environ.get(FORCE_VAR)):
        return None
    return backend if backend in os.environ.get(LADDER_PASSED_VAR, "").split(",") else None


def static_shapes():
    return os.environ.get(STATIC_VAR) == "1"


def force_static_config():
    """Dynamo's switches for shapes, set where this torch has them, so that a recompile for a
    new size stays static on a version whose dynamic=False does not switch them itself. Done
    at each torch.compile call, not at `import torch`: torch imports torch._dynamo lazily,
    and importing it early would cost a script that never compiles; it also overrides what
    the reproducer set after its import."""
    try:
        import torch._dynamo.config as config
    except Exception:  # an older or a synthetic torch without it: dynamic=False alone
        return
    for name, value in (("automatic_dynamic_shapes", False), ("assume_static_by_default", True)):
        if hasattr(config, name):
            # A config that refuses the write: dynamic=False still holds.
            with contextlib.suppress(Exception):
                setattr(config, name, value)


def wrap_compile(original, backend, static=False):
    """torch.compile with `backend` forced (None: the caller's) and, if `static`, dynamic=False;
    mode= and options= only make sense for inductor."""
    if getattr(original, "_tbb_forced", False):
        return original

    def compile(*args, **kwargs):
        if not compile._tbb_used:  # the triage reads it: the run went through torch.compile
            compile._tbb_used = True
            sys.stderr.write(f"{USED_MARK}\n")
        if backend == "none":
            model = args[0] if args else kwargs.get("model", kwargs.get("fn"))
            return model if model is not None else (lambda fn: fn)
        if static:
            kwargs["dynamic"] = False
            force_static_config()
        if backend is not None:
            if backend != "inductor":
                kwargs.pop("mode", None)
                kwargs.pop("options", None)
            kwargs["backend"] = backend
        return original(*args, **kwargs)

    compile._tbb_forced = True
    compile._tbb_used = False
    compile.__wrapped__ = original
    compile.__doc__ = original.__doc__
    return compile


def patch(module, backend, static=False):
    if callable(getattr(module, "compile", None)):
        module.compile = wrap_compile(module.compile, backend, static)
        forced = [f"backend={backend}"] if backend is not None else []
        forced += ["dynamic=False"] if static else []
        sys.stderr.write(f"[torch-bisect-bot] torch.compile forced to {', '.join(forced)}\n")


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, backend, static):
        self._loader = loader
        self._backend = backend
        self._static = static

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        patch(module, self._backend, self._static)

    def __getattr__(self, name):  # resource readers and the like go to the real loader
        return getattr(self._loader, name)


class _TorchFinder(importlib.abc.MetaPathFinder):
    def __init__(self, backend, static):
        self._backend = backend
        self._static = static

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # one shot: find the real torch the ordinary way (editable
        spec = importlib.util.find_spec(name)  # installs have finders of their own)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, self._backend, self._static)
        return spec


def _chain_next_sitecustomize():
    # This file shadows any sitecustomize of the interpreter (Debian's, a conda one): run it.
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def install():
    backend, static = forced_backend(), static_shapes()
    if backend is None and not static:
        return
    if "torch" in sys.modules:
        patch(sys.modules["torch"], backend, static)
    else:
        sys.meta_path.insert(0, _TorchFinder(backend, static))


_answered = answered_from_ladder()
if _answered is not None:
    sys.stderr.write(f"[torch-bisect-bot] compiler_bisector's {_answered} step answered from "
                     f"the backend ladder, whose {_answered} run passed: exit 0, not run again\n")
    sys.stderr.flush()
    os._exit(0)  # SystemExit, raised while site imports this, is a fatal error (exit 1)
install()
try:
    _chain_next_sitecustomize()
except Exception as exc:  # the interpreter's own sitecustomize is not ours to break on
    sys.stderr.write(f"[torch-bisect-bot] the interpreter's sitecustomize failed: {exc}\n")

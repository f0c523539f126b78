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
#   TBB_LADDER_PASSED=eager,aot_eager,... (the bisector's run only): the backends whose run of
#   the ladder passed. The bisector's first steps try one backend each, TORCH_COMPILE_BACKEND
#   and TORCH_BISECT_BACKEND set and no TORCH_BISECT_SUBSYSTEM, and ask only for the exit
#   status; for such a backend the ladder's run was that very run, so the step exits 0 here,
#   before the reproducer (and `import torch`, and the compile) would start. The check lives
#   in the shim because every step already starts it first: the reproducer runs unchanged
#   when it runs at all, and the bisector is torch's own, unpatched.
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

FORCE_VAR = "TBB_FORCE_BACKEND"
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


def wrap_compile(original, backend):
    """torch.compile with `backend` forced; mode= and options= only make sense for inductor."""
    if getattr(original, "_tbb_forced_backend", None) is not None:
        return original

    def compile(*args, **kwargs):
        if not compile._tbb_used:  # the triage reads it: the run went through torch.compile
            compile._tbb_used = True
            sys.stderr.write(f"{USED_MARK}\n")
        if backend == "none":
            model = args[0] if args else kwargs.get("model", kwargs.get("fn"))
            return model if model is not None else (lambda fn: fn)
        if backend != "inductor":
            kwargs.pop("mode", None)
            kwargs.pop("options", None)
        kwargs["backend"] = backend
        return original(*args, **kwargs)

    compile._tbb_forced_backend = backend
    compile._tbb_used = False
    compile.__wrapped__ = original
    compile.__doc__ = original.__doc__
    return compile


def patch(module, backend):
    if callable(getattr(module, "compile", None)):
        module.compile = wrap_compile(module.compile, backend)
        sys.stderr.write(f"[torch-bisect-bot] torch.compile forced to backend={backend}\n")


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, backend):
        self._loader = loader
        self._backend = backend

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        patch(module, self._backend)

    def __getattr__(self, name):  # resource readers and the like go to the real loader
        return getattr(self._loader, name)


class _TorchFinder(importlib.abc.MetaPathFinder):
    def __init__(self, backend):
        self._backend = backend

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # one shot: find the real torch the ordinary way (editable
        spec = importlib.util.find_spec(name)  # installs have finders of their own)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, self._backend)
        return spec


def _chain_next_sitecustomize():
    # This file shadows any sitecustomize of the interpreter (Debian's, a conda one): run it.
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def install():
    backend = forced_backend()
    if backend is None:
        return
    if "torch" in sys.modules:
        patch(sys.modules["torch"], backend)
    else:
        sys.meta_path.insert(0, _TorchFinder(backend))


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

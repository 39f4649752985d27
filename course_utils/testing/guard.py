"""The call guard of exercise tests: forbidden functions fail by what runs, not by the name used.

``forbid(*targets)`` is a context manager for test cells. While its block runs, a call of any
target fails, however the student's code reached it:

    with forbid(F.scaled_dot_product_attention, course_attention.MultiHeadAttention):
        out = student_attention(q, k, v)

- a Python function (or method) is recognised by its code object, so an alias, a reference taken
  before the test started, a bound method, ``functools.wraps`` wrappers and another module path
  all run the same code and are all caught;
- a class forbids every function defined in its body, so a subclass that inherits or calls
  ``super()`` is caught when the inherited code runs;
- a built-in (C) function is caught when Python code calls it (``sys.setprofile``'s ``c_call``)
  and, for torch operators, by a ``TorchFunctionMode`` that also sees calls made from C code
  (``functools.partial``, ``map``) and ``torch.ops.aten.<name>``.

Beneath those two, where a block forbids torch operators, a ``TorchDispatchMode`` sees every ATen
operation at PyTorch's dispatcher and refuses any that did not come through the torch-function layer: run
while ``torch._C.DisableTorchFunction`` switched the layer off, or after the tests' torch function modes
were popped from C code. So a forbidden operator called from C with the layer off (``map`` over a
``functools.partial`` of ``torch.lstm_cell``) fails too (``function_layer_required``, which
:func:`course_utils.testing.work.watch_work` uses as well).

The first forbidden call raises :class:`ForbiddenCall` (an ``AssertionError``, so nbgrader scores
the cell 0) naming what was called. The call is also recorded: if the student's code catches the
exception, the block still fails when it ends. Calls that would switch the guard off while it is
on (``sys.setprofile``, ``sys.settrace``, ``sys.getprofile``, popping torch's mode stack, ``gc``
walks of live objects) count as forbidden calls; the grading sandbox's audit hook refuses
``sys.setprofile`` and ``sys.settrace`` from any other code.

Code that hides what it runs is refused in every block, whatever the targets: the graded code
must run as Python the guard can follow, not as a compiled or traced copy of a forbidden function.
Refused are ``torch.compile``/dynamo (``set_eval_frame`` installing a callback, seen at its
``c_return``, or any frame starting while one is installed, e.g. set from C; the callback is
removed before the refusal), FX-generated code (``symbolic_trace``, ``make_fx``, ``torch.export``'s
``.module()``: frames of file ``<eval_with_key>``), ``torch.fx.Interpreter``, inductor's generated
modules (files under ``TORCHINDUCTOR_CACHE_DIR``), and TorchScript (``torch.jit.script``/``trace``
functions and modules, ``torch.jit.fork``, static and lite runtimes) and AOTInductor runners,
which run only C++: importing this module routes their C entry points (``__call__``, ``forward``,
``run``) through a one-line Python wrapper, refused inside a block and transparent outside, and
refuses the original C functions when Python code calls them (and ``torch._C._jit_interpret_graph``).

What it cannot see: code copied by hand (the grader's review flags report near copies), which includes a
recording of a forbidden function's primitive operations made outside the block (an FX graph, a dispatch log)
replayed by the student's own loop or an ``Interpreter`` subclass that overrides ``run`` and ``run_node``; a
built-in called from C code while both the torch-function layer and Python dispatch are switched off
(``DisableTorchFunction`` with ``torch._C._DisableTorchDispatch``: no Python code runs between them, so
nothing here can see it; the review flags ``torch._C``); the original TorchScript/AOTInductor C entry points
(``__guard_original__`` of the wrappers) called from C code (``functools.partial``, ``map``, or put back on
their class as a ``functools.partialmethod`` and restored before the block ends); inductor's modules after
``TORCHINDUCTOR_CACHE_DIR`` is changed. See the threat model in docs/autograder.md.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import os
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
from torch._C._dynamo import eval_frame as _eval_frame
from torch.overrides import TorchFunctionMode

from .layer import _LAYER, ForbiddenCall, function_layer_required

__all__ = ["ForbiddenCall", "count_python_steps", "forbid", "function_layer_required"]  # the last two from .layer


def _label(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or getattr(getattr(obj, "__self__", None), "__module__", None)
    name = getattr(obj, "__name__" if isinstance(obj, types.BuiltinFunctionType) else "__qualname__", None)
    name = name or getattr(obj, "__name__", None) or repr(obj)
    return f"{module}.{name}" if module and module != "builtins" else str(name)


def _codes_of(func: Any) -> list[types.CodeType]:
    """The code objects that run when ``func`` is called (wrappers unwrapped to the innermost)."""
    if isinstance(func, (staticmethod, classmethod)):
        func = func.__func__
    if isinstance(func, property):
        return [c for f in (func.fget, func.fset, func.fdel) if f is not None for c in _codes_of(f)]
    if isinstance(func, types.MethodType):
        func = func.__func__
    if isinstance(func, functools.partial):
        return _codes_of(func.func)
    func = inspect.unwrap(func) if callable(func) else func
    code = getattr(func, "__code__", None)
    return [code] if isinstance(code, types.CodeType) else []


def _builtin_key(func: Any) -> tuple[int, str] | None:
    """Identity of a C function: the object it is bound to and its name (stable across lookups).

    An unbound C method (``torch.Tensor.unfold``) is keyed by itself, as torch function modes see it.
    """
    if isinstance(func, types.BuiltinFunctionType):
        return id(func.__self__), func.__name__
    if isinstance(func, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return id(func), func.__name__
    return None


class _Targets:
    """What one ``forbid`` block refuses: code objects, C functions and torch operator names."""

    def __init__(self) -> None:
        self.codes: dict[int, str] = {}  # id(code object) -> label (identity: equal code elsewhere is not it)
        self.builtins: dict[tuple[int, str], str] = {}
        self.ops: dict[str, str] = {}  # "aten::name" -> label
        self.methods: dict[str, list[tuple[type, str]]] = {}  # C method name -> [(class, label)]
        self.keep: list[Any] = []  # holds the objects whose ids are keys

    def add(self, target: Any) -> None:
        label = _label(target)
        if isinstance(target, type):
            codes = [(name, code) for name, member in vars(target).items() for code in _codes_of(member)]
            if not codes:
                raise ValueError(f"forbid: class {label} defines no Python methods to watch")
            for name, code in codes:
                self.keep.append(code)
                self.codes.setdefault(id(code), f"{label}.{name}" if name != "__init__" else label)
            return
        name = getattr(target, "_qualified_op_name", None) or getattr(
            getattr(target, "_overloadpacket", None), "_qualified_op_name", None
        )
        if isinstance(name, str) and isinstance(target, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
            self.ops[name] = f"torch.ops.{name.replace('::', '.')}"
            return
        if isinstance(target, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            self.methods.setdefault(target.__name__, []).append((target.__objclass__, label))
            self.builtins[(id(target), target.__name__)] = label  # as the torch mode sees it: torch.Tensor.unfold
            self.keep.append(target)
            self.ops[f"aten::{target.__name__}"] = label
            return
        key = _builtin_key(target)
        if key is not None:
            self.builtins[key] = label
            self.keep.append(target)
            self.ops[f"aten::{target.__name__}"] = label
            return
        codes = _codes_of(target)
        if not codes:
            raise ValueError(
                f"forbid: cannot watch {target!r} (type {type(target).__name__}); "
                "give a function, method, class or built-in function"
            )
        self.keep += codes
        for code in codes:
            self.codes[id(code)] = label

    def merged(self, outer: _Targets | None) -> _Targets:
        if outer is None:
            return self
        merged = _Targets()
        for part in (outer, self):
            merged.codes.update(part.codes)
            merged.builtins.update(part.builtins)
            merged.ops.update(part.ops)
            for name, owners in part.methods.items():
                merged.methods.setdefault(name, []).extend(owners)
            merged.keep += part.keep
        return merged


# C functions that would switch the guard off or find it; calling one while it is on is forbidden.
# (Torch's own mode-stack functions are left out: torch calls them itself; the stack is checked at exit.)
_SWITCHES = [
    sys.setprofile,
    sys.settrace,
    sys.getprofile,
    sys.gettrace,
    gc.get_referrers,
    gc.get_referents,
    gc.get_objects,
]
_SWITCH_KEYS = {_builtin_key(f): _label(f) for f in _SWITCHES if _builtin_key(f) is not None}
_SWITCH_CODES = {
    id(threading.setprofile.__code__): "threading.setprofile",
    id(threading.settrace.__code__): "threading.settrace",
}

# Code that hides what it runs from the hook: refused in every block (see the module docstring).
_HIDING = "torch.compile / TorchScript / FX code hides what runs from this test: call your own Python code"
_DYNAMO = "torch.compile (dynamo's frame evaluation was switched on)"
_FX_FILE = "<eval_with_key>"  # the file name of FX-generated code
# C entry points that run TorchScript or AOTInductor code without any Python frame (classes of torch._C).
_COMPILED_ENTRY_POINTS = (
    "ScriptFunction.__call__ ScriptMethod.__call__ ScriptClass.__call__ ScriptClassFunction.__call__ "
    "StaticModule.__call__ StaticModule.runAsync LiteScriptModule.forward LiteScriptModule.run_method "
    "_aoti.AOTIModelContainerRunnerCpu.run _aoti.AOTIModelContainerRunnerCuda.run "
    "_aoti.AOTIModelPackageLoader.run _aoti.AOTIModelPackageLoader.boxed_run"
).split()
# Compiled under a name of its own, not guard.py's: the grader trusts guard.py's code to set profile functions,
# and this wrapper calls whatever ``original`` it is given.
_WRAPPER = compile(
    "def run_compiled_code(self, *args, **kwargs):  # refused by the guard's hook inside a block\n"
    "    return original(self, *args, **kwargs)\n",
    "<course_utils.testing.guard: compiled code entry point>",
    "exec",
)


def _mark_compiled_entry_points() -> tuple[dict[int, str], dict[tuple[int, str], str]]:
    """Route the C entry points of compiled code through a Python wrapper whose frame the hook sees.

    Returns the code objects to refuse (id -> label) and the keys of the original C functions,
    refused when Python code calls them inside a block.
    """
    codes: dict[int, str] = {}
    keys: dict[tuple[int, str], str] = {}
    for entry in _COMPILED_ENTRY_POINTS:
        cls: Any = torch._C
        *path, name = entry.split(".")
        for part in path:
            cls = getattr(cls, part, None)
        current = cls.__dict__.get(name) if isinstance(cls, type) else None
        if current is None:
            continue
        original = getattr(current, "__guard_original__", None) or getattr(current, "__func__", current)
        namespace = {"original": original}
        exec(_WRAPPER, namespace)
        wrapper = namespace["run_compiled_code"]
        wrapper.__guard_original__ = original
        try:
            setattr(cls, name, wrapper)
        except (AttributeError, TypeError):  # pragma: no cover - a type that refuses new attributes
            continue
        codes[id(wrapper.__code__)] = "compiled code"
        key = _builtin_key(original)
        if key is not None:
            keys[key] = f"torch._C.{entry}"
    interpret = _builtin_key(getattr(torch._C, "_jit_interpret_graph", None))
    if interpret is not None:
        keys[interpret] = "torch._C._jit_interpret_graph"
    for method in (torch.fx.Interpreter.run, torch.fx.Interpreter.run_node):
        codes[id(method.__code__)] = "torch.fx.Interpreter"
    return codes, keys


_HIDING_CODES, _HIDING_KEYS = _mark_compiled_entry_points()


def _generated_files() -> tuple[str, ...]:
    """File-name prefixes of generated code: FX's, and inductor's cache once inductor has used one."""
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # set by inductor once it has compiled anything
    return (_FX_FILE, os.path.join(os.path.abspath(inductor), "")) if inductor else (_FX_FILE,)


class _State:
    """The active blocks of the current process (nested ``forbid`` blocks merge their targets)."""

    def __init__(self) -> None:
        self.stack: list[tuple[_Targets, Any]] = []  # (merged targets, the hook installed for them)
        self.called: list[str] = []  # messages of the forbidden calls seen since the outermost block began


_STATE = _State()


_OWN = "the test's own "  # the label of a test cell's function refused by own_cell


def _message(what: str, reason: str | None) -> str:
    if what.startswith(_OWN):
        return (
            f"your code called {what}, a function of the test cell itself (reached through the callers' frames): "
            "the test's functions are its answer key; compute the result yourself"
        )
    return reason or (
        f"your code called {what}, which this test forbids (however it is reached: another name, "
        "module path, subclass or a reference taken earlier): build it yourself"
    )


def _make_hook(targets: _Targets, previous: Any, called: list[str], reason: str | None, own: frozenset):
    codes, builtins, methods = targets.codes, targets.builtins, targets.methods
    switch_keys, switch_codes = _SWITCH_KEYS, _SWITCH_CODES
    hiding_codes, hiding_keys, generated = _HIDING_CODES, _HIDING_KEYS, _generated_files()
    callback, set_eval_frame = _eval_frame.get_eval_frame_callback, _eval_frame.set_eval_frame
    # fast paths: most calls are of nothing watched, decided by one set lookup
    watched_codes = set(codes) | set(switch_codes) | set(hiding_codes)
    watched_names = {key[1] for key in (*builtins, *switch_keys, *hiding_keys)} | set(methods)

    def refuse(what: str, message: str | None = None) -> None:
        message = message or _message(what, reason)
        called.append(message)
        raise ForbiddenCall(message)

    def hide(what: str) -> None:
        if callback() is not None:
            set_eval_frame(None)  # dynamo off before anything else runs
        refuse(what, f"your code ran {what}: {_HIDING}")

    def hook(frame, event, arg):
        if previous is not None:
            previous(frame, event, arg)
        if event == "call":
            code = id(frame.f_code)
            if code in watched_codes:
                if code in codes:
                    refuse(codes[code])
                if code in switch_codes and frame.f_back is not None and frame.f_back.f_code not in own:
                    refuse(f"{switch_codes[code]} (the guard may not be switched off)")
                if code in hiding_codes:
                    owner = frame.f_locals.get("self") if hiding_codes[code] == "compiled code" else None
                    hide(f"compiled code ({type(owner).__name__})" if owner is not None else hiding_codes[code])
            if frame.f_code.co_filename.startswith(generated):
                hide("FX-generated code" if frame.f_code.co_filename.startswith(_FX_FILE) else "inductor's code")
            if callback() is not None:
                hide(_DYNAMO)
        elif event == "c_call":
            if arg.__name__ not in watched_names:
                return
            key = _builtin_key(arg)
            if key is None:
                return
            if key in builtins:
                refuse(builtins[key])
            for owner, label in methods.get(key[1], ()):  # a C method bound to an instance: tensor.unfold
                if isinstance(arg.__self__, owner):
                    refuse(label)
            if key in switch_keys and frame.f_code not in own:
                refuse(f"{switch_keys[key]} (the guard may not be switched off)")
            if key in hiding_keys:
                hide(hiding_keys[key])
        elif event == "c_return" and arg is set_eval_frame and callback() is not None:
            hide(_DYNAMO)

    return hook


class _Mode(TorchFunctionMode):
    """Refuses forbidden torch operators however they are called (from C code, ``torch.ops``)."""

    def __init__(self, targets: _Targets, called: list[str], reason: str | None) -> None:
        super().__init__()
        self.targets, self.called, self.reason = targets, called, reason

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        targets = self.targets
        key = _builtin_key(func)
        what = targets.builtins.get(key) if key is not None else None
        if what is None:
            code = getattr(inspect.unwrap(func), "__code__", None) if callable(func) else None
            what = targets.codes.get(id(code)) if code is not None else None
        if what is None:
            packet = getattr(func, "_overloadpacket", func)
            what = targets.ops.get(getattr(packet, "_qualified_op_name", None))
        if what is not None:
            message = _message(what, self.reason)
            self.called.append(message)
            raise ForbiddenCall(message)
        layer = _LAYER  # counts for the watch below: function_layer_required(counted_by_caller=True)
        layer.inside += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            layer.inside -= 1


def _test_cell_functions(frame: Any, allow: tuple) -> list[types.FunctionType]:
    """Plain functions defined in the file of ``frame`` (the code entering a block: one test cell), found in
    its locals and globals, except those running now (on the stack) and those in ``allow``."""
    if frame is None or frame.f_code.co_filename == __file__:
        return []
    filename = frame.f_code.co_filename
    running, walk = set(), frame
    while walk is not None:
        running.add(walk.f_code)
        walk = walk.f_back
    allowed = {id(getattr(f, "__code__", None)) for f in allow}
    found = {}
    for scope in (frame.f_locals, frame.f_globals):
        for value in list(scope.values()):
            code = getattr(value, "__code__", None) if isinstance(value, types.FunctionType) else None
            if code is not None and code.co_filename == filename and code not in running and id(code) not in allowed:
                found[id(code)] = value
    return list(found.values())


@contextlib.contextmanager
def forbid(*targets: Any, reason: str | None = None, own_cell: bool = False, allow: tuple = ()) -> Iterator[None]:
    """Fail the enclosed block if any of ``targets`` runs, however it is reached.

    ``targets`` are functions, methods, classes (every method defined in the class body),
    built-in functions (torch operators included), C methods such as ``torch.Tensor.unfold``, or
    operators of ``torch.ops`` (``torch.ops.aten.nll_loss_forward``: every overload). ``reason``
    replaces the default message.

    ``own_cell``: refuse too the functions that the code entering the block defined next to it (a test
    cell's references and helpers: plain functions of its file, in its locals and globals, that are not
    running), since the student's code could reach them through its callers' frames and call the answer
    key; ``course_utils.testing.checks.forbid``, which test cells use, turns it on. A function the student's code is
    meant to call (a callback the test hands it) goes in ``allow``.
    Raises ``ValueError`` for a target it cannot watch, and :class:`ForbiddenCall` (an
    ``AssertionError``) when a target ran or the guard was switched off inside the block.
    """
    if not targets:
        raise ValueError("forbid: give at least one function, method, class or built-in to forbid")
    mine = _Targets()  # built anew for each block: no cache that the student's code could edit between tests
    for target in targets:
        mine.add(target)
    helpers = _test_cell_functions(sys._getframe(2), allow) if own_cell else []
    if helpers:
        own = _Targets()
        for helper in helpers:
            own.codes[id(helper.__code__)] = f"{_OWN}{helper.__name__}"
            own.keep.append(helper.__code__)
        mine = own.merged(mine)
    state = _STATE
    if state.stack and sys.getprofile() is not state.stack[-1][1]:
        state.stack.clear()  # not inside a live block: entries left by an interrupted block, or planted
    outer = state.stack[-1][0] if state.stack else None
    merged = mine.merged(outer)
    if not state.stack:
        state.called = []
    called = state.called
    previous, previous_threads = sys.getprofile(), threading.getprofile()
    hook = _make_hook(merged, previous if not state.stack else None, called, reason, _OWN_CODES)
    mode = _Mode(merged, called, reason) if merged.builtins or merged.ops else None
    state.stack.append((merged, hook))
    # where torch operators are forbidden, operations that bypass the torch-function layer are refused
    below = function_layer_required(counted_by_caller=True) if mode is not None else contextlib.nullcontext()
    below.__enter__()
    depth = torch._C._len_torch_function_stack()
    if mode is not None:
        mode.__enter__()
    threading.setprofile(hook)
    sys.setprofile(hook)
    problem = None
    try:
        yield
    finally:
        installed = sys.getprofile()
        sys.setprofile(previous if len(state.stack) < 2 else state.stack[-2][1])
        threading.setprofile(previous_threads)
        if mode is not None:
            top = torch._C._len_torch_function_stack()
            if top == depth + 1 and torch._C._get_function_stack_at(top - 1) is mode:
                mode.__exit__(None, None, None)
            else:
                problem = "the torch function mode stack was changed"
        try:
            below.__exit__(None, None, None)
        except ForbiddenCall as exc:
            called.append(str(exc))
        if state.stack:
            state.stack.pop()
        if installed is not hook and not called:
            problem = "the profile hook was removed or replaced"
        if called:
            raise ForbiddenCall(called[0]) from None
        if problem:
            raise ForbiddenCall(f"the guard was switched off while your code ran ({problem})")


# ------------------------------------------------------------------ Python's own work, counted
# Installed code (the interpreter's, the environment's) and the course library: not the student's.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(__file__))  # course_utils/, of which this is course_utils/testing/
_LIBRARY_FILES = tuple(
    {os.path.join(os.path.realpath(p), "") for p in (sys.prefix, sys.base_prefix, _PACKAGE_DIR)}
    | {os.path.join(p, "") for p in (sys.prefix, sys.base_prefix, _PACKAGE_DIR)}
) + ("<course_utils",)
_STEPS: list[list[int]] = []  # the counters of the active count_python_steps blocks


@contextlib.contextmanager
def count_python_steps(steps: list[int]) -> Iterator[None]:
    """Count into ``steps[0]`` the bytecode instructions that Python code outside the installed packages and
    the course library (the student's code, and any callback of the test) runs inside the block.

    Work done in plain Python floats and lists runs no tensor operation, so only this sees it (a numerical
    derivative computed on ``.tolist()`` values). Uses ``sys.settrace`` with opcode events in those frames
    only; blocks nest. Raises :class:`ForbiddenCall` if the trace function was replaced inside the block.
    """
    outermost = not _STEPS
    _STEPS.append(steps)
    library = _LIBRARY_FILES
    counters = _STEPS

    def local(frame, event, arg):
        if event == "opcode":
            for counter in counters:
                counter[0] += 1
        return local

    def tracer(frame, event, arg):
        if frame.f_code.co_filename.startswith(library):
            return None
        frame.f_trace_lines = False
        frame.f_trace_opcodes = True
        return local

    previous = sys.gettrace() if outermost else None
    if outermost:
        sys.settrace(tracer)
    try:
        yield
    finally:
        _STEPS.remove(steps)
        if outermost:
            installed = sys.gettrace()
            sys.settrace(previous)
            if installed is not tracer:
                raise ForbiddenCall("the guard was switched off while your code ran (the trace function was replaced)")


_OWN_CODES = frozenset(
    _codes_of(forbid)
    + [forbid.__wrapped__.__code__]
    + [c for c in forbid.__wrapped__.__code__.co_consts if isinstance(c, types.CodeType)]
    + [count_python_steps.__wrapped__.__code__]
)

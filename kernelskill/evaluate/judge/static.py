"""Static checks over the candidate's AST (and the C++/CUDA strings it compiles).

Each finding is ``"code: one-line explanation"``. Codes in ``CHEATS`` make the status
``flagged``; the others are shown for review but do not fail an otherwise correct candidate.
"""
from __future__ import annotations

import ast
import re
from kernelskill.candidate import parse_python

CHEATS = {"stream", "thread", "process", "socket", "file-io", "env-write", "monkey-patch", "fallback",
          "introspection", "reference-call", "data-ptr", "stateful-forward", "timer", "l2-persist"}
REVIEW = {"downcast", "stream-joined", "library-call"}

_PY_MODULES = {
    "threading": "thread", "_thread": "thread", "concurrent": "thread", "asyncio": "thread",
    "multiprocessing": "process", "subprocess": "process", "socket": "socket", "http": "socket",
    "urllib": "socket", "requests": "socket", "httpx": "socket", "ctypes": "monkey-patch",
    "gc": "introspection", "inspect": "introspection", "traceback": "introspection", "pickle": "file-io",
    "shutil": "file-io",
}
_CALLS = {
    "os.system": "process", "os.popen": "process", "os.fork": "process", "os.spawnv": "process",
    "os.execv": "process", "os.kill": "process", "os._exit": "process",
    "os.putenv": "env-write", "os.environ.update": "env-write", "os.environ.setdefault": "env-write",
    "os.environ.pop": "env-write", "os.unsetenv": "env-write",
    "os.remove": "file-io", "os.unlink": "file-io", "os.rename": "file-io", "os.makedirs": "file-io",
    "os.mkdir": "file-io", "torch.save": "file-io", "torch.load": "file-io", "numpy.save": "file-io",
    "np.save": "file-io", "np.load": "file-io",
    "torch.cuda.Stream": "stream", "torch.cuda.stream": "stream", "torch.Stream": "stream",
    "torch.cuda.set_stream": "stream", "torch.cuda.ExternalStream": "stream",
    "sys._getframe": "introspection", "os.getenv": "introspection",
    "torch.library.Library": "monkey-patch",
    "torch.library.impl": "monkey-patch", "torch.library.custom_op": "monkey-patch",
    "torch.backends.cudnn.flags": "monkey-patch",
    "torch.set_float32_matmul_precision": "monkey-patch", "torch.set_num_threads": "monkey-patch",
    "torch.set_default_dtype": "monkey-patch", "torch.manual_seed": "monkey-patch",
}
_PATCHABLE_ROOTS = {"torch", "time", "numpy", "np", "builtins", "F", "nn", "math", "sys", "os", "triton"}
_NATIVE = [
    (re.compile(r"cudaStreamCreate|getStreamFromPool|cudaStreamNonBlocking|cudaStreamPerThread|"
                r"cudaStreamLegacy|cudaLaunchHostFunc"), "stream", "native code creates or switches CUDA streams; "
                                                                 "work can escape the timed stream"),
    (re.compile(r"accessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaAccessPropertyPersisting|"
                r"cudaStreamAttributeAccessPolicyWindow|cudaCtxResetPersistingL2Cache"), "l2-persist",
     "native code marks memory persisting in L2 (an access-policy window): data stays cached between "
     "timed calls, which the L2 flush before each call is there to prevent"),
    (re.compile(r"\b(?:at|torch)::(?:mm|matmul|bmm|addmm|baddbmm|linear|conv[123]d|convolution|_scaled_mm|"
                r"relu|gelu|silu|sigmoid|tanh|softmax|log_softmax|layer_norm|group_norm|batch_norm|"
                r"exp|log|sum|mean|amax|amin|max|min|cumsum|sort|topk|clamp|add|sub|mul|div|pow|where)\s*\(|"
                r"\bcublas\w*\s*\(|\bcudnn\w+\s*\("), "library-call",
     "(a library kernel through ATen, cuBLAS or cuDNN): allowed and labelled; the custom share counts "
     "only the candidate's own kernels"),
    (re.compile(r"std::thread|std::async|pthread_create|\.detach\(\)"), "thread",
     "native code starts threads outside the call (use OpenMP inside the call instead)"),
    (re.compile(r"\bfork\s*\(|\bsystem\s*\(|\bpopen\s*\(|\bexecv"), "process", "native code starts processes"),
    (re.compile(r"\bfopen\s*\(|std::[io]?fstream|\bopen\s*\(\s*\""), "file-io", "native code opens files"),
    (re.compile(r"\bsetenv\s*\(|\bputenv\s*\("), "env-write", "native code writes the environment"),
    (re.compile(r"\bsocket\s*\(|\bconnect\s*\("), "socket", "native code opens sockets"),
    (re.compile(r"__float2half|__float2bfloat16|at::kHalf|at::kBFloat16|torch::kHalf|torch::kBFloat16|"
                r"\.half\(\)|__nv_bfloat16|\bhalf2\b"), "downcast",
     "native code converts to half/bfloat16 precision"),
]
_DOWNCAST_DTYPES = {"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2"}
_CURRENT = re.compile(r"(\w+)\s*=\s*(?:at::cuda::|c10::cuda::)?getCurrentCUDAStream\s*\(")
_WAIT_EVENT = re.compile(r"cudaStreamWaitEvent\s*\(\s*([^,]+),")
_HOST_JOIN = re.compile(r"cudaStreamSynchronize\s*\(|cudaDeviceSynchronize\s*\(")


def _joined(text: str) -> bool:
    """Whether native code that uses a second stream joins it back into the current one: the current
    stream waits on an event (``cudaStreamWaitEvent(<current stream>, …)``), or the host synchronizes.
    A wait the other way round (the side stream waiting for the current one) joins nothing."""
    if _HOST_JOIN.search(text):
        return True
    current = set(_CURRENT.findall(text))
    for target in _WAIT_EVENT.findall(text):
        name = re.match(r"\s*(\w+)", target)
        if "getCurrentCUDAStream" in target or (name and name.group(1) in current):
            return True
    return False


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def check_source(source: str, task_dtype: str = "float32") -> list[str]:
    """All static findings for a candidate source, deduplicated, in source order."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return []
    found: list[str] = []

    def add(code: str, msg: str, node: ast.AST | None = None, line: int | None = None) -> None:
        line = line or (node.lineno if node is not None and hasattr(node, "lineno") else None)
        where = f" (line {line})" if line else ""
        text = f"{code}: {msg}{where}"
        if text not in found:
            found.append(text)

    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                aliases[a.asname or root] = a.name
                if root in _PY_MODULES:
                    add(_PY_MODULES[root], f"imports {a.name}", node)
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root in _PY_MODULES:
                add(_PY_MODULES[root], f"imports from {node.module}", node)
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    written = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            full = _resolve(name, aliases)
            for key in (name, full):
                if key in _CALLS:
                    add(_CALLS[key], f"calls {key}", node)
                    break
            if name == "setattr" and node.args and _resolve(_dotted(node.args[0]), aliases).split(".")[0] \
                    in _PATCHABLE_ROOTS:
                add("monkey-patch", f"setattr on {_dotted(node.args[0])} (patching a library)", node)
            if name == "open" or full.endswith(".open") and full.startswith(("io", "os", "codecs")):
                add("file-io", "opens a file", node)
            if name.endswith((".write_text", ".write_bytes", ".read_text", ".read_bytes", ".unlink")):
                add("file-io", f"calls {name.split('.')[-1]}", node)
            if name.endswith(".data_ptr"):
                add("data-ptr", "reads tensor addresses in Python (results cached by address look fast "
                                "and are wrong)", node)
            if name in ("get_inputs", "get_init_inputs", "Model") or full.endswith(("reference.Model",)):
                add("reference-call", f"calls the task's own {name}", node)
            attr = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if attr in ("half", "bfloat16") and not node.args and task_dtype not in _DOWNCAST_DTYPES:
                add("downcast", f"converts to lower precision with {attr}()", node)
            for arg in list(node.args) + [k.value for k in node.keywords]:
                d = _dotted(arg)
                if d.split(".")[-1] in _DOWNCAST_DTYPES and d.startswith("torch") and task_dtype not in _DOWNCAST_DTYPES:
                    add("downcast", f"uses {d} on a {task_dtype} task", node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                d = _dotted(t.value) if isinstance(t, ast.Subscript) else _dotted(t)
                root = d.split(".")[0]
                if isinstance(t, ast.Subscript) and d in ("os.environ",):
                    add("env-write", "writes os.environ", node)
                elif isinstance(t, ast.Subscript) and d == "sys.modules":
                    add("monkey-patch", "replaces a module in sys.modules", node)
                elif isinstance(t, ast.Attribute) and "." in d and _resolve(root, aliases).split(".")[0] in _PATCHABLE_ROOTS:
                    resolved = _resolve(d, aliases)
                    code = "timer" if resolved.split(".")[0] == "time" or "Event" in d else "monkey-patch"
                    add(code, f"assigns {d} (patching a library)", node)
        elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load) and id(node) not in written \
                and _resolve(_dotted(node), aliases) in ("sys.modules", "os.environ"):
            # Reading the environment or the loaded modules: how a candidate tells the harness (or
            # the reference's module) apart and behaves differently there (issue 26).
            what = "the loaded modules (sys.modules)" if _dotted(node).endswith("modules") else \
                "the environment (os.environ)"
            add("introspection", f"reads {what}: code that can tell the harness apart can behave "
                                 f"differently under it", node)
        elif isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            _check_model_class(node, add, _module_names(tree))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 40:
            for pattern, code, msg in _NATIVE:
                m = pattern.search(node.value)
                if m and (code != "downcast" or task_dtype not in _DOWNCAST_DTYPES):
                    # the line of the candidate's file where the native code does it
                    line = node.lineno + node.value[:m.start()].count("\n")
                    if code == "library-call":
                        msg = f"native code calls {m.group(0).rstrip('( ')} {msg}"
                    if code == "stream" and _joined(node.value):
                        # An honest overlap: the side stream's work is joined back into the current
                        # stream before returning. Checked at run time too: work that still escapes the
                        # timed stream shows as a timer mismatch (host clock vs CUDA events), a cheat.
                        code, msg = "stream-joined", ("native code runs work on a second CUDA stream and joins it "
                                                      "back with events; the host-vs-event clock check verifies it")
                    add(code, msg, node, line)
        elif isinstance(node, ast.Global):
            add("stateful-forward", "uses `global` state (results can be cached across calls)", node)
    return found


def _resolve(name: str, aliases: dict) -> str:
    if not name:
        return ""
    head, _, rest = name.partition(".")
    full = aliases.get(head, head)
    return f"{full}.{rest}" if rest else full


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound at the module's top level (where a cache across calls would live)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


_MUTATORS = {"setdefault", "update", "append", "extend", "add", "insert", "__setitem__", "put"}
_CACHE_DECORATORS = {"lru_cache", "cache", "cached_property"}


def _check_model_class(cls: ast.ClassDef, add, module_names: set[str]) -> None:
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__":
            continue
        for dec in fn.decorator_list:
            d = _dotted(dec.func if isinstance(dec, ast.Call) else dec)
            if d.split(".")[-1] in _CACHE_DECORATORS:
                add("stateful-forward", f"{fn.name}() is memoized with {d}", dec)
        for node in ast.walk(fn):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _MUTATORS and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in module_names):
                add("stateful-forward", f"{fn.name}() mutates module-level {node.func.value.id} (results "
                                        f"can be replayed across calls)", node)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                                    and t.value.id in module_names for t in node.targets):
                add("stateful-forward", f"{fn.name}() writes into a module-level container (results can be "
                                        f"replayed across calls)", node)
            if isinstance(node, ast.Try) and node.handlers:
                calls = [n for h in node.handlers for n in ast.walk(h) if isinstance(n, ast.Call)]
                if calls:
                    add("fallback", "try/except around the kernel call falls back to other code when it fails", node)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_stores_on_self(t) for t in targets):
                    add("stateful-forward", f"{fn.name}() stores state on self (results can be replayed "
                                            f"across calls); allocate per call", node)
            if isinstance(node, ast.Call) and _sets_attr_of_self(node):
                add("stateful-forward", f"{fn.name}() sets an attribute of self (results can be replayed "
                                        f"across calls); allocate per call", node)


def _sets_attr_of_self(call: ast.Call) -> bool:
    """``setattr(self, …)``, ``object.__setattr__(self, …)``, ``self.__setattr__(…)``."""
    def is_self(a: ast.AST) -> bool:
        return isinstance(a, ast.Name) and a.id == "self"
    f = call.func
    if isinstance(f, ast.Name) and f.id == "setattr":
        return bool(call.args) and is_self(call.args[0])
    if isinstance(f, ast.Attribute) and f.attr == "__setattr__":
        return is_self(f.value) or (bool(call.args) and is_self(call.args[0]))
    return False


def _stores_on_self(t: ast.AST) -> bool:
    """An assignment target that writes into ``self``: ``self.x``, ``self.x[i]``, ``self.a.b[i][j]``,
    and each element of ``self.a, self.b = …`` / ``[self.a, *rest] = …``."""
    if isinstance(t, (ast.Tuple, ast.List)):
        return any(_stores_on_self(e) for e in t.elts)
    if isinstance(t, ast.Starred):
        return _stores_on_self(t.value)
    if not isinstance(t, (ast.Attribute, ast.Subscript)):
        return False
    base = t.value
    while isinstance(base, (ast.Attribute, ast.Subscript)):
        base = base.value
    return isinstance(base, ast.Name) and base.id == "self"


def is_cheat(flag: str) -> bool:
    return flag.split(":", 1)[0] in CHEATS

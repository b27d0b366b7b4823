"""The typed Python surface: a user's file that defines and launches
kernels and calls ``enigma.ops`` runs and passes ``mypy --strict``; mypy
still finds real mistakes; ``enigma.ops`` exports only its operations,
each annotated with keyword-only options and Args/Returns docs; the wheel
ships ``py.typed`` and a stub of the native module that matches it; and
the package's modules import each other without cycles or imports
deferred into functions."""

import ast
import inspect
import pathlib
import runpy
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import enigma
import enigma.ops as ops
from enigma import _enigma

DATA = pathlib.Path(__file__).parent / "data"
PACKAGE = pathlib.Path(enigma.__file__).parent

OPTIONS = {"dtype", "rt", "device", "threads", "stream", "eps", "exclusive", "scale", "fused", "group", "layout",
           "out_dtype", "biases", "variant", "warmup", "repeats", "record"}


def test_the_typed_user_file_runs_and_agrees_with_numpy():
    error = runpy.run_path(str(DATA / "typed_kernels.py"))["run"]()
    assert error < 1e-5, error


def _mypy(path, tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (python/build_and_test.sh installs the pinned version)")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )


def test_mypy_strict_accepts_the_typed_user_file(tmp_path):
    r = _mypy(DATA / "typed_kernels.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_finds_mistakes_in_kernels_and_calls(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent('''
        import numpy as np
        import enigma
        import enigma.ops

        @enigma.kernel
        def k(x: enigma.f32) -> None:
            x[0] = enigma.simd_shuffle_down(x[0])

        enigma.ops.softmax(np.ones((2, 2), np.float32), -1, None)
        enigma.ops.tune(3)
        enigma.MetalRuntime("gpu")
        enigma.no_such_intrinsic
        OP = enigma.matmul2d(enigma.matmul2d_descriptor(32, 32, 16), enigma.execution_simdgroup)

        @enigma.kernel
        def j(a: enigma.f16, c: enigma.f32) -> None:
            v = enigma.tensor(a, (16, 32))
            t = OP.get_destination_cooperative_tensor(v, v, enigma.f32)
            OP.run(v, t)
            t.reduce_everything("sum")
    '''))
    r = _mypy(bad, tmp_path)
    out = r.stdout
    assert r.returncode == 1, out
    for line, what in [(8, 'Missing positional argument "delta"'), (10, "Too many positional arguments"),
                       (11, 'incompatible type "int"'), (12, 'incompatible type "Literal[\'gpu\']"'),
                       (13, 'has no attribute "no_such_intrinsic"'), (20, 'in call to "run" of "Matmul2d"'),
                       (21, 'has no attribute "reduce_everything"')]:
        assert any(l.startswith(f"bad.py:{line}:") and what in l for l in out.splitlines()), (line, what, out)


def test_ops_exports_only_its_operations():
    public = {n for n in dir(ops) if not n.startswith("_")}
    assert public == set(ops.__all__), public ^ set(ops.__all__)


@pytest.mark.parametrize("name", [n for n in ops.__all__ if callable(getattr(ops, n))])
def test_each_operation_is_annotated_with_keyword_only_options(name):
    f = getattr(ops, name)
    sig = inspect.signature(f)
    assert sig.return_annotation is not inspect.Signature.empty, name
    for p in sig.parameters.values():
        assert p.kind is not inspect.Parameter.VAR_KEYWORD, f"{name} takes **{p.name}"
        assert p.annotation is not inspect.Parameter.empty, f"{name}: `{p.name}` is not annotated"
        if p.name in OPTIONS:
            assert p.kind is inspect.Parameter.KEYWORD_ONLY, f"{name}: option `{p.name}` is not keyword-only"
    assert "Args:" in f.__doc__ and "Returns:" in f.__doc__, name


def test_the_wheel_ships_py_typed_and_the_native_stub():
    assert (PACKAGE / "py.typed").is_file()
    stub = ast.parse((PACKAGE / "_enigma.pyi").read_text())
    declared = set()
    for node in stub.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            declared.add(node.target.id)
    native = {n for n in dir(_enigma) if not n.startswith("_") or n == "__version__"}
    assert declared == native, f"stub only: {sorted(declared - native)}; module only: {sorted(native - declared)}"


def test_one_native_function_per_operation():
    assert not hasattr(_enigma, "library_call")
    for op in ["scale", "add", "mul", "relu", "silu", "gelu", "reduce_axis", "reduce_rows", "prefix_sum", "softmax_axis",
               "scan_axis", "rms_norm", "layer_norm", "gemv", "matmul", "matmul_batched", "attention_decode", "qmatmul", "tune"]:
        assert callable(getattr(_enigma, f"op_{op}")), op


def _package_imports():
    """module -> the package modules it imports at its top level (outside
    ``if TYPE_CHECKING:``), and the imports of package modules made inside
    functions."""
    graph, deferred = {}, []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
        package = parts if path.name == "__init__.py" else parts[:-1]
        tree = ast.parse(path.read_text())

        def target(node):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            return name if name.startswith("enigma") else None

        imports = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and target(node):
                t = target(node)
                imports.add(t)
                # `from . import ops` imports the module enigma.ops
                imports |= {f"{t}.{a.name}" for a in node.names if (PACKAGE.parent / f"{t}.{a.name}".replace(".", "/")).with_suffix(".py").exists()}
        graph[module] = {i for i in imports if i != module}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and target(node):
                        deferred.append(f"{module}: {target(node)}")
    return graph, deferred


def test_modules_import_each_other_without_cycles():
    graph, deferred = _package_imports()
    assert not deferred, f"imports deferred into functions: {deferred}"
    # A module's package (enigma for enigma._kernel) is not a dependency.
    graph = {m: {i for i in deps if not m.startswith(i + ".") and i in graph} for m, deps in graph.items()}
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", f"import cycle: {' -> '.join(path + [m])}"
        state[m] = "open"
        for d in sorted(graph[m]):
            visit(d, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])
    assert "enigma._kernel" in graph and "enigma._launch" in graph["enigma._compile"]

"""The kernel language as editors and type checkers see it: every builtin,
type and function the front end registers (``enigma._lang``,
``enigma._types``) is declared in ``enigma._language`` (or ``enigma.fast``)
with its own signature and docstring, the declared names are the ones
kernels use, and the package docstring points at docs/language.md with
true facts.

When a test here fails after an intrinsic was added to the front end's
tables: declare it in python/python/enigma/_language.py (``@_declare``, a
signature, a return type and a one-line docstring) and add it to that
module's ``__all__``; enigma/fast.py and enigma/precise.py are generated
(python/tools/precision_stubs.py).
"""

import ast
import inspect
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import enigma
from enigma import _lang, _language, f32, simd_sum, thread_index_in_simdgroup, thread_position_in_grid
from enigma._types import PUBLIC_TYPES

PACKAGE = pathlib.Path(enigma.__file__).parent


def _declared(path):
    """(functions, annotated names, classes under TYPE_CHECKING) declared
    at the top level of a module's source, read without running it."""
    tree = ast.parse((PACKAGE / path).read_text())
    functions, names, classes = {}, set(), set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(getattr(d, "id", None) == "_declare" for d in node.decorator_list):
            functions[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            classes |= {n.name for n in node.body if isinstance(n, ast.ClassDef)}
    return functions, names, classes


def test_every_registered_intrinsic_is_declared():
    functions, _, _ = _declared("_language.py")
    missing = sorted(set(_lang.INTRINSICS) - set(functions))
    assert not missing, f"declare these in enigma/_language.py with @_declare: {missing}"
    unknown = sorted(set(functions) - set(_lang.INTRINSICS))
    assert not unknown, f"declared but not registered in enigma._lang: {unknown}"


@pytest.mark.parametrize("module", ["fast.py", "precise.py"])
def test_every_fast_and_precise_function_is_declared(module):
    functions, _, _ = _declared(module)
    assert set(functions) == set(_lang.PRECISION_MATH), set(functions) ^ set(_lang.PRECISION_MATH)


def test_fast_and_precise_stubs_are_generated_from_the_irs_list():
    tool = pathlib.Path(__file__).resolve().parents[1] / "tools" / "precision_stubs.py"
    done = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_builtin_and_type_is_declared():
    _, names, classes = _declared("_language.py")
    assert set(_lang.BUILTINS) <= names, set(_lang.BUILTINS) - names
    assert classes - {"Constant"} == set(PUBLIC_TYPES), (classes - {"Constant"}) ^ set(PUBLIC_TYPES)
    assert set(_language.TYPE_NAMES) == set(PUBLIC_TYPES)
    for name in list(_lang.BUILTINS) + list(PUBLIC_TYPES):
        assert name in _language.__all__, name
        assert getattr(enigma, name) is (_lang.BUILTINS.get(name) or PUBLIC_TYPES[name])


@pytest.mark.parametrize("name", sorted(_lang.INTRINSICS))
def test_each_intrinsic_has_its_own_signature_and_docstring(name):
    f = getattr(enigma, name)
    assert inspect.isfunction(f), f"enigma.{name} is {f!r}, not a declared function"
    assert name in _language.__all__
    sig = inspect.signature(f)
    assert sig.return_annotation is not inspect.Signature.empty
    assert all(p.annotation is not inspect.Parameter.empty for p in sig.parameters.values())
    assert f.__doc__ and f.__doc__ != _lang.Intrinsic.__doc__
    with pytest.raises(TypeError, match="only has a meaning inside an @enigma.kernel"):
        f()


def test_docstrings_are_distinct():
    docs = [getattr(enigma, n).__doc__ for n in _lang.INTRINSICS]
    docs += [getattr(ns, n).__doc__ for ns in (enigma.fast, enigma.precise) for n in _lang.PRECISION_MATH]
    assert len(set(docs)) == len(docs)


def test_signatures_name_the_arguments_the_front_end_binds():
    assert list(inspect.signature(enigma.simd_shuffle_down).parameters) == ["x", "delta"]
    assert list(inspect.signature(enigma.load_if).parameters) == ["buffer", "index", "cond", "default"]
    assert list(inspect.signature(enigma.atomic_compare_exchange).parameters) == ["buffer", "index", "expected", "desired"]
    assert list(inspect.signature(enigma.fast.pow).parameters) == ["x", "y"]
    assert inspect.signature(enigma.barrier).parameters["mem_flags"].default == "mem_threadgroup"


@enigma.kernel
def lane_sums(x: f32, out: f32):
    # Names imported from enigma, as an editor completes them.
    i = thread_position_in_grid
    total = simd_sum(x[i])
    if thread_index_in_simdgroup() == 0:
        out[i / 32] = total + enigma.fast.exp(0.0) - 1.0


def test_imported_names_compile_and_compute():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(2, np.float32)
    enigma.compile(lane_sums)(x, out, grid=64, threads=32, device="sim")
    np.testing.assert_allclose(out, x.reshape(2, 32).sum(axis=1), rtol=1e-6)


def test_package_docstring_is_an_overview_with_true_facts():
    doc = enigma.__doc__
    assert "docs/language.md" in doc
    assert len(doc.splitlines()) <= 40
    for text in [doc] + [getattr(enigma, n).__doc__ or "" for n in _language.__all__]:
        assert "not there yet" not in text
        assert "atomic_fetch_add(" not in text and "``atomic_fetch_add``" not in text


def test_the_simulator_has_one_name():
    assert enigma.MetalRuntime("sim").device == "sim"
    for alias in ("cpu", "simulator"):
        rt = enigma.MetalRuntime(alias)
        assert rt.device == "sim"
        assert rt.native is enigma.MetalRuntime("sim").native  # one device, one native runtime


def test_an_editor_completes_the_kernel_language_with_signatures():
    jedi = pytest.importorskip("jedi", reason="jedi is not installed (python/build_and_test.sh installs the pinned version)")

    def complete(text):
        return {c.name: c for c in jedi.Script(f"import enigma\n{text}").complete(2, len(text))}

    shuffles = complete("enigma.simd_shuffle")
    assert set(shuffles) == {"simd_shuffle", "simd_shuffle_up", "simd_shuffle_down", "simd_shuffle_xor"}
    down = shuffles["simd_shuffle_down"]
    assert [s.to_string() for s in down.get_signatures()] == ["simd_shuffle_down(x: Num, delta: Num) -> Value"]
    assert "``x`` of lane ``i + delta``" in down.docstring()
    assert set(complete("enigma.fast.exp")) == {"exp", "exp2"}
    assert set(complete("enigma.float")) == {"float2", "float3", "float4"}
    assert "position in the grid" in complete("enigma.thread_position_in_gr")["thread_position_in_grid"].docstring()

"""An enigma kernel inside MLX programs: :func:`metal_kernel` turns a compiled
kernel into the ``mx.fast.metal_kernel`` that runs the same MSL on a Mac,
scheduled lazily by MLX on its own streams.

MLX builds a kernel from a name, its input and output names, a header and a
*body*: it writes the signature itself from the arrays of each call. So the
export splits enigma's MSL for the kernel into

* the **header** (enigma's helpers and constants), where each integer or
  bool specialisation constant becomes an MLX template argument (the body
  reads it through the same name enigma's code uses) and each other one is
  fixed at the compiled value;
* the **body**, which names its inputs, outputs and the thread-position
  attributes exactly as MLX declares them: the buffers the kernel writes are
  the outputs, every other buffer and by-value parameter an input (a by-value
  parameter is passed as a 0-d array, which MLX binds as ``constant T&``),
  and MLX adds ``thread_position_in_grid`` and the other attributes because
  the body uses them by those names.

What MLX's signature cannot say is refused with an error naming the
parameter: vector-typed buffers (MLX types a buffer by its array's scalar
dtype), textures, buffers whose writes other threadgroups must see
(``coherent(device)``), and a mix of atomic and plain outputs (MLX makes all
outputs atomic or none).

Checked on Linux up to the call: :meth:`MLXKernel.assemble` writes the
source as MLX assembles it for given inputs, which the strict MSL check of
the test suite compiles; the call itself needs MLX's Metal back end (a Mac)
and raises MLX's own error elsewhere. Round trip: write the kernel in
Python, run it on the simulator under the sanitizer, then ``to_mlx()`` it::

    kernel = enigma.compile(my_kernel)
    rt = enigma.MetalRuntime(device="sim", sanitize=True)
    ...                                       # checked on any machine
    mlx_kernel = kernel.to_mlx()              # on a Mac, inside MLX code:
    (out,) = mlx_kernel(inputs=[x, n], grid=(n, 1, 1), threadgroup=(256, 1, 1),
                        output_shapes=[x.shape], output_dtypes=[mx.float32])
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _mlx

__all__ = ["MLXKernel", "metal_kernel", "ExportError"]

#: MSL scalar types enigma emits → MLX's dtype names for them (what an array
#: bound to the parameter must hold).
_MSL_SCALARS = {
    "float": "f32", "half": "f16", "bfloat": "bf16", "bool": "bool", "char": "i8", "uchar": "u8",
    "short": "i16", "ushort": "u16", "int": "i32", "uint": "u32", "long": "i64", "ulong": "u64",
}
#: MSL spelling of each enigma dtype in MLX's generated signatures.
MLX_TYPE_STRINGS = {
    "f32": "float", "f16": "float16_t", "bf16": "bfloat16_t", "bool": "bool", "i8": "int8_t", "u8": "uint8_t",
    "i16": "int16_t", "u16": "uint16_t", "i32": "int32_t", "u32": "uint32_t", "i64": "int64_t", "u64": "uint64_t",
}
#: The thread attributes MLX declares when a body names them, with their types.
MLX_ATTRIBUTES = (
    ("dispatch_quadgroups_per_threadgroup", "uint"), ("dispatch_simdgroups_per_threadgroup", "uint"),
    ("dispatch_threads_per_threadgroup", "uint3"), ("grid_origin", "uint3"), ("grid_size", "uint3"),
    ("quadgroup_index_in_threadgroup", "uint"), ("quadgroups_per_threadgroup", "uint"),
    ("simdgroup_index_in_threadgroup", "uint"), ("simdgroups_per_threadgroup", "uint"),
    ("thread_execution_width", "uint"), ("thread_index_in_quadgroup", "uint"),
    ("thread_index_in_simdgroup", "uint"), ("thread_index_in_threadgroup", "uint"),
    ("thread_position_in_grid", "uint3"), ("thread_position_in_threadgroup", "uint3"),
    ("threadgroup_position_in_grid", "uint3"), ("threadgroups_per_grid", "uint3"), ("threads_per_grid", "uint3"),
    ("threads_per_simdgroup", "uint"), ("threads_per_threadgroup", "uint3"),
)
#: MLX binds an input of fewer elements than this in the constant address space.
MLX_MAX_CONSTANT_ARRAY_SIZE = 8

_PARAM = re.compile(r"^\s*(?P<decl>.+?)\s+(?P<name>[A-Za-z_]\w*)\s+\[\[(?P<attr>[^\]]+)\]\],?$")
_FUNCTION_CONSTANT = re.compile(r"^constant (?P<type>\w+) (?P<name>\w+) \[\[function_constant\(\d+\)\]\];$")
_CONSTANT_VALUE = re.compile(r"^constant (?P<type>\w+) (?P<name>\w+)_v = is_function_constant_defined\(\w+\) \? \w+ : (?P<default>.+);$")


class ExportError(ValueError):
    """A kernel MLX's ``metal_kernel`` cannot express, naming what and why."""


class MLXKernel:
    """An enigma kernel as MLX runs custom kernels: the parts of
    ``mx.fast.metal_kernel`` and a call in its convention.

    Attributes:
        name: the kernel's name.
        input_names: the inputs, in the kernel's parameter order.
        output_names: the outputs (the buffers the kernel writes), in order.
        source: the body MLX wraps in its generated signature.
        header: what MLX places before the signature.
        atomic_outputs: whether the outputs are atomic (MLX's flag).
        template: the default template arguments, ``(name, value)`` pairs:
            the compiled kernel's integer and bool specialisation values.
        input_dtypes: enigma's dtype of each input (checked at each call).
    """

    def __init__(self, name: str, input_names: List[str], output_names: List[str], source: str, header: str,
                 atomic_outputs: bool, template: List[Tuple[str, Any]], input_dtypes: List[str],
                 template_types: Dict[str, str]) -> None:
        self.name = name
        self.input_names = input_names
        self.output_names = output_names
        self.source = source
        self.header = header
        self.atomic_outputs = atomic_outputs
        self.template = template
        self.input_dtypes = input_dtypes
        self._template_types = template_types
        self._kernel: Any = None

    def __repr__(self) -> str:
        return f"<enigma.mlx.MLXKernel {self.name}(inputs={self.input_names}, outputs={self.output_names})>"

    def mlx_kernel(self) -> Any:
        """The ``mx.fast.metal_kernel`` object (made once)."""
        if self._kernel is None:
            import mlx.core as mx

            self._kernel = mx.fast.metal_kernel(
                name=self.name, input_names=self.input_names, output_names=self.output_names, source=self.source,
                header=self.header, ensure_row_contiguous=True, atomic_outputs=self.atomic_outputs,
            )
        return self._kernel

    def _template(self, template: Optional[Sequence[Tuple[str, Any]]]) -> List[Tuple[str, Any]]:
        values = dict(self.template)
        for key, value in template or ():
            if key not in values:
                raise ExportError(f"kernel `{self.name}` has no integer or bool specialisation constant `{key}` "
                                  f"(its template arguments: {', '.join(values) or 'none'})")
            values[key] = value
        return list(values.items())

    def __call__(self, *, inputs: Sequence[Any], grid: Tuple[int, int, int], threadgroup: Tuple[int, int, int],
                 output_shapes: Sequence[Sequence[int]], output_dtypes: Sequence[Any],
                 template: Optional[Sequence[Tuple[str, Any]]] = None, init_value: Optional[float] = None,
                 verbose: bool = False, stream: Any = None) -> List[Any]:
        """Runs the kernel in an MLX program, as ``mx.fast.metal_kernel``'s
        objects are called (lazily, on MLX's stream). The inputs' dtypes are
        checked against the kernel's parameters first: MLX would type the
        signature from the arrays and compile a kernel reading the wrong type.

        Returns:
            the outputs, ``mx.array``s.
        """
        if len(inputs) != len(self.input_names):
            raise ExportError(f"kernel `{self.name}` takes {len(self.input_names)} input(s) ({', '.join(self.input_names)}), {len(inputs)} given")
        for name, want, x in zip(self.input_names, self.input_dtypes, inputs):
            got = _mlx.dtype_name(x.dtype) if _mlx.is_mlx_array(x) else None
            if got is not None and got != want:
                raise ExportError(f"kernel `{self.name}`, input `{name}`: the kernel reads {want}, the array holds {got}")
        kwargs: Dict[str, Any] = {}
        args = self._template(template)
        if args:
            kwargs["template"] = args
        if init_value is not None:
            kwargs["init_value"] = init_value
        if stream is not None:
            kwargs["stream"] = stream
        return list(self.mlx_kernel()(
            inputs=list(inputs), grid=grid, threadgroup=threadgroup, output_shapes=list(output_shapes),
            output_dtypes=list(output_dtypes), verbose=verbose, **kwargs,
        ))

    def assemble(self, inputs: Sequence[Tuple[str, Sequence[int]]], output_dtypes: Sequence[str],
                 template: Optional[Sequence[Tuple[str, Any]]] = None) -> str:
        """The source MLX compiles for a call with inputs of ``(dtype,
        shape)`` and outputs of ``output_dtypes`` (enigma's dtype names), as
        MLX writes it: the header, the template line, the signature (inputs,
        then outputs, then each thread attribute the body names) and the body
        (without MLX's own headers, which define ``float16_t`` and
        ``bfloat16_t``)."""
        args = self._template(template)
        lines = [self.header]
        if args:
            kinds = ", ".join(f"{'bool' if self._template_types[k] == 'bool' else 'int'} {k}" for k, _ in args)
            lines.append(f"template <{kinds}>")
        params = []
        for name, (dtype, shape) in zip(self.input_names, inputs):
            size = 1
            for d in shape:
                size *= d
            space = "constant" if size < MLX_MAX_CONSTANT_ARRAY_SIZE else "device"
            params.append(f"  const {space} {MLX_TYPE_STRINGS[dtype]}{'&' if len(shape) == 0 else '*'} {name}")
        for name, dtype in zip(self.output_names, output_dtypes):
            t = MLX_TYPE_STRINGS[dtype]
            params.append(f"  device {'atomic<' + t + '>' if self.atomic_outputs else t}* {name}")
        params = [f"{p} [[buffer({i})]]" for i, p in enumerate(params)]
        params += [f"  {t} {a} [[{a}]]" for a, t in MLX_ATTRIBUTES if a in self.source]
        lines.append(f"[[kernel]] void custom_kernel_{self.name}(\n" + ",\n".join(params) + ") {")
        lines.append(self.source)
        lines.append("}")
        if args:
            values = ", ".join(str(int(v)) if not isinstance(v, bool) else ("true" if v else "false") for _, v in args)
            lines.append(f"template [[host_name(\"custom_kernel_{self.name}\")]] [[kernel]] "
                         f"decltype(custom_kernel_{self.name}<{values}>) custom_kernel_{self.name}<{values}>;")
        return "\n".join(lines) + "\n"


def metal_kernel(compiled: Any) -> MLXKernel:
    """The MLX form of ``compiled`` (what :func:`enigma.compile` returns).

    Raises:
        ExportError: the kernel has a parameter MLX's signature cannot
            express (see the module doc).
    """
    name = compiled.name
    lines = compiled.msl.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(f"kernel void {name}("))
        open_body = next(i for i in range(start, len(lines)) if lines[i] == ") {")
    except StopIteration:
        raise ExportError(f"kernel `{name}`: its MSL has no `kernel void {name}(` signature to export") from None
    end = max(i for i, line in enumerate(lines) if line == "}")
    header_lines = [line for line in lines[:start] if not line.startswith("[[max_total_threads_per_threadgroup")]
    writable = {p.name: p for p in compiled.params}

    inputs: List[str] = []
    outputs: List[str] = []
    input_dtypes: List[str] = []
    atomic: List[bool] = []
    for line in lines[start + 1:open_body]:
        m = _PARAM.match(line)
        if m is None:
            raise ExportError(f"kernel `{name}`: cannot read the parameter line {line.strip()!r} of its MSL")
        decl, pname, attr = m.group("decl"), m.group("name"), m.group("attr")
        if not attr.startswith("buffer("):
            if attr.startswith("texture("):
                raise ExportError(f"kernel `{name}`, parameter `{pname}`: MLX's custom kernels take no textures")
            continue  # a thread attribute: MLX declares it because the body names it
        if "coherent" in decl:
            raise ExportError(f"kernel `{name}`, buffer `{pname}`: its writes must reach other threadgroups "
                              f"(coherent(device), device fences), which MLX's signature cannot declare")
        words = decl.replace("*", " ").replace("&", " ").split()
        scalar = words[-1]
        is_atomic = scalar.startswith("atomic_")
        base = scalar[len("atomic_"):] if is_atomic else scalar
        if base not in _MSL_SCALARS:
            raise ExportError(f"kernel `{name}`, buffer `{pname}` ({scalar}): MLX types a buffer by its array's "
                              f"scalar dtype, so a {scalar} buffer cannot be expressed; declare it as scalars")
        p = writable.get(pname)
        if p is not None and p.is_buffer and p.writable:
            outputs.append(pname)
            atomic.append(is_atomic)
        else:
            if is_atomic:
                raise ExportError(f"kernel `{name}`, buffer `{pname}`: MLX's inputs are const, so an atomic input cannot be expressed")
            inputs.append(pname)
            input_dtypes.append(_MSL_SCALARS[base])
    if any(atomic) and not all(atomic):
        raise ExportError(f"kernel `{name}`: MLX makes all outputs atomic or none; atomic: "
                          f"{', '.join(o for o, a in zip(outputs, atomic) if a)}, plain: "
                          f"{', '.join(o for o, a in zip(outputs, atomic) if not a)}")
    if not outputs:
        raise ExportError(f"kernel `{name}` writes no buffer; MLX's custom kernels need at least one output")

    # Specialisation constants: integers and bools become template
    # arguments, read in the body through enigma's `NAME_v`; others keep
    # the compiled value.
    spec = compiled.spec
    template: List[Tuple[str, Any]] = []
    template_types: Dict[str, str] = {}
    prologue: List[str] = []
    header: List[str] = []
    for line in header_lines:
        if _FUNCTION_CONSTANT.match(line):
            continue
        m = _CONSTANT_VALUE.match(line)
        if m is None:
            header.append(line)
            continue
        ty, cname, default = m.group("type"), m.group("name"), m.group("default")
        if ty in ("int", "uint", "short", "ushort", "char", "uchar", "bool"):
            value = spec.get(cname, _literal(default, ty))
            template.append((cname, bool(value) if ty == "bool" else int(value)))
            template_types[cname] = "bool" if ty == "bool" else "int"
            prologue.append(f"    const {ty} {cname}_v = {ty}({cname});")
        else:
            value = spec.get(cname)
            header.append(f"constant {ty} {cname}_v = {_float_literal(value) if value is not None else default};")
    body = "\n".join(prologue + lines[open_body + 1:end])
    return MLXKernel(name, inputs, outputs, body, "\n".join(header) + "\n", bool(atomic) and all(atomic), template,
                     input_dtypes, template_types)


def _literal(text: str, ty: str) -> Any:
    """The value of an MSL literal enigma writes for a constant's default."""
    if ty == "bool":
        return text == "true"
    return int(text.rstrip("uUlL"), 0)


def _float_literal(value: float) -> str:
    """``value`` as an MSL float literal (exact: Python's shortest repr)."""
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        return {"inf": "INFINITY", "-inf": "-INFINITY", "nan": "NAN"}[text]
    return text + "f"

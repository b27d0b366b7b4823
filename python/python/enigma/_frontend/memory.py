"""Memory and indexing: threadgroup and per-thread arrays, loads and stores, atomics,
``load_if``, asynchronous copies (``async_copy``, ``async_wait``), and
subscripts — one flat index, or one per dimension of a shaped buffer or
threadgroup array, each checked against its dimension (``dim_check``) and
combined row-major.
"""

from __future__ import annotations

import ast
import numbers

from .. import _enigma
from .._lang import Builtin
from .._types import DType, bool_, i32, u32, u64
from .conversions import _default_type
from .cooperative import CoopRef
from .irjson import _extract, _lit
from .values import LocalSym, MemRef, PyObj, ShapeOf, SpecSym, untyped, Val, ValueParamSym


def _index_type(value: int) -> DType:
    """The type of a constant index or size: u32, or u64 past its range."""
    return u32 if value < (1 << 32) else u64


def _index_expr(v: Val) -> dict:
    """An index or size as IR: a constant as a literal of its index type."""
    return _lit(v.lit, _index_type(v.lit)) if v.untyped else v.expr


def _slice_node(s):
    # Python 3.8 wraps subscripts in ast.Index.
    if hasattr(ast, "Index") and isinstance(s, getattr(ast, "Index")):
        return s.value
    return s


class Memory:
    """Lowers memory accesses and subscripts."""

    def _tg_dimension(self, node, d, call, array="threadgroup array"):
        """A threadgroup (or per-thread) array's length (``d`` None) or the
        size of its dimension ``d``: a positive int known at compile time."""
        v = self.value(node)
        if not v.untyped or not isinstance(v.lit, int) or isinstance(v.lit, bool) or v.lit <= 0:
            what = f"the length of a {array}" if d is None else f"dimension {d} of a {array}'s shape"
            raise self.error(call, f"{what} must be a positive integer known at compile time")
        return v.lit

    def _thread_array(self, name, call):
        """``acc = enigma.thread_array(T, length)`` or ``(T, (R, C))``: an
        array each thread has its own copy of (MSL's ``thread T acc[N]``)."""
        if name in self.symbols:
            raise self.error(call, f"`{name}` is already defined; a per-thread array needs a name of its own")
        args = self._bind(call, "thread_array", ["type", "shape"], 2)
        elem = self._type_arg(args["type"])
        dims_node = args["shape"]
        shape = None
        if isinstance(dims_node, (ast.Tuple, ast.List)):
            shape = tuple(self._tg_dimension(e, d, call, "per-thread array") for d, e in enumerate(dims_node.elts))
            if not shape:
                raise self.error(call, "the shape of a per-thread array needs at least one dimension")
            length = 1
            for e in shape:
                length *= e
        else:
            length = self._tg_dimension(dims_node, None, call, "per-thread array")
        if length > 0xFFFF_FFFF:
            raise self.error(call, f"per-thread array `{name}` of {length} elements is far past the 16 KiB a thread may declare")
        index = len(self.thread_arrays)
        self.thread_arrays.append({"name": self._ir_name(name), "elem": elem.ir(), "len": length})
        self.symbols[name] = MemRef({"thread": index}, elem, name, None, shape, call)

    def _store(self, mem, index, val, node):
        conv = self._materialize(val, mem.elem, node, strict=False)
        if conv is None:
            raise self.error(node, f"`{mem.name}` holds {mem.elem} but the value stored is {val.ty}; convert it with enigma.{mem.elem.msl_name if mem.elem.is_vector else mem.elem.name}(...)")
        if mem.param is not None:
            if self.explicit_access.get(mem.param) == "read":
                raise self.error(node, f"buffer `{mem.name}` is declared read-only (enigma.buffer(..., access=\"read\")); it cannot be written")
            self.written.add(mem.param)
        self.emit({"store": {"mem": mem.mem, "index": index, "value": conv.expr}}, node)

    def _atomic(self, name, call, want_result):
        op = name[len("atomic_"):]
        if op == "compare_exchange":
            args = self._bind(call, name, ["buffer", "index", "expected", "desired"], 4)
        else:
            args = self._bind(call, name, ["buffer", "index", "value"], 3)
        mem = self.expr(args["buffer"])
        if not isinstance(mem, MemRef):
            raise self.error(call, f"the first argument of enigma.{name} must be a buffer or threadgroup array")
        index = self._index(args["index"], mem, call)
        result = self._temp(mem.elem, call, "atomic") if want_result else None
        if mem.param is not None:
            self.written.add(mem.param)
        if op == "compare_exchange":
            exp = self._convert(self.value(args["expected"]), mem.elem, call).expr
            des = self._convert(self.value(args["desired"]), mem.elem, call).expr
            self.emit({"atomic_compare_exchange": {"mem": mem.mem, "index": index, "expected": exp, "desired": des, "result": result}}, call)
        else:
            value = self._convert(self.value(args["value"]), mem.elem, call).expr
            self.emit({"atomic": {"op": op, "mem": mem.mem, "index": index, "value": value, "result": result}}, call)
        return Val({"var": result}, mem.elem) if want_result else None

    def _load_if(self, call):
        args = self._bind(call, "load_if", ["buffer", "index", "cond", "default"], 4)
        mem = self.expr(args["buffer"])
        if not isinstance(mem, MemRef):
            raise self.error(call, "the first argument of enigma.load_if must be a buffer or threadgroup array")
        index = self._index(args["index"], mem, call)
        cond = self._cond(args["cond"])
        default = self._convert(self.value(args["default"]), mem.elem, call)
        var = self._temp(mem.elem, call, "load_if")
        self.emit({"assign": {"var": var, "value": default.expr}}, call)
        load = {"load": {"mem": mem.mem, "index": index}}
        self.emit({"if": {"cond": cond, "then_body": [{"kind": {"assign": {"var": var, "value": load}}, "loc": {"file": self.file, "line": call.lineno}}], "else_body": []}}, call)
        return Val({"var": var}, mem.elem)

    def _async_copy(self, call):
        """``enigma.async_copy(dst[i], src[j], count=1, valid=True)``: starts
        copying ``count`` elements of device buffer ``src`` from ``j`` into
        threadgroup array ``dst`` from ``i`` (zeros where ``valid`` is false);
        the IR's rule checks the memories, the size and ``valid``."""
        name = "async_copy"
        args = self._bind(call, name, ["dst", "src", "count", "valid"], 2)
        ends = []
        for what in ("dst", "src"):
            node = args[what]
            mem = self.expr(node.value) if isinstance(node, ast.Subscript) else None
            if not isinstance(mem, MemRef):
                raise self.error(call, f"`{what}` of enigma.async_copy is an element of a buffer or threadgroup array (`tile[i]`, `src[j]`), where the copy starts")
            ends.append((mem, self._index(node.slice, mem, call)))
        (dst, dst_index), (src, src_index) = ends
        count = self._u32_constant(args["count"], "count", name, call) if "count" in args else 1
        valid = self._decay(self.value(args["valid"])) if "valid" in args else untyped(True)
        valid_ty = (bool_ if isinstance(valid.lit, bool) else _default_type(valid.lit)) if valid.untyped else valid.ty
        self._check(
            call, _enigma.async_copy_bytes, dst.name, "threadgroup" in dst.mem, dst.elem, src.name, src.param is not None, src.elem, count, valid_ty
        )
        valid_expr = _lit(valid.lit, bool_) if valid.untyped else valid.expr
        self.emit(
            {"async_copy": {"dst": dst.mem, "dst_index": dst_index, "src": src.mem, "src_index": src_index, "count": count, "valid": valid_expr}},
            call,
        )

    def _tile_copy(self, call):
        """``enigma.tile_copy(barrier, dst[i], src, (rows, cols), pitch,
        (row, col), (box_rows, box_cols))``: the threadgroup copies the box of
        the ``rows × cols`` matrix of buffer ``src`` (a row every ``pitch``
        elements) at ``(row, col)`` into threadgroup array ``dst`` from ``i``;
        the IR's rules check the rest (types, box, dispatch constants,
        uniformity)."""
        name = "tile_copy"
        args = self._bind(call, name, ["barrier", "dst", "src", "extents", "pitch", "origin", "box"], 7)
        node = args["dst"]
        dst = self.expr(node.value) if isinstance(node, ast.Subscript) else None
        if not isinstance(dst, MemRef) or "threadgroup" not in dst.mem:
            raise self.error(call, "`dst` of enigma.tile_copy is an element of a threadgroup array (`tile[i]`), where the box lands")
        dst_index = self._index(node.slice, dst, call)
        src = self.expr(args["src"])
        if not isinstance(src, MemRef) or src.param is None:
            raise self.error(call, "`src` of enigma.tile_copy is a device buffer (the matrix the box is cut from)")
        pairs = {}
        for what in ("extents", "origin", "box"):
            pair = args[what]
            if not isinstance(pair, ast.Tuple) or len(pair.elts) != 2:
                raise self.error(call, f"`{what}` of enigma.tile_copy is a pair `(rows, columns)`")
            pairs[what] = pair.elts
        box = [self._u32_constant(n, "box", name, call) for n in pairs["box"]]
        u32_of = lambda n: self._convert(self.value(n), u32, call).expr  # noqa: E731
        copy = {
            "barrier": u32_of(args["barrier"]),
            "dst": dst.mem,
            "dst_index": dst_index,
            "src": src.mem,
            "extents": [u32_of(n) for n in pairs["extents"]],
            "pitch": u32_of(args["pitch"]),
            "origin": [self._convert(self.value(n), i32, call).expr for n in pairs["origin"]],
            "rows": box[0],
            "cols": box[1],
        }
        self.emit({"tile_copy": copy}, call)

    def _tile_wait(self, call):
        """``enigma.tile_wait(barrier)``: waits for the tile copies issued on
        ``barrier`` since its previous wait."""
        args = self._bind(call, "tile_wait", ["barrier"], 1)
        self.emit({"tile_wait": {"barrier": self._convert(self.value(args["barrier"]), u32, call).expr}}, call)

    def _async_wait(self, call):
        """``enigma.async_wait(pending)``: waits until at most ``pending``
        (a constant) of this thread's committed groups of copies are in flight."""
        args = self._bind(call, "async_wait", ["pending"], 1)
        pending = self._u32_constant(args["pending"], "pending", "async_wait", call)
        self._check(call, _enigma.async_wait_check, pending)
        self.emit({"async_wait": {"pending": pending}}, call)

    def _u32_constant(self, node, what, name, call):
        """Argument ``what`` of ``enigma.name``: an int known at compile time, 0 to 2**32 - 1."""
        v = self.value(node)
        if not v.untyped or not isinstance(v.lit, int) or isinstance(v.lit, bool) or not 0 <= v.lit < (1 << 32):
            found = f"a {v.ty} value" if not v.untyped else repr(v.lit)
            raise self.error(call, f"`{what}` of enigma.{name} is a non-negative integer known at compile time, not {found}")
        return v.lit

    def _shape_of(self, mem, node):
        """``mem``'s shape (declared, or taken from the array passed)."""
        if mem.shape is None:
            how = (
                "declare one (`enigma.thread_array(T, (R, C))`)" if "thread" in mem.mem
                else "allocate it with one (`enigma.threadgroup_alloc(T, (R, C))`)"
            )
            raise self.error(node, f"`{mem.name}` has no shape; to read its sizes, {how}")
        return mem.shape

    def _shape_entry(self, shape_of, node):
        """``A.shape[d]``: the size of dimension ``d`` (a constant, negative
        from the end) — a constant, or the by-value parameter that carries
        it."""
        mem = shape_of.mem
        shape = self._shape_of(mem, node)
        d = self.value(_slice_node(node.slice))
        rank = len(shape)
        if not d.untyped or not isinstance(d.lit, int) or isinstance(d.lit, bool) or not -rank <= d.lit < rank:
            found = f"a {d.ty} value" if not d.untyped else repr(d.lit)
            raise self.error(node, f"`{mem.name}.shape` is indexed by a constant dimension, 0 to {rank - 1} (or -{rank} to -1), not {found}")
        size = self._shape_size(mem, d.lit % rank, node)
        if size is None:
            raise self.error(node, f"the first dimension of `{mem.name}` is open (None in its shape); pass its size as a by-value parameter")
        return size

    def _unpack_shape(self, names, shape_of, node):
        """``m, n = A.shape``: one name per dimension."""
        mem = shape_of.mem
        shape = self._shape_of(mem, node)
        if len(names) != len(shape):
            raise self.error(node, f"`{mem.name}` has {len(shape)} dimension(s) (shape {self._shape_text(shape)}); unpack its shape into {len(shape)} name(s), not {len(names)}")
        for d, target in enumerate(names):
            size = self._shape_size(mem, d, node)
            if size is None:
                raise self.error(node, f"the first dimension of `{mem.name}` is open (None in its shape); pass its size as a by-value parameter")
            self._assign_name(target.id, size, node)

    def _subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base, PyObj) and isinstance(base.obj, ShapeOf):
            return self._shape_entry(base.obj, node)
        if isinstance(base, PyObj) and isinstance(base.obj, CoopRef):
            return self._coop_subscript(base.obj, node)
        if isinstance(base, MemRef):
            index = self._index(node.slice, base, node)
            return Val({"load": {"mem": base.mem, "index": index}}, base.elem)
        if isinstance(base, Val) and not base.untyped and base.ty.is_vector:
            i = self.value(_slice_node(node.slice))
            if not i.untyped or not isinstance(i.lit, int) or not 0 <= i.lit < base.ty.width:
                raise self.error(node, f"a vector component index must be a constant 0..{base.ty.width - 1}")
            return Val(_extract(base.expr, i.lit), self._rule(node, _enigma.extract_result_type, base.ty, i.lit))
        if isinstance(base, PyObj) and isinstance(base.obj, Builtin) and base.obj.vector:
            i = self.value(_slice_node(node.slice))
            if i.untyped and isinstance(i.lit, int) and 0 <= i.lit < 3:
                return self._builtin(base.obj, i.lit, node)
        raise self.error(node, "only buffers, threadgroup arrays, per-thread arrays and vectors can be indexed")

    def _index(self, slice_node, mem, node):
        """The flat index (IR) of ``mem[slice]``: one index, or one per
        dimension of ``mem``'s shape — each checked against its dimension
        (``dim_check``), combined row-major (``(i·m + j)·p + k``)."""
        s = _slice_node(slice_node)
        subs = s.elts if isinstance(s, ast.Tuple) else [s]
        if any(isinstance(e, (ast.Slice, ast.Starred)) for e in subs):
            raise self.error(node, f"`{mem.name}` is indexed one element at a time (no slices)")
        shape = mem.shape
        if len(subs) > 1 and shape is None:
            # (A buffer parameter never gets here: without a declared shape it takes the array's.)
            kind = (
                f"declare it with one: `enigma.thread_array({mem.elem!r}, (R, C))`" if "thread" in mem.mem
                else f"allocate it with one: `enigma.threadgroup_alloc({mem.elem!r}, (R, C))`"
            )
            raise self.error(node, f"`{mem.name}` has no shape, so it takes one integer index, not {len(subs)}; to index it per dimension, {kind}")
        if shape is not None and len(subs) != len(shape) and not (len(subs) == 1 and len(shape) > 1):
            raise self.error(
                node,
                f"`{mem.name}` has {len(shape)} dimension(s) (shape {self._shape_text(shape)}) but {len(subs)} indices were given; "
                f"index it with {len(shape)} ({mem.name}[{', '.join('ijklmn'[:len(shape)])}]) or with one flat index",
            )
        if shape is None or len(subs) != len(shape):
            flat = self._index_value(subs[0], mem, None, node)  # the flat form
        else:
            flat = None
            for d, sub in enumerate(subs):
                checked = self._checked_subscript(sub, mem, d, node)
                if flat is None or (flat.untyped and flat.lit == 0):
                    flat = checked
                else:
                    flat = self._binop("add", self._binop("mul", flat, self._shape_size(mem, d, node), node), checked, node)
        return _index_expr(flat)

    def _index_value(self, sub, mem, d, node):
        """One index (``d``: its dimension, None for a flat index) as a Val:
        a non-negative constant or an integer scalar."""
        what = f"the index into `{mem.name}`" if d is None else f"index {d} of `{mem.name}`"
        v = self._decay(self.value(sub))
        if v.untyped:
            if not isinstance(v.lit, int) or isinstance(v.lit, bool) or v.lit < 0:
                raise self.error(node, f"{what} must be a non-negative integer, not {v.lit!r}")
            return v
        if v.ty.is_vector or not v.ty.is_int:
            raise self.error(node, f"{what} must be an integer scalar, not {v.ty}")
        return v

    def _checked_subscript(self, sub, mem, d, node):
        """Subscript ``d`` of ``mem[...]``, wrapped in a check against the
        size of dimension ``d`` (at compile time when both are constants)."""
        v = self._index_value(sub, mem, d, node)
        size = self._shape_size(mem, d, node)
        if size is None:
            return v  # an open first dimension: the flat bounds check covers it
        if v.untyped and size.untyped:
            if v.lit >= size.lit:
                raise self.error(node, f"index {v.lit} of dimension {d} of `{mem.name}` is out of bounds (size {size.lit})")
            return v
        index_ty = v.ty if not v.untyped else _index_type(v.lit)
        size_ty = size.ty if not size.untyped else _index_type(size.lit)
        ty = self._rule(node, _enigma.dim_check_result_type, mem.name, index_ty, size_ty)
        check = {"dim_check": {"mem": mem.mem, "dim": d, "index": _index_expr(v), "size": _index_expr(size)}}
        return Val(check, ty)

    @staticmethod
    def _shape_text(shape):
        return "(" + ", ".join("None" if e is None else str(e) for e in shape) + ("," if len(shape) == 1 else "") + ")"

    def _shape_size(self, mem, d, node):
        """The size of dimension ``d`` of ``mem`` as a Val (None for an
        open first dimension): a constant, or a by-value parameter or
        specialisation constant that the shape names."""
        entry = mem.shape[d]
        if entry is None or isinstance(entry, int):
            return None if entry is None else untyped(entry)
        node = mem.decl or node  # what is wrong is in the declaration
        where = f"`{entry}` in the shape of `{mem.name}`"
        sym = self.symbols.get(entry)
        if isinstance(sym, (ValueParamSym, SpecSym)):
            if sym.ty.is_vector or not sym.ty.is_int:
                raise self.error(node, f"{where} is {sym.ty}; the size of a dimension is an integer")
            return Val({"param": sym.index} if isinstance(sym, ValueParamSym) else {"spec": sym.index}, sym.ty)
        if sym is not None:
            kind = "a local variable" if isinstance(sym, LocalSym) else "a buffer or threadgroup array"
            raise self.error(
                node,
                f"{where} is {kind}; the size of a dimension is a by-value parameter (enigma.constant(enigma.u32)), "
                "a specialisation constant or a constant int",
            )
        if entry in self.closure:
            obj = self.closure[entry]
        elif entry in self.fn.__globals__:
            obj = self.fn.__globals__[entry]
        else:
            raise self.error(
                node,
                f"{where} is not defined: name a by-value parameter (enigma.constant(enigma.u32)), a specialisation "
                "constant (enigma.spec) assigned before the first access, or a module constant",
            )
        if not isinstance(obj, numbers.Integral) or isinstance(obj, bool) or int(obj) <= 0:
            raise self.error(node, f"{where} is {obj!r}; the size of a dimension is a positive integer")
        return untyped(int(obj))

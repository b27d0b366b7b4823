"""Statements and control flow: blocks, assignments, ``if``/``with
enigma.if_`` chains, ``for``/``while`` loops, barriers, and the temporaries
that hoisted expressions assign; tracks which names are definitely assigned.
"""

from __future__ import annotations

import ast
import builtins as _py_builtins
import math

from .. import _lang
from .._lang import Intrinsic
from .._types import bool_
from .conversions import _default_type, _usual
from .diagnostics import CompileError, MAX_NESTING, _TOO_DEEP, _UNSUPPORTED_STMTS
from .expressions import _BINOPS
from .irjson import _lit
from .textures import TexMethod, TexRef
from .cooperative import COOPERATIVE_OBJECTS, CoopMethod, CoopRef
from .values import LocalSym, MemRef, PyObj, ShapeOf, SpecSym, untyped, Val, ValueParamSym


class _IfRecord:
    """An ``if_`` that an ``else_``/``elif_`` may still extend."""

    __slots__ = ("stmt", "then_defined", "before_defined", "parent")

    def __init__(self, stmt, then_defined, before_defined, parent):
        self.stmt, self.then_defined, self.before_defined, self.parent = stmt, then_defined, before_defined, parent


def _join(a, b):
    """Names definitely assigned where two paths meet (None: unreachable path)."""
    if a is None:
        return None if b is None else set(b)
    if b is None:
        return set(a)
    return a & b


class Statements:
    """Lowers statements and control flow."""

    def emit(self, kind, node=None):
        line = getattr(node, "lineno", None) or self.line
        stmt = {"kind": kind, "loc": {"file": self.file, "line": line}}
        self.block.append(stmt)
        return stmt

    def _block(self, body):
        self.depth += 1
        try:
            if self.depth > MAX_NESTING and body:
                raise self.error(body[0], _TOO_DEEP)
            self._block_stmts(body)
        finally:
            self.depth -= 1

    def _block_stmts(self, body):
        for node in body:
            self.line = node.lineno
            is_else = isinstance(node, ast.With) and self._with_kind(node) in ("else_", "elif_")
            if not is_else:
                self.last_if = None
            self._stmt(node)

    def _sub_block(self, body, defined):
        """Compiles ``body`` into a fresh block; returns (block, defined after)."""
        saved = (self.block, self.defined, self.last_if)
        self.block, self.defined, self.last_if = [], (None if defined is None else set(defined)), None
        try:
            self._block(body)
            return self.block, self.defined
        finally:
            self.block, self.defined, self.last_if = saved[0], saved[1], saved[2]

    def _stmt(self, node):
        if isinstance(node, ast.Assign):
            if len(node.targets) > 1 and any(not isinstance(t, ast.Name) for t in node.targets):
                raise self.error(node, "chained assignment is only supported to plain names")
            for target in node.targets:
                self._assign(target, node.value, node)
        elif isinstance(node, ast.AnnAssign):
            if node.value is None:
                raise self.error(node, "a declaration without a value is not supported; assign a value")
            if not isinstance(node.target, ast.Name):
                raise self.error(node, "annotated assignment is only supported to a plain name")
            ty = self._type_arg(node.annotation)
            val = self._convert(self.value(node.value), ty, node.value, explicit=True)
            self._assign_name(node.target.id, val, node)
        elif isinstance(node, ast.AugAssign):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.error(node, f"the operator {type(node.op).__name__} is not supported")
            if isinstance(node.target, ast.Name):
                cur = self.value(ast.Name(id=node.target.id, ctx=ast.Load(), lineno=node.lineno, col_offset=0))
                val = self._binop(op, cur, self.value(node.value), node)
                self._assign_name(node.target.id, val, node)
            elif isinstance(node.target, ast.Subscript):
                mem = self.expr(node.target.value)
                if not isinstance(mem, MemRef):
                    raise self.error(node, "augmented assignment to a component or an unknown target is not supported")
                index = self._index(node.target.slice, mem, node)
                cur = Val({"load": {"mem": mem.mem, "index": index}}, mem.elem)
                val = self._binop(op, cur, self.value(node.value), node)
                self._store(mem, index, val, node)
            else:
                raise self.error(node, "augmented assignment to this target is not supported")
        elif isinstance(node, ast.With):
            self._with(node)
        elif isinstance(node, ast.If):
            self._if(node)
        elif isinstance(node, ast.For):
            self._for(node)
        elif isinstance(node, ast.While):
            self._while(node)
        elif isinstance(node, ast.Break):
            self.emit("break", node)
            self.defined = None
        elif isinstance(node, ast.Continue):
            self.emit("continue", node)
            self.defined = None
        elif isinstance(node, ast.Return):
            if node.value is not None:
                raise self.error(node, "a kernel returns nothing; `return` takes no value (write results to a buffer)")
            self.emit("return", node)
            self.defined = None
        elif isinstance(node, ast.Pass):
            pass
        elif isinstance(node, ast.Expr):
            self._expr_stmt(node)
        elif type(node) in _UNSUPPORTED_STMTS:
            raise self.error(node, f"{_UNSUPPORTED_STMTS[type(node)]} is not supported in a kernel")
        else:
            raise self.error(node, f"the statement `{type(node).__name__}` is not supported in a kernel")

    def _expr_stmt(self, node):
        v = node.value
        if isinstance(v, ast.Constant) and (isinstance(v.value, str) or v.value is Ellipsis):
            return  # docstring or `...`
        if isinstance(v, ast.Call):
            callee = self.expr(v.func)
            if isinstance(callee, PyObj) and isinstance(callee.obj, TexMethod) and callee.obj.method == "write":
                return self._texture_write(callee.obj.tex, v)
            if isinstance(callee, PyObj) and isinstance(callee.obj, TexMethod) and callee.obj.method == "fence":
                self._bind(v, f"{callee.obj.tex.name}.fence", [], 0, prefix="")
                return self.emit({"texture_fence": {"tex": callee.obj.tex.index}}, v)
            if isinstance(callee, PyObj) and isinstance(callee.obj, CoopMethod):
                return self._coop_method_stmt(callee.obj, v)
            if isinstance(callee, PyObj) and isinstance(callee.obj, Intrinsic):
                name = callee.obj.name
                if name in ("barrier", "threadgroup_barrier", "simdgroup_barrier"):
                    return self._barrier(name, v)
                if name.startswith("atomic_"):
                    self._atomic(name, v, want_result=False)
                    return
                msl_form = ("simdgroup_load", "simdgroup_store", "simdgroup_multiply", "simdgroup_multiply_accumulate")
                if name in msl_form and self._msl_matrix_stmt(name, v):
                    return
                if name == "simdgroup_store":
                    return self._matrix_store(v)
                if name == "async_copy":
                    return self._async_copy(v)
                if name in ("async_commit", "device_fence"):
                    self._bind(v, name, [], 0)
                    return self.emit(name, v)
                if name == "async_wait":
                    return self._async_wait(v)
                if name == "tile_copy":
                    return self._tile_copy(v)
                if name == "tile_wait":
                    return self._tile_wait(v)
                if name == "print":
                    return self._print(v)
                if name in ("if_", "elif_", "else_", "for_range"):
                    raise self.error(v, f"enigma.{name}(...) is used as `with enigma.{name}(...):`")
            if isinstance(callee, PyObj) and callee.obj is _py_builtins.print:
                raise self.error(
                    v,
                    "Python's print does not run in a kernel; print from the kernel with a format and its values: "
                    "`enigma.print(\"x = {} at {}\", x, i)` (each `{}` takes the next value)",
                )
        raise self.error(
            node,
            "this expression statement has no effect (only barriers, atomics, simdgroup_store, device_fence, enigma.print "
            "and the async_* statements can stand alone)",
        )

    def _print(self, call):
        """``enigma.print(format, *values)``: a constant format string with
        ``{}`` for each value; the IR's validation checks the format against
        the values (a count, scalars)."""
        if call.keywords:
            raise self.error(call, "enigma.print(...) takes positional arguments only: the format, then the values")
        if not call.args or not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
            raise self.error(call, "enigma.print's first argument is its format, a string literal: `enigma.print(\"x = {}\", x)`")
        args = []
        for a in call.args[1:]:
            v = self._decay(self.value(a))
            if v.untyped:
                v = self._materialize(v, _default_type(v.lit), a)
            args.append(v.expr)
        self.emit({"print": {"format": call.args[0].value, "args": args}}, call)

    def _assign(self, target, value_node, node):
        if isinstance(target, ast.Name):
            special = self._special_rhs(target.id, value_node)
            if special:
                return
            self.coop_name_hint = target.id
            try:
                r = self.expr(value_node)
            finally:
                self.coop_name_hint = None
            if isinstance(r, PyObj) and isinstance(r.obj, COOPERATIVE_OBJECTS):
                if target.id in self.symbols and not isinstance(self.symbols[target.id], PyObj):
                    raise self.error(node, f"`{target.id}` is already a kernel value; give the {type(r.obj).__name__} a name of its own")
                self.symbols[target.id] = r
                return
            val = self._value_of(r, value_node)
            self._assign_name(target.id, val, node)
        elif isinstance(target, ast.Subscript) and isinstance(self.expr(target.value), PyObj) and isinstance(self.expr(target.value).obj, CoopRef):
            self._coop_set(self.expr(target.value).obj, target.slice, value_node, node)
        elif isinstance(target, ast.Subscript):
            mem = self.expr(target.value)
            if isinstance(mem, Val):
                raise self.error(node, "assigning one component of a vector is not supported; build a new vector (e.g. enigma.float4(a, b, c, d))")
            if not isinstance(mem, MemRef):
                raise self.error(node, "only device buffers and threadgroup arrays can be indexed and stored to")
            index = self._index(target.slice, mem, node)
            val = self.value(value_node)
            self._store(mem, index, val, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            shape = self.expr(value_node) if isinstance(value_node, ast.Attribute) and value_node.attr == "shape" else None
            if not (isinstance(shape, PyObj) and isinstance(shape.obj, ShapeOf)) or not all(isinstance(e, ast.Name) for e in target.elts):
                raise self.error(node, "tuple unpacking is not supported (but `m, n = A.shape`); assign each name separately")
            self._unpack_shape(target.elts, shape.obj, node)
        elif isinstance(target, ast.Attribute):
            raise self.error(node, f"assigning to an attribute (`.{target.attr}`) is not supported")
        else:
            raise self.error(node, f"assignment to {type(target).__name__} is not supported")

    def _special_rhs(self, name, value_node):
        """``x = enigma.threadgroup_alloc(...)``, ``x = enigma.thread_array(...)``
        and ``x = enigma.spec(...)``."""
        if not isinstance(value_node, ast.Call):
            return False
        try:
            callee = self.expr(value_node.func)
        except CompileError:
            return False
        if self.is_matrix_declaration(callee):
            self._matrix_declaration(name, value_node)
            return True
        if not (isinstance(callee, PyObj) and isinstance(callee.obj, Intrinsic)):
            return False
        kind = callee.obj.name
        if kind == "thread_array":
            self._thread_array(name, value_node)
            return True
        if kind == "threadgroup_alloc":
            if name in self.symbols:
                raise self.error(value_node, f"`{name}` is already defined; a threadgroup array needs a name of its own")
            args = self._bind(value_node, "threadgroup_alloc", ["type", "length", "shape"], 1)
            if ("length" in args) == ("shape" in args):
                raise self.error(value_node, "enigma.threadgroup_alloc takes the length (an int) or the shape (a tuple of ints, e.g. (16, 16)), one of the two")
            elem = self._type_arg(args["type"])
            dims_node = args.get("length", args.get("shape"))
            shape = None
            if isinstance(dims_node, (ast.Tuple, ast.List)):
                shape = tuple(self._tg_dimension(e, d, value_node) for d, e in enumerate(dims_node.elts))
                if not shape:
                    raise self.error(value_node, "the shape of a threadgroup array needs at least one dimension")
                length = math.prod(shape)
            else:
                length = self._tg_dimension(dims_node, None, value_node)
            if length > 0xFFFF_FFFF:
                raise self.error(
                    value_node,
                    f"threadgroup array `{name}` of {length} elements: a threadgroup array holds at most 2**32 - 1 elements "
                    "(and the device's threadgroup memory, 32 KiB on Apple GPUs, far fewer)",
                )
            index = len(self.tg_arrays)
            self.tg_arrays.append({"name": self._ir_name(name), "elem": elem.ir(), "len": length})
            self.symbols[name] = MemRef({"threadgroup": index}, elem, name, None, shape, value_node)
            return True
        if kind == "spec":
            if name in self.symbols and not isinstance(self.symbols[name], SpecSym):
                raise self.error(value_node, f"`{name}` is already defined")
            val = self._spec(value_node)
            self.symbols[name] = SpecSym(val.expr["spec"], val.ty)
            return True
        return False

    def _assign_name(self, name, val, node):
        if name in self.loop_vars:
            raise self.error(node, f"`{name}` is the variable of an enclosing loop; it cannot be assigned in the loop")
        sym = self.symbols.get(name)
        if sym is None:
            if val.untyped:
                ty = _default_type(val.lit)
                val = self._materialize(val, ty, node)
            ty = val.ty
            var = len(self.locals)
            ir_name = self._ir_name(name)
            self.locals.append({"name": ir_name, "ty": ty.ir()})
            sym = LocalSym(var, ty, val.decay, node.lineno, ir_name)
            self.symbols[name] = sym
        elif isinstance(sym, LocalSym):
            conv = self._materialize(val, sym.ty, node, strict=False)
            if conv is None:
                literal_fix = ""
                if not sym.ty.is_vector and sym.ty.is_int and not val.untyped and val.ty.is_float:
                    literal_fix = (
                        f"; if line {sym.line} starts `{name}` from an integer literal (`{name} = 0`), write a float literal "
                        f"(`{name} = 0.0`) and it is a float from the start"
                    )
                raise self.error(
                    node,
                    f"`{name}` is {sym.ty} (first assigned at line {sym.line}) but this value is {val.ty}; "
                    f"a variable keeps one type — convert with enigma.{sym.ty.msl_name if sym.ty.is_vector else sym.ty.name}(...) "
                    f"or use another name{literal_fix}",
                )
            val = conv
        elif isinstance(sym, MemRef):
            raise self.error(node, f"`{name}` is a {'buffer parameter' if sym.param is not None else sym.kind}; store to an element (`{name}[i] = ...`)")
        elif isinstance(sym, ValueParamSym):
            raise self.error(node, f"`{name}` is a by-value parameter; it cannot be assigned")
        elif isinstance(sym, TexRef):
            raise self.error(node, f"`{name}` is a texture; write a texel with `{name}.write(value, coord)`")
        else:
            raise self.error(node, f"`{name}` is a specialisation constant; it cannot be assigned")
        self.emit({"assign": {"var": sym.var, "value": val.expr}}, node)
        if self.defined is not None:
            self.defined.add(name)

    def _with_kind(self, node):
        if len(node.items) != 1:
            return None
        ctx = node.items[0].context_expr
        func = ctx.func if isinstance(ctx, ast.Call) else ctx
        try:
            callee = self.expr(func)
        except CompileError:
            return None
        if isinstance(callee, PyObj) and isinstance(callee.obj, Intrinsic) and callee.obj.name in ("if_", "elif_", "else_", "for_range"):
            return callee.obj.name
        return None

    def _with(self, node):
        kind = self._with_kind(node)
        if kind is None:
            raise self.error(node, "only `with enigma.if_(cond):`, `with enigma.elif_(cond):`, `with enigma.else_():` and `with enigma.for_range(start, end[, step]) as i:` are supported")
        item = node.items[0]
        call = item.context_expr
        if not isinstance(call, ast.Call):
            raise self.error(node, f"write `with enigma.{kind}(...)`")
        if kind != "for_range" and item.optional_vars is not None:
            raise self.error(node, f"`with enigma.{kind}(...)` takes no `as` target")
        if kind == "if_":
            args = self._bind(call, "if_", ["cond"], 1)
            cond = self._cond(args["cond"])
            before = self.defined
            then_body, then_def = self._sub_block(node.body, before)
            stmt = self.emit({"if": {"cond": cond, "then_body": then_body, "else_body": []}}, node)
            self.defined = _join(then_def, before)
            self.last_if = _IfRecord(stmt, then_def, before, None)
        elif kind in ("else_", "elif_"):
            rec = self.last_if
            if rec is None:
                raise self.error(node, f"`with enigma.{kind}(...)` must come right after a `with enigma.if_(...)` or `with enigma.elif_(...)` block")
            target = rec.stmt["kind"]["if"]
            if kind == "else_":
                self._bind(call, "else_", [], 0)
                else_body, else_def = self._sub_block(node.body, rec.before_defined)
                target["else_body"] = else_body
                self.last_if = None
                result = else_def
            else:
                args = self._bind(call, "elif_", ["cond"], 1)
                saved = (self.block, self.defined)
                self.block, self.defined = [], (None if rec.before_defined is None else set(rec.before_defined))
                cond = self._cond(args["cond"])  # hoisted parts go into the else branch
                inner_before = self.defined
                then_body, then_def = self._sub_block(node.body, inner_before)
                stmt = self.emit({"if": {"cond": cond, "then_body": then_body, "else_body": []}}, node)
                else_block = self.block
                self.block, self.defined = saved
                target["else_body"] = else_block
                new_rec = _IfRecord(stmt, then_def, inner_before, rec)
                self.last_if = new_rec
                result = _join(then_def, inner_before)
            # Recompute what is definitely assigned after the whole chain.
            r = rec
            while r is not None:
                result = _join(r.then_defined, result)
                r = r.parent
            self.defined = result
        else:
            if item.optional_vars is None or not isinstance(item.optional_vars, ast.Name):
                raise self.error(node, "write `with enigma.for_range(start, end[, step]) as i:`")
            args = self._range_args(call, "for_range")
            self._for_loop(item.optional_vars.id, args, node.body, node)

    def _if(self, node):
        cond = self._cond(node.test)
        before = self.defined
        then_body, then_def = self._sub_block(node.body, before)
        if node.orelse:
            else_body, else_def = self._sub_block(node.orelse, before)
        else:
            else_body, else_def = [], before
        self.emit({"if": {"cond": cond, "then_body": then_body, "else_body": else_body}}, node)
        self.defined = _join(then_def, else_def)

    def _for(self, node):
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "the loop variable must be a plain name")
        it = node.iter
        callee = self.expr(it.func) if isinstance(it, ast.Call) else None
        ranges = ("for_range", "static_range")
        if not (isinstance(callee, PyObj) and (callee.obj is _py_builtins.range or (isinstance(callee.obj, Intrinsic) and callee.obj.name in ranges))):
            raise self.error(
                node,
                "only `for i in range(start, end[, step])` (or enigma.for_range, or enigma.static_range to unroll at compile time) "
                "loops are supported; iterating over a Python object is not",
            )
        unroll = isinstance(callee.obj, Intrinsic) and callee.obj.name == "static_range"
        args = self._range_args(it, "enigma.static_range" if unroll else "range")
        self._for_loop(node.target.id, args, node.body, node, unroll)

    def _range_args(self, call, what):
        if call.keywords:
            raise self.error(call, f"{what}() takes positional arguments only")
        n = len(call.args)
        if n == 1:
            start, end, step = untyped(0), self.value(call.args[0]), untyped(1)
        elif n in (2, 3):
            start, end = self.value(call.args[0]), self.value(call.args[1])
            step = self.value(call.args[2]) if n == 3 else untyped(1)
        else:
            raise self.error(call, f"{what}() takes 1 to 3 arguments")
        if step.untyped and (not isinstance(step.lit, int) or step.lit <= 0):
            raise self.error(call, f"the step of {what}() must be a positive integer (loops count up: `i < end`)")
        return start, end, step

    def _for_loop(self, name, args, body, node, unroll=False):
        start, end, step = (self._decay(v) for v in args)
        sym = self.symbols.get(name)
        if sym is not None and not isinstance(sym, LocalSym):
            raise self.error(node, f"`{name}` is already a parameter, array or constant; the loop variable needs its own name")
        if isinstance(sym, LocalSym):
            ty = sym.ty
        else:
            typed = [v.ty for v in (start, end, step) if not v.untyped]
            ty = typed[0] if typed else None
            for t in typed[1:]:
                ty = _usual(ty, t)
            if ty is None:
                ty = _default_type(max(abs(start.lit), abs(end.lit)) if all(isinstance(v.lit, int) for v in (start, end)) else 0)
        if ty.is_vector or not ty.is_int:
            raise self.error(node, f"the loop variable `{name}` must be an integer; its bounds are {ty}")
        start_e, end_e, step_e = (self._convert(v, ty, node).expr for v in (start, end, step))
        if sym is None:
            var = len(self.locals)
            ir_name = self._ir_name(name)
            self.locals.append({"name": ir_name, "ty": ty.ir()})
            sym = LocalSym(var, ty, False, node.lineno, ir_name)
            self.symbols[name] = sym
        before = self.defined
        inner = None if before is None else set(before) | {name}
        self.loop_vars.append(name)
        self.loop_depth += 1
        try:
            body_block, _ = self._sub_block(body, inner)
        finally:
            self.loop_vars.pop()
            self.loop_depth -= 1
        loop = {"var": sym.var, "start": start_e, "end": end_e, "step": step_e, "body": body_block}
        if unroll:
            loop["unroll"] = True  # the IR's validation explains bounds that are not constants
        self.emit({"for": loop}, node)
        self.defined = None if before is None else set(before) - {name}

    def _while(self, node):
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported")
        saved = self.no_hoist
        self.no_hoist = "a `while` condition (it is evaluated before every iteration)"
        try:
            cond = self._cond(node.test)
        finally:
            self.no_hoist = saved
        before = self.defined
        self.loop_depth += 1
        try:
            body_block, _ = self._sub_block(node.body, before)
        finally:
            self.loop_depth -= 1
        self.emit({"while": {"cond": cond, "body": body_block}}, node)
        self.defined = None if before is None else set(before)

    def _cond(self, node):
        v = self._decay(self.value(node))
        if v.untyped:
            if isinstance(v.lit, bool):
                return _lit(v.lit, bool_)
            raise self.error(node, f"a condition must be a bool; got the constant {v.lit!r}")
        if v.ty != bool_:
            raise self.error(node, f"a condition must be a bool, not {v.ty}; compare explicitly (e.g. enigma.cmp_ne(x, 0))")
        return v.expr

    def _barrier(self, name, call):
        args = self._bind(call, name, ["mem_flags"], 0)
        flags = "mem_threadgroup" if name != "simdgroup_barrier" else "mem_none"
        if "mem_flags" in args:
            f = self.expr(args["mem_flags"])
            if isinstance(f, PyObj) and isinstance(f.obj, str):
                flags = f.obj
            else:
                raise self.error(call, "mem_flags must be a string: \"mem_none\", \"mem_threadgroup\", \"mem_device\", \"mem_device|mem_threadgroup\" or \"mem_texture\"")
        key = flags.replace(" ", "").replace("mem_flags::", "")
        if key not in _lang.MEM_FLAGS:
            raise self.error(call, f"unknown mem_flags {flags!r}; expected \"mem_none\", \"mem_threadgroup\", \"mem_device\", \"mem_device|mem_threadgroup\" or \"mem_texture\"")
        scope = "simdgroup" if name == "simdgroup_barrier" else "threadgroup"
        self.emit({"barrier": {"scope": scope, "flags": _lang.MEM_FLAGS[key]}}, call)

    def _temp(self, ty, node, base):
        if self.no_hoist:
            raise self.error(node, f"{base} cannot be used in {self.no_hoist}; compute it into a variable first")
        self.temp_counter += 1
        var = len(self.locals)
        self.locals.append({"name": self._ir_name(f"{base}_{self.temp_counter}"), "ty": ty.ir()})
        return var

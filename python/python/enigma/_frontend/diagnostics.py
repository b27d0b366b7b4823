"""Errors and limits of the front end: ``CompileError`` (raised with the
file, the Python line, the kernel's name and the source line), the nesting
limit shared with the IR, and the messages for Python constructs a kernel
cannot use.
"""

from __future__ import annotations

import ast

from .. import _enigma


CompileError = _enigma.CompileError


# The deepest nesting of expressions and blocks together a kernel may have:
# the IR's (its text form reads 128 levels; enigma_ir::text::MAX_NESTING).
MAX_NESTING = 128


_TOO_DEEP = (
    f"expressions and blocks are nested more than {MAX_NESTING} levels deep here (the IR's limit); "
    "split the expression with intermediate variables or flatten the branches"
)


_UNSUPPORTED_STMTS = {
    ast.FunctionDef: "a nested function definition", ast.AsyncFunctionDef: "an async function",
    ast.ClassDef: "a class definition", ast.Delete: "`del`", ast.Import: "`import`",
    ast.ImportFrom: "`import`", ast.Global: "`global`", ast.Nonlocal: "`nonlocal`",
    ast.Raise: "`raise`", ast.Try: "`try`", ast.Assert: "`assert`", ast.AsyncFor: "`async for`",
    ast.AsyncWith: "`async with`",
}


_UNSUPPORTED_EXPRS = {
    ast.Lambda: "a lambda", ast.GeneratorExp: "a generator expression", ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension", ast.Await: "`await`",
    ast.Yield: "`yield`", ast.YieldFrom: "`yield from`", ast.List: "a list", ast.Tuple: "a tuple",
    ast.Dict: "a dict", ast.Set: "a set", ast.JoinedStr: "an f-string", ast.Starred: "a starred expression",
    ast.NamedExpr: "an assignment expression (`:=`)", ast.Slice: "a slice",
}


def _short(value: int) -> str:
    """An int for a message: its digits, or its size when it has many."""
    if value.bit_length() <= 128:
        return str(value)
    return f"a {value.bit_length()}-bit integer"


class Diagnostics:
    """Builds the :class:`CompileError` for an AST node."""

    def error(self, node, message):
        line = getattr(node, "lineno", None) or self.line
        text = ""
        idx = line - self.first_line
        if 0 <= idx < len(self.source_lines):
            text = "\n    " + self.source_lines[idx].strip()
        err = CompileError(f"{self.file}:{line}: {message} (in kernel `{self.kernel_name_py}`){text}")
        err.file = self.file
        err.line = line
        return err

"""The README's claim that the package runs on CPython 3.9 and later: every
module of the installed package parses with Python 3.9's grammar, and the
wheel is built for the stable ABI from 3.9 on."""

import ast
import pathlib

import enigma

PACKAGE = pathlib.Path(enigma.__file__).parent


def test_every_module_parses_as_python_3_9():
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 5, modules
    for module in modules:
        ast.parse(module.read_text(encoding="utf-8"), filename=str(module), feature_version=(3, 9))


def test_the_extension_is_built_for_the_stable_abi():
    # abi3 extensions are named `_enigma.abi3.so` (Windows: `.pyd`), not per minor version.
    extensions = [p.name for p in PACKAGE.iterdir() if p.suffix in (".so", ".pyd")]
    assert extensions and all(".abi3." in name or name.endswith(".pyd") for name in extensions), extensions

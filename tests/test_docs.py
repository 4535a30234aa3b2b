"""The public API is documented: every name in ``__all__`` of a public module has a
docstring (with tensor shapes where tensors go in or out) and a place in the API reference."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import sys
import types
from pathlib import Path

import pytest

import gsparse

ROOT = Path(__file__).resolve().parents[1]
API_PAGES = ROOT / "docs" / "api"
# The modules the API reference documents, each name of their __all__ on a page of docs/api.
PUBLIC_MODULES = ("gsparse", "gsparse.nn", "gsparse.datasets", "gsparse.tune", "gsparse.tune.select",
                  "gsparse.tune.sptrsv", "gsparse.distributed")
# A bracketed shape such as ``[N, F]``, ``[E]`` or ``[num_src, *shape]``.
SHAPE = re.compile(r"\[[^\]\s][^\]]*\]")


def _public_names() -> list[tuple[str, str]]:
    return [(module, name) for module in PUBLIC_MODULES for name in importlib.import_module(module).__all__]


def _own_docstring(obj: object) -> str:
    """The docstring written for ``obj``: a class's own (not a base class's, nor the signature
    ``dataclass`` writes where there is none), a function's or a property's."""
    if isinstance(obj, type):
        doc = obj.__dict__.get("__doc__") or ""
        return "" if doc.startswith(f"{obj.__name__}(") else doc
    return inspect.getdoc(obj) or ""


def _defined_constant_doc(name: str, value: object) -> str:
    """The docstring of a module-level constant (the string that follows its assignment) in
    the gsparse module that defines it."""
    for path in sorted((ROOT / "src" / "gsparse").rglob("*.py")):
        parts = path.relative_to(ROOT / "src").with_suffix("").parts
        modname = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = sys.modules.get(modname)
        if module is None or module.__dict__.get(name, _MISSING) is not value:
            continue
        body = ast.parse(path.read_text()).body
        for statement, following in zip(body, body[1:]):
            targets = statement.targets if isinstance(statement, ast.Assign) else \
                [statement.target] if isinstance(statement, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and \
                    isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) and \
                    isinstance(following.value.value, str):
                return following.value.value
    return ""


_MISSING = object()


def _takes_or_returns_tensors(obj: object) -> bool:
    try:
        annotations = inspect.get_annotations(obj)
    except TypeError:
        return False
    return any("Tensor" in str(a) for a in annotations.values())


@pytest.mark.parametrize("module, name", _public_names(), ids=lambda v: v)
def test_every_public_name_has_a_docstring(module, name):
    obj = getattr(importlib.import_module(module), name)
    if isinstance(obj, types.ModuleType):
        assert module + "." + name in PUBLIC_MODULES, f"{module}.{name} is a module the reference omits"
        return
    if inspect.isroutine(obj) or inspect.isclass(obj):
        doc = _own_docstring(obj)
        assert doc.strip(), f"{module}.{name} has no docstring"
        if _takes_or_returns_tensors(obj):
            assert SHAPE.search(doc), f"{module}.{name} takes or returns tensors but its docstring gives no shape"
    else:  # its defining module is imported: the public module took the name from it
        assert _defined_constant_doc(name, obj).strip(), \
            f"{module}.{name} has no docstring (a string literal after its assignment)"


def _public_classes() -> list[tuple[str, type]]:
    seen, classes = set(), []
    for module, name in _public_names():
        obj = getattr(importlib.import_module(module), name)
        if isinstance(obj, type) and obj not in seen:
            seen.add(obj)
            classes.append((f"{module}.{name}", obj))
    return classes


_MEMBER_DESCRIPTORS = (property, functools.cached_property, classmethod, staticmethod)


@pytest.mark.parametrize("qualname, cls", _public_classes(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_method_and_property_has_a_docstring(qualname, cls):
    missing, shapeless = [], []
    for attr, value in vars(cls).items():
        if attr.startswith("_") or not (inspect.isfunction(value) or isinstance(value, _MEMBER_DESCRIPTORS)):
            continue
        member = value.fget if isinstance(value, property) else \
            getattr(value, "func", getattr(value, "__func__", value))  # cached_property, class/staticmethod
        doc = _own_docstring(getattr(cls, attr))
        if not doc.strip():
            missing.append(attr)
        elif _takes_or_returns_tensors(member) and not SHAPE.search(doc):
            shapeless.append(attr)
    assert not missing, f"{qualname}: no docstring on {missing}"
    assert not shapeless, f"{qualname}: tensors but no shape in the docstrings of {shapeless}"


def test_the_layers_document_forward_with_shapes():
    for layer in (gsparse.nn.GCNConv, gsparse.nn.GATConv, gsparse.nn.SAGEConv):
        doc = layer.forward.__doc__ or ""
        assert SHAPE.search(doc) and "Returns" in doc, f"{layer.__name__}.forward"


def _documented_targets() -> set[str]:
    directive = re.compile(r"^\.\. auto(?:class|function|data|exception|attribute)::\s+(\S+)", re.M)
    return {target for page in API_PAGES.glob("*.rst") for target in directive.findall(page.read_text())}


def test_every_public_name_is_on_a_page_of_the_api_reference():
    targets = _documented_targets()
    missing = [f"{module}.{name}" for module, name in _public_names()
               if not isinstance(getattr(importlib.import_module(module), name), types.ModuleType)
               and f"{module}.{name}" not in targets]
    assert not missing, f"not in docs/api/*.rst: {missing}"

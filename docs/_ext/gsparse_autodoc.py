"""Two of gsparse's conventions, taught to autodoc.

* A public module re-exports constants defined in its submodules (``gsparse.datasets``
  takes ``PRESETS`` from ``gsparse.datasets.presets``). A constant's docstring is the
  string that follows its assignment, which autodoc reads only in the module being
  documented (else it shows the docstring of the value's type, ``dict``'s or ``tuple``'s);
  here it is read in the module that defines the constant.
* A class whose constructor takes ``_internal`` is built by its class methods only
  (``DistGraph.from_global``): its constructor's signature, which names private types, is
  not shown.
"""

from __future__ import annotations

import importlib
import inspect
import sys

from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer

_MISSING = object()


def _constant_doc(name: str, value: object) -> list[str]:
    """The docstring of the gsparse module-level constant ``name`` that is ``value``."""
    for modname, module in sorted(sys.modules.items()):
        if not modname.startswith("gsparse") or module is None:
            continue
        if getattr(module, "__dict__", {}).get(name, _MISSING) is not value:
            continue
        try:
            analyzer = ModuleAnalyzer.for_module(modname)
            analyzer.analyze()
        except PycodeError:
            continue
        doc = analyzer.attr_docs.get(("", name))
        if doc:
            return list(doc)
    return []


def _fill_constant_docstring(app, what, name, obj, options, lines):
    if what != "data":
        return
    modname, _, attr = name.rpartition(".")
    try:
        value = getattr(importlib.import_module(modname), attr)
    except (ImportError, AttributeError):
        return
    doc = _constant_doc(attr, value)
    if doc:
        lines[:] = doc


def _hide_internal_constructor(app, what, name, obj, options, signature, return_annotation):
    if what in ("class", "exception") and isinstance(obj, type):
        try:
            parameters = inspect.signature(obj.__init__).parameters
        except (TypeError, ValueError):
            return None
        if "_internal" in parameters:
            return "", None
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _fill_constant_docstring, priority=600)  # after napoleon
    app.connect("autodoc-process-signature", _hide_internal_constructor)
    return {"parallel_read_safe": True}

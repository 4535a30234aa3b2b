"""Sphinx configuration: the API reference (autodoc + napoleon) and the Markdown user docs (MyST).

Build with ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (the ``docs``
extra installs Sphinx and MyST). Warnings are errors, cross-references included
(``nitpicky``): a role that names no documented object fails the build. Names of other
packages (PyTorch, NumPy, ...) have no inventory here (the build is offline) and are not
checked.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src")))
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "_ext")))

project = "gsparse"
author = "gsparse developers"
copyright = "gsparse developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_parser",
    "gsparse_autodoc",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# Recorded reports are linked from the pages, not pages themselves.
exclude_patterns = ["_build", "results"]

nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|numpy|np|scipy|collections|typing|os|pathlib|argparse|concurrent|contextlib"
               r"|enum|dataclasses|abc|time|sqlite3)(\..*)?"),
    # Type variables (``S``, ``T``) are parameters of generic signatures, not documented objects.
    (r"py:.*", r"gsparse(\.\w+)*\.[A-Z]"),
    (r"py:.*", r"(Tensor|Path|Callable|Iterator|Iterable|Sequence|Mapping|Hashable|Any|NoReturn|Literal"
               r"|Protocol|TypeVar|Generic|K|V|T|PathLike|ndarray|dtype|device)"),
    # The solver's internal state, named in the SpTRSV tuner's signatures (docs/sptrsv.md).
    (r"py:class", r"gsparse\.kernels\.sptrsv\.FactorPlans"),
]

autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

html_theme = "alabaster"
html_title = "gsparse"

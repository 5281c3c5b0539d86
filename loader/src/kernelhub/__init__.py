"""kernelhub: load precompiled PyTorch compute kernels from a hub, verified and cached.

Importing this package does not import torch, nor any of its own modules but the name
table's reader: every public name is imported on first use (``kernelhub.get_kernel``
imports the loading code, ``kernelhub.kernelize`` the layers API), so ``import kernelhub``
costs next to nothing in a program that may never load a kernel (the Transformers import
hook imports it at start-up). The public names and where each is defined are listed
once, in ``__init__.pyi`` (see :mod:`kernelhub.lazy_names`).
"""

from .lazy_names import attach_stub

__getattr__, __dir__, __all__, _names = attach_stub(__name__, __file__, submodules=True)

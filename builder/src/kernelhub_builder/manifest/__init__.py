"""The manifests: ``kernels.toml`` and each kernel's ``build.toml``, read once into typed models.

The first arrow of the builder's data path. Everything downstream takes the models of
:mod:`.model`, never raw TOML, so every check happens here and every error names the
file, the dotted key, what was wrong and what to do.

* :mod:`.model` — the typed models; each field declares the TOML key(s) it is read from.
* :mod:`.keys` — which keys each table allows in each edition, derived from those
  declarations (one model, one schema).
* :mod:`.tables` — typed access to TOML tables with errors that name file and key.
* :mod:`.build_toml` — ``build.toml`` (the ecosystem's editions 5 and 6, and the older
  unversioned schema) into a :class:`~.model.KernelManifest`.
* :mod:`.project` — ``kernels.toml`` into a :class:`~.model.Project`.
* :mod:`.migrate` — rewrite a ``build.toml`` in the newest edition, keeping its comments.
"""

from __future__ import annotations

from ..errors import ManifestError
from .build_toml import KERNEL_FILE, load_kernel
from .model import (
    DEFAULT_PYEXT,
    KernelManifest,
    KernelPart,
    Matrix,
    Project,
    TorchExt,
    VariantNames,
)
from .project import (
    PROJECT_FILE,
    STANDALONE,
    SYSTEMS,
    load_kernels,
    load_project,
    standalone_project,
)
from .tables import read_toml, version_key

__all__ = [
    "DEFAULT_PYEXT",
    "KERNEL_FILE",
    "PROJECT_FILE",
    "STANDALONE",
    "SYSTEMS",
    "KernelManifest",
    "KernelPart",
    "ManifestError",
    "Matrix",
    "Project",
    "TorchExt",
    "VariantNames",
    "load_kernel",
    "load_kernels",
    "load_project",
    "read_toml",
    "standalone_project",
    "version_key",
]

"""Engage kernelhub's Transformers integration without a line of user code.

``kernelhub-autoload.pth`` (installed with the distribution) imports this module at
interpreter start. It must cost next to nothing there, so it imports only ``os`` and
``sys`` and does one thing: it puts two import finders on ``sys.meta_path``.

* :class:`TransformersWatcher` (first on the path) notices when Transformers modules are
  imported — ``transformers.integrations.hub_kernels``, ``transformers.modeling_utils``,
  ``transformers.activations`` and each ``transformers.models.*.modeling_*`` — and, once a
  module has executed, hands it to ``kernelhub.integrations.transformers.autoload``,
  which hands the kernel seams that module defines to kernelhub — also when the
  ecosystem's ``kernels`` package is installed (installing kernelhub is asking for it).
  Nothing of kernelhub is imported before Transformers is.
* :class:`KernelsName` (last on the path) provides the import name ``kernels`` — the
  ecosystem's package that Transformers' documentation imports ``Mode`` from — served by
  ``kernelhub.ecosystem``. Being last, it answers only when no installed package of
  that name exists: an installed ``kernels`` always wins the name.

``KERNELHUB_TRANSFORMERS=0`` (or ``off``/``no``/``false``) installs neither: Transformers
and the ecosystem's package then run as if kernelhub were not installed.

The hook runs in every program of the environment, so it must never be what breaks one:
where kernelhub itself cannot be imported (a broken or half-removed install), the first
watched module still imports, one warning says why, and both finders leave the path. The
``.pth`` line imports this module only if it exists, so a ``.pth`` left behind by an
uninstall is silent.
"""

import os
import sys

OFF = ("0", "off", "no", "false")
WATCHED = ("transformers.integrations.hub_kernels", "transformers.modeling_utils",
           "transformers.activations")
MODELS = "transformers.models."


def _watched(fullname: str) -> bool:
    if fullname in WATCHED:
        return True
    if not fullname.startswith(MODELS):
        return False
    _, _, leaf = fullname.rpartition(".")
    return leaf.startswith("modeling_") and fullname.count(".") == 3


class _AfterExec:
    """A loader that runs ``then(module)`` after the real loader executed the module.

    Everything else (``get_source``, ``is_package``, resources …) is the real loader's.
    """

    def __init__(self, loader: object) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)

    def create_module(self, spec: object) -> object:
        return self._loader.create_module(spec)  # type: ignore[attr-defined]

    def exec_module(self, module: object) -> None:
        self._loader.exec_module(module)  # type: ignore[attr-defined]
        try:
            from kernelhub.integrations.transformers import autoload
        except Exception as e:  # any failure of a broken install
            _give_up(e)
            return
        autoload.imported(module)


def _give_up(error: BaseException) -> None:
    """kernelhub cannot be imported: say so once and leave Transformers to itself."""
    import warnings

    sys.meta_path[:] = [f for f in sys.meta_path
                        if not isinstance(f, (TransformersWatcher, KernelsName))]
    warnings.warn(
        f"kernelhub cannot be imported ({type(error).__name__}: {error}), so Transformers "
        "runs without its kernels; reinstall kernelhub, or set KERNELHUB_TRANSFORMERS=0 to "
        "silence this",
        RuntimeWarning, stacklevel=2)


class TransformersWatcher:
    """Meta-path finder that wraps the loaders of the Transformers modules we patch."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        if not fullname.startswith("transformers.") or not _watched(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterExec(spec.loader)
                return spec
        return None


class _Alias:
    """A loader whose module is ``kernelhub.ecosystem`` itself (one module, two names)."""

    def create_module(self, spec: object) -> object:
        import importlib

        try:
            return importlib.import_module("kernelhub.ecosystem")
        except ImportError:
            raise
        except Exception as e:  # a broken install: "no kernels here", as code expects
            raise ImportError(f"kernels (served by kernelhub) cannot be imported: "
                              f"{type(e).__name__}: {e}", name="kernels") from e

    def exec_module(self, module: object) -> None:
        """Already executed under its own name."""


class KernelsName:
    """Meta-path finder, last on the path: ``import kernels`` when none is installed."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        if fullname != "kernels":
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec("kernels", _Alias(), origin="kernelhub.ecosystem")


def install() -> None:
    """Put both finders on ``sys.meta_path`` once (unless switched off)."""
    if os.environ.get("KERNELHUB_TRANSFORMERS", "").strip().lower() in OFF:
        return
    if any(isinstance(f, TransformersWatcher) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, TransformersWatcher())
    sys.meta_path.append(KernelsName())


install()

"""Autotuning: use a kernel only where it is correct and faster than the PyTorch it replaces.

Blind swapping can make a model slower (a kernel tuned for another CPU, a dtype whose
path lacks the matrix units) or, for a broken build, wrong. With autotuning on
(``kernelize(model, autotune=True)``, ``KernelConfig(autotune=True)``,
``KERNELHUB_AUTOTUNE=1``) each swapped call site gets an
:class:`~kernelhub.layer.autotune.call_site.Autotuner`: the first call of every shape
bucket runs the kernel and the PyTorch code it replaces on copies of the real inputs,
compares the outputs, times both interleaved and keeps the kernel only where it is within
tolerance and not slower, much as ``torch.backends.cudnn.benchmark`` or Triton's
autotuner pick the fastest implementation per shape on first use.

The parts, in the order a call meets them:

* :mod:`.buckets` — which calls share a decision;
* :mod:`.compare` — whether the kernel's output matches (per-dtype tolerances);
* :mod:`.timing` — the interleaved measurement and its signs of load;
* :mod:`.decision` — when a decision is trusted, and when it is measured again;
* :mod:`.store` — decisions in this process and on disk (``<cache>/autotune/``);
* :mod:`.call_site` — the dispatch of one swapped call site;
* :mod:`.report` — :func:`autotune_report`, :func:`forget_decisions`;
* :mod:`.renamed` — the former ``verify`` spellings, which still work and warn once.
"""

from __future__ import annotations

from .call_site import Autotuner as Autotuner
from .call_site import Seen as Seen
from .call_site import adopt as adopt
from .call_site import autotuned_forward as autotuned_forward
from .call_site import autotuned_function as autotuned_function
from .compare import TOLERANCES as TOLERANCES
from .decision import Decision as Decision
from .renamed import autotune_flag as autotune_flag
from .renamed import autotune_from_env as autotune_from_env
from .renamed import verification_report as verification_report
from .report import autotune_report as autotune_report
from .report import clear_decisions as clear_decisions
from .report import forget_decisions as forget_decisions
from .report import format_report as format_report
from .store import stored_records as stored_records

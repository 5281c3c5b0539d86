"""Plan: which variants a kernel has, and what this host builds each one with.

The build matrix (:mod:`.matrix`), the host's compilers (:mod:`.toolchains`), one Python
environment per torch minor (:mod:`.torch_env`) and the CUDA architectures to compile
(:mod:`.cuda_archs`); what a command works on — project, kernels, variants —
(:mod:`.select`). Nothing here compiles.
"""

"""Compile: one planned variant into a built variant directory.

:mod:`.build` drives it: the source hash (:mod:`.source_hash`) decides whether to build,
then render (:mod:`.render`, per backend :mod:`.backends`, host independence
:mod:`.portable`), ninja, and assemble (:mod:`.assemble`). :mod:`.nix_build` and
:mod:`.nix_host` are the same steps as the Nix flake runs them.
"""

"""Ship: built variants onto a hub.

:mod:`.publish` is ``builder publish`` (collect, re-check, sign, push one commit);
:mod:`.artifacts` merges CI artifacts into one build directory and :mod:`.ci_matrix`
shards the build matrix into CI jobs.
"""

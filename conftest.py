"""Workspace-wide pytest settings: fixture kernel trees hold their own tests, which
run only through `builder test`, never as part of this suite."""

collect_ignore_glob = ["*/tests/fixtures/*", "kernels-src/*"]

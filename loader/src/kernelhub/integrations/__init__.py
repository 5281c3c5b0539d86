"""Integrations of kernelhub with model libraries (each in its own subpackage).

Nothing here is imported by ``import kernelhub``: an integration imports its library,
and a user who does not use that library must not pay for (or need) it.
"""

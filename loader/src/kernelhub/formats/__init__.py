"""The formats the builder and the loader share, each defined once here: variant names
(``variants``), ``metadata.json`` (``metadata``), the symbols a variant exposes
(``symbols``), loader version floors (``minver``), the zip and build-directory layouts,
provenance, and the signed release manifest. The builder imports them; none of them
reads a hub or the cache."""

BUILD_DIR = "build"
"""Variants live under ``build/<variant>/`` in every kernel repository, on a hub or on disk.
The root of :mod:`.build_layout`, named here because reading a hub (``kernelhub.hub.base``)
needs this one name and not the local layout: a warm load never imports that module."""

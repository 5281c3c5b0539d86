"""The formats the builder and the loader share, each defined once here: variant names
(``variants``), ``metadata.json`` (``metadata``), the symbols a variant exposes
(``symbols``), loader version floors (``minver``), the zip and build-directory layouts,
provenance, and the signed release manifest. The builder imports them; none of them
reads a hub or the cache."""

# The public names of kernelhub.hub, each with the module that defines it: the one table
# of them. Type checkers read this stub; at run time __init__.py serves the same names,
# each imported on first use (kernelhub.lazy_names). One line per name.
from .base import BUILD_DIR as BUILD_DIR
from .base import Hub as Hub
from .hf import HfHub as HfHub
from .local import LocalHub as LocalHub
from .search import SearchPath as SearchPath
from .select import open_hub as open_hub

"""A python executor module that fails while being imported."""

raise ImportError("this module needs a package that is not installed")

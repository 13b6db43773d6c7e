"""Fact provider of the memory family: cache_read_write, layout_transformation,
set_storage_layout and precompute_indices name this package in their rule files.

``regions`` holds the access-region guard, the dependency and pattern facts and the staging
parameters; ``copy_forms`` the forms of a re-laid-out copy (layout_transformation).
"""

from .copy_forms import PARAMETER_SETS as _COPY_FORMS
from .regions import GUARD_EXTENSIONS, PARAMETER_SETS as _REGIONS

PARAMETER_SETS = _REGIONS + _COPY_FORMS

__all__ = ["GUARD_EXTENSIONS", "PARAMETER_SETS"]

"""``mirrorwatch config from-strimzi`` / ``from-mm2``: a mirrorwatch config written from what already runs MM2.

Pure: text in, :class:`~.common.Imported` out, rendered to commented YAML by :mod:`.render`. Every problem with the
input is one :class:`~.common.ImportProblem` line (the command exits 2).
"""

from .common import Imported, ImportProblem
from .mm2_file import from_mm2_properties
from .render import render_yaml
from .strimzi import from_strimzi

__all__ = ["ImportProblem", "Imported", "from_mm2_properties", "from_strimzi", "render_yaml"]

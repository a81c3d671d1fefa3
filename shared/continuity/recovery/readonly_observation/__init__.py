"""The read-only observation recovery (docs/workflows/readonly-observation.md): its read custody
(``custody``), its commit binding (``binding``) and its descriptor and wording (``descriptor``).

Nothing is imported here, so the descriptor type can name this workflow's input types without an
import cycle; the registry imports ``descriptor``.
"""

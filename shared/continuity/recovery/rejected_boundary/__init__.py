"""The rejected-boundary recovery (docs/workflows/rejected-boundary.md): the native history and the
administrator's review (``custody``), the pinned documents its commit reads again (``evidence``),
and its descriptor and wording (``descriptor``).

Nothing is imported here, so the descriptor type can name this workflow's input types without an
import cycle; the registry imports ``descriptor``.
"""

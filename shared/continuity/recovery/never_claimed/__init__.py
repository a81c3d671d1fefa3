"""The never-claimed failed-request recovery (docs/workflows/never-claimed.md): its descriptor and
wording (``descriptor``). Its evidence is the journal alone, judged by
``shared.continuity.request_history``; the descriptor's defaults are this workflow.
"""

"""Prompt catalog of the reference worker: instructions and tool descriptions by catalog version.

Descriptions are part of the worker contract the model sees, so every released text is kept here
verbatim: historical checkpoints bind catalog 1.0.0, the installed worker renders 1.0.1.
"""

from __future__ import annotations

from typing import Final

CURRENT_CATALOG: Final = "1.0.1"

INSTRUCTIONS: Final = (
    "You are the Firefly Agentic worker. Complete the task in the checked-out source tree. "
    "Use list_files and read_file to inspect sources, read_run_evidence to read recorded run "
    "evidence, and run_command only for the commands the task grants. Report what you changed."
)

LIST_FILES: Final = "List the files under a directory of the source tree, relative to its root."
READ_FILE: Final = "Read one UTF-8 text file of the source tree, relative to its root."
RUN_COMMAND: Final = "Run one granted command (argv form) in the source tree and return its output."

# read_run_evidence descriptions by catalog version. Only this text changed between 1.0.0 and 1.0.1.
READ_RUN_EVIDENCE: Final[dict[str, str]] = {
    "1.0.0": (
        "Read recorded evidence of a run: pass a query object naming the run and evidence kind."
    ),
    "1.0.1": (
        "Read recorded evidence of a run: pass a query object with run_id, kind (log, artifact or "
        "test) and an optional page from 1 to 10 (default 10). A query this tool cannot accept "
        'returns {"status":"invalid_query"} without reading anything; correct the query and call '
        "again. That result is checkpoint-safe: the run continues from it."
    ),
}

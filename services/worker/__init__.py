"""The reference worker: claims an admitted continuation and really continues it.

It is a client of the ledger's public RPCs with a worker identity (no database, no privileged
path). It claims a queued execution request of a configured run (recording its owner instance),
reads the derived checkpoint, restores its message history, usage and original limits into the
pinned SDK, and runs the next model turns through the installed adapter's ``execute_agentic``
against a configured OpenAI-compatible provider. Everything that happens is journaled as the
worker's own native records before it happens (model request sent, response consumed, tool call
granted, intent, outcome), every command is charged through ``RecordCommand`` before it runs, and
the first refusal of any write stops the worker. At the end it completes the request with its
goal claim (the ledger adds its certification) or fails it.

Modules: ``config`` (environment and arguments), ``ledger_port`` (the gRPC port), ``owner`` (the
process identity recorded at claim), ``effects`` (the source tree, commands and evidence),
``journaling`` (the journaling model, transport and effects), ``run`` (the run loop) and ``cli``.
"""

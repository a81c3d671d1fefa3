"""`forge-continuity-scripted-provider` (also `python -m services.demo.scripted_provider_command`):
the scripted loopback provider `make demo` uses, as a command, so the reference worker can be
run by hand without a provider key.

It prepares a small source tree and evidence store under ``--workdir`` (the ones `make demo`'s
worker uses), serves the reference script on ``--port`` (0: a free one), and writes the worker
settings that go with them to ``--env-file`` as shell ``export`` lines, written whole only once
the provider answers (a script can wait for the file). It serves until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import threading
from collections.abc import Sequence
from pathlib import Path

from services.demo.continuation import COMMANDS, prepare_workspace
from services.demo.scripted_provider import ScriptedProvider, reference_script

PROGRAM = "forge-continuity-scripted-provider"
DEFAULT_WORKDIR = "var/scripted-worker"


def write_env_file(path: Path, settings: dict[str, str]) -> None:
    """``export NAME=value`` lines, renamed into place so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    lines = [f"export {name}={shlex.quote(value)}" for name, value in settings.items()]
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(partial, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument(
        "--workdir",
        default=DEFAULT_WORKDIR,
        help="where the source tree and evidence are written (default: %(default)s)",
    )
    parser.add_argument(
        "--env-file",
        default="",
        help="where the worker settings are written (default: WORKDIR/worker.env)",
    )
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    env_file = Path(args.env_file) if args.env_file else workdir / "worker.env"
    env_file.unlink(missing_ok=True)  # a stale file must not be read as this provider's
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with ScriptedProvider(reference_script(COMMANDS), port=args.port) as provider:
        write_env_file(env_file, prepare_workspace(workdir, provider.base_url))
        print(f"scripted provider at {provider.base_url}", flush=True)
        print(f"worker settings in {env_file} (source it); Ctrl-C to stop", flush=True)
        stop.wait()
    env_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The physical floor of "one gRPC call + one transaction": a bare gRPC server (no auth, no
protobuf, no domain) whose one handler inserts 3 rows in one transaction on the same database.

Run as ``python -m bench.baseline --port P --database-url URL`` (its own process, like a service).
"""

from __future__ import annotations

import argparse
import itertools
import signal
import threading
from concurrent import futures
from typing import Final

import grpc
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert

METHOD: Final = "/bench.Baseline/Insert"
WORKERS: Final = 16

_metadata = MetaData()
floor_rows = Table(
    "bench_floor",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("call", String(64), nullable=False),
    Column("part", Integer, nullable=False),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    engine = create_engine(args.database_url, pool_size=WORKERS, max_overflow=0)
    _metadata.create_all(engine)
    calls = itertools.count()

    def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
        call = f"call-{next(calls)}"
        with engine.begin() as connection:
            connection.execute(
                insert(floor_rows), [{"call": call, "part": part} for part in range(3)]
            )
        return b"ok"

    handler = grpc.method_handlers_generic_handler(
        "bench.Baseline", {"Insert": grpc.unary_unary_rpc_method_handler(handle)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=WORKERS))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    server.stop(1).wait()
    engine.dispose()


if __name__ == "__main__":
    main()

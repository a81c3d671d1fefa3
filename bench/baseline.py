"""The physical floor of "one gRPC call + one transaction": a bare gRPC server (no auth, no
protobuf, no domain) whose one handler inserts 3 rows in one transaction on the same database.

Run as ``python -m bench.baseline --port P --database-url URL`` (its own process, like a service).

With ``--downstream TARGET --hops N`` it is instead the front of the **hop floor**: its handler
makes N - 2 calls to the downstream's no-op method and then one to its insert, so one call from a
caller crosses N bare gRPC hops and runs the same one transaction. An admission crossed six
hops (caller → admission; admission → ledger read-back, → candidate, → ledger commit; candidate →
ledger snapshot, → reconstruction), so the six-hop floor is what four bare processes in that call
graph would cost at best on this machine; the round-4 targets are stated against it. Since
ADR 0024 a first admission makes no read-back: five hops, whose floor the bench measures too.
"""

from __future__ import annotations

import argparse
import itertools
import signal
from collections.abc import Callable
from concurrent import futures
from typing import Final

import grpc
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert

from shared.runtime.stop_signal import wait_for_stop_signal

METHOD: Final = "/bench.Baseline/Insert"
NOOP: Final = "/bench.Baseline/Noop"
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
    parser.add_argument("--database-url", default="")
    parser.add_argument("--downstream", default="", help="front of the hop floor: relay here")
    parser.add_argument("--hops", type=int, default=6, help="hops one relayed call crosses")
    parser.add_argument(
        "--statements", type=int, default=1, help="statements of the one transaction (>= 1)"
    )
    args = parser.parse_args()
    relaying = bool(args.downstream)
    handle = (
        _relay(args.downstream, args.hops)
        if relaying
        else insert_handler(args.database_url, args.statements)
    )

    def noop(request: bytes, context: grpc.ServicerContext) -> bytes:
        return b"ok"

    handler = grpc.method_handlers_generic_handler(
        "bench.Baseline",
        {
            "Insert": grpc.unary_unary_rpc_method_handler(handle),
            "Noop": grpc.unary_unary_rpc_method_handler(noop),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=WORKERS))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    wait_for_stop_signal((signal.SIGTERM,))
    server.stop(1).wait()


def insert_handler(
    database_url: str, statements: int
) -> Callable[[bytes, grpc.ServicerContext], bytes]:
    engine = create_engine(database_url, pool_size=WORKERS, max_overflow=0)
    _metadata.create_all(engine)
    calls = itertools.count()

    def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
        call = f"call-{next(calls)}"
        with engine.begin() as connection:
            if statements == 1:
                connection.execute(
                    insert(floor_rows), [{"call": call, "part": part} for part in range(3)]
                )
            else:
                # The statement floor: as many single-row inserts (the cheapest statement there
                # is) as a write of the services runs statements.
                for part in range(statements):
                    connection.execute(insert(floor_rows).values(call=call, part=part))
        return b"ok"

    return handle


def _relay(downstream: str, hops: int) -> Callable[[bytes, grpc.ServicerContext], bytes]:
    channel = grpc.insecure_channel(downstream)
    noop = channel.unary_unary(NOOP, None, None)
    insert_call = channel.unary_unary(METHOD, None, None)

    def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
        for _ in range(hops - 2):
            noop(b"x")
        insert_call(b"x")
        return b"ok"

    return handle


if __name__ == "__main__":
    main()

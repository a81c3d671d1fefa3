"""The strangers of scenario 10, as a process of their own (``python -m
tests.reliability.strangers TARGET SILENT BODIES BODY_BYTES``): ``SILENT`` calls that open
``GetRun`` with no token and never send a body, and ``BODIES`` unauthenticated ``PutBlob`` calls
of ``BODY_BYTES`` each, all at once. Prints ``ready`` once the silent calls are open, then, when
standard input closes, one JSON line of the status codes each kind of call ended with. Run apart
so the attackers' own work (serializing 30 MiB, their threads) does not share the server's GIL,
as a real attacker's would not."""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter

import grpc

from forge.continuity.v1 import ledger_pb2
from tests.ledger.test_hostile_callers import silent_calls


def _body(size: int) -> bytes:
    """A serialized PutBlobRequest of ``size`` content bytes: field 1, its varint length."""
    length, varint = size, bytearray()
    while length > 0x7F:
        varint.append((length & 0x7F) | 0x80)
        length >>= 7
    varint.append(length)
    return b"\x0a" + bytes(varint) + b"x" * size


def main(target: str, silent: int, bodies: int, body_bytes: int) -> None:
    body_codes: Counter[str] = Counter()
    stranger_codes: Counter[str] = Counter()
    channel = grpc.insecure_channel(target)
    put_blob = channel.unary_unary(
        "/forge.continuity.v1.LedgerService/PutBlob",
        request_serializer=lambda body: body,
        response_deserializer=ledger_pb2.PutBlobResponse.FromString,
    )
    body = _body(body_bytes)

    def send() -> None:
        for _ in range(bodies):
            try:
                put_blob(body, timeout=30)
                body_codes["OK"] += 1
            except grpc.RpcError as error:
                body_codes[error.code().name] += 1  # type: ignore[attr-defined]

    with silent_calls(target, silent, token=None) as strangers:
        print("ready", flush=True)
        sender = threading.Thread(target=send)
        sender.start()
        sys.stdin.read()  # the scenario closes it when its legitimate round is over
        sender.join(120)
        for stranger in strangers:
            try:
                stranger.result(timeout=10)
                stranger_codes["OK"] += 1
            except grpc.RpcError as error:
                stranger_codes[error.code().name] += 1  # type: ignore[attr-defined]
    channel.close()
    print(json.dumps({"silent": dict(stranger_codes), "bodies": dict(body_codes)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))

#!/usr/bin/python3
"""grpc.health.v1 Check from the command line, like grpc_health_probe (which Debian lacks).

    tools/grpc_health.py HOST:PORT [SERVICE] [--wait=SECONDS]

Prints the status (SERVING, NOT_SERVING, ...) and exits 0 only for SERVING. With --wait it
asks every 0.2 s until SERVING or the time is up. Needs Debian's python3-grpcio; the two
messages are one field each, encoded here by hand, so no generated code is needed.
"""
import sys
import time

import grpc

STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def check(channel, service):
    # HealthCheckRequest { string service = 1; }  HealthCheckResponse { ServingStatus status = 1; }
    name = service.encode()
    if len(name) > 127:  # one byte of length (a varint below 128) is all this encodes
        sys.exit("service name too long")
    request = b"\x0a" + bytes([len(name)]) + name if name else b""
    call = channel.unary_unary("/grpc.health.v1.Health/Check")
    try:
        response = call(request, timeout=2)
    except grpc.RpcError as e:
        return e.code().name
    status = response[1] if len(response) >= 2 and response[0] == 0x08 else 0
    return STATUS.get(status, str(status))


def main(argv):
    wait = 0.0
    args = []
    for a in argv[1:]:
        if a.startswith("--wait="):
            wait = float(a[len("--wait="):])
        else:
            args.append(a)
    if not 1 <= len(args) <= 2:
        sys.exit(__doc__)
    target, service = args[0], args[1] if len(args) == 2 else ""
    deadline = time.monotonic() + wait
    with grpc.insecure_channel(target) as channel:
        while True:
            status = check(channel, service)
            if status == "SERVING" or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
    print(f"{target} service '{service}': {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

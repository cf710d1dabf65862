#!/usr/bin/env python3
"""The scripted day's callers: Poisson requests at the day's rate through the gateway.

usage: load.py PROXY_PORT UPSTREAM_PORTS... (prints each phase change on stderr)

A day of 24 "hours" in 30 minutes (an hour is 75 s): a quiet night at 2 requests a second,
a morning ramp, a busy noon at 40 with three 10 s bursts at twice that, an afternoon and
evening back down. One 3-minute outage (every upstream answers 500) at 09:36 of the day,
one 2-minute brownout (answers 200 after 150 ms, against about a millisecond) at 17:36.
"""
import asyncio, math, random, sys, time

HOUR = 75.0
DAY = 24 * HOUR
OUTAGE = (9.6 * HOUR, 9.6 * HOUR + 180.0)
BROWNOUT = (17.6 * HOUR, 17.6 * HOUR + 120.0)
BURSTS = [11.0 * HOUR, 12.5 * HOUR, 14.0 * HOUR]


def rate(t):
    h = t / HOUR
    if h < 6:
        r = 2.0
    elif h < 12:
        r = 2.0 + (h - 6) / 6 * 38.0
    elif h < 14:
        r = 40.0
    elif h < 20:
        r = 40.0 - (h - 14) / 6 * 30.0
    else:
        r = 10.0 - (h - 20) / 4 * 8.0
    if any(b <= t < b + 10 for b in BURSTS):
        r *= 2
    return r


async def chaos(port, mode):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST /chaos/{mode} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode())
    await writer.drain()
    await reader.read()
    writer.close()


class Pool:
    def __init__(self, port):
        self.port = port
        self.idle = []

    async def get(self, path):
        conn = self.idle.pop() if self.idle else await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = conn
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nhost: day\r\n\r\n".encode())
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length:
                await reader.readexactly(length)
            self.idle.append(conn)
        except Exception:
            writer.close()


async def main():
    proxy = int(sys.argv[1])
    upstreams = [int(p) for p in sys.argv[2:]]
    random.seed(2026)
    pool = Pool(proxy)
    start = time.monotonic()
    tasks = set()
    phase = {"outage": False, "brownout": False}
    t = 0.0
    while t < DAY:
        t += random.expovariate(max(rate(t), 0.1))
        now = time.monotonic() - start
        if t > now:
            await asyncio.sleep(t - now)
        out = OUTAGE[0] <= t < OUTAGE[1]
        if out != phase["outage"]:
            phase["outage"] = out
            for p in upstreams:
                await chaos(p, "fail" if out else "recover")
            print(f"{t:7.1f} s: outage {'starts' if out else 'ends'}", file=sys.stderr, flush=True)
        brown = BROWNOUT[0] <= t < BROWNOUT[1]
        if brown != phase["brownout"]:
            phase["brownout"] = brown
            print(f"{t:7.1f} s: brownout {'starts' if brown else 'ends'}", file=sys.stderr, flush=True)
        path = f"/accounts/{random.randint(1, 1000)}"
        if brown:
            path += "?delay=150ms"
        task = asyncio.ensure_future(pool.get(path))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)


asyncio.run(main())

"""The I/O the async-jobs figure waits on: an HTTP server on 127.0.0.1 that answers each request after a delay.

``python -m bench.slow_server PORT DELAY_SECONDS`` serves until killed and prints ``ready`` once it listens.
Each request (a ``GET``, one per connection) is answered ``200 ok`` after ``DELAY_SECONDS``, however many
are waiting at once (one asyncio loop: a wait costs nothing), so a job's call takes the delay and the client's
work, whatever the other jobs do. ``bench.async_jobs`` runs it pinned to the server's core.
"""

from __future__ import annotations

import asyncio
import sys

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


async def serve(port: int, delay: float) -> None:
    """Answer every request on ``port`` after ``delay`` seconds."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(delay)
            writer.write(RESPONSE)
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", port, backlog=256)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), float(sys.argv[2])))

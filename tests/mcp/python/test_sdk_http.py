"""runbox serve's /mcp driven by the official Python SDK (`mcp` 2.x from PyPI), as a hosted
agent would: the URL and the token. The SDK probes the 2026-07-28 revision first
(server/discover), which runbox serves: every request after is stateless (no initialize, no
session, its revision in its own _meta and headers). A client pinned to the handshake
(mode="legacy") still gets 2025-11-25."""
import os

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def client_for(serve, headers=None, mode="auto"):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {serve.token}"} if headers is None else headers)
    return http, Client(streamable_http_client(serve.url, http_client=http), mode=mode)


def processes(marker):
    """Pids of `sleep MARKER` processes."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == b"sleep\0" + marker.encode() + b"\0":
                    found.append(pid)
        except OSError:
            pass
    return found


def run(coroutine_fn, *args):
    return anyio.run(coroutine_fn, *args)


def test_connects_with_the_token_and_negotiates_2026_07_28(serve):
    async def go():
        http, client = client_for(serve)
        async with http, client:
            assert client.protocol_version == "2026-07-28"
            assert client.session.initialize_result is None  # no fallback to initialize
            assert client.server_info.name == "runbox"
            assert client.server_capabilities.tools is not None
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            assert names == ["close_session", "execute_bash", "execute_javascript", "execute_python",
                             "execute_typescript", "list_sessions"]
    run(go)
    # Stateless: no MCP session was opened for it.
    assert '"event":"mcp_session_opened"' not in serve.text()


def test_a_client_pinned_to_the_handshake_gets_2025_11_25(serve):
    async def go():
        http, client = client_for(serve, mode="legacy")
        async with http, client:
            assert client.protocol_version == "2025-11-25"
            assert client.session.initialize_result.server_info.name == "runbox"
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            assert names == ["close_session", "execute_bash", "execute_javascript", "execute_python",
                             "execute_typescript", "list_sessions"]
    run(go)


def test_calls_a_tool_with_progress(serve):
    async def go():
        http, client = client_for(serve)
        seen = []

        async def progress(value, total, message):
            seen.append((value, message))

        async with http, client:
            result = await client.call_tool(
                "execute_python",
                {"code": "import time\nprint('one', flush=True)\ntime.sleep(0.5)\nprint('two')"},
                progress_callback=progress)
        assert result.is_error is False
        assert result.structured_content["output"] == "one\ntwo\n"
        assert "".join(message for _, message in seen) == "one\ntwo\n"
        assert [value for value, _ in seen] == sorted(value for value, _ in seen)
    run(go)


def test_cancels_a_running_call(serve):
    marker = f"{50 + int.from_bytes(os.urandom(2), 'big') % 1000 / 100}"

    async def go():
        http, client = client_for(serve)
        async with http, client:
            with anyio.move_on_after(20):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(client.call_tool, "execute_bash", {"command": f"sleep {marker}"})
                    with anyio.fail_after(15):
                        while not processes(marker):
                            await anyio.sleep(0.05)
                    tasks.cancel_scope.cancel()
            with anyio.fail_after(10):
                while processes(marker):
                    await anyio.sleep(0.05)
            # The session goes on: the next call is served.
            result = await client.call_tool("execute_bash", {"command": "echo still here"})
            assert result.structured_content["output"] == "still here\n"
    run(go)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_refused_without_the_token(serve, headers):
    async def go():
        http, client = client_for(serve, headers)
        async with http:
            with pytest.raises(Exception) as raised:
                async with client:
                    pass
        return raised.value
    error = run(go)
    assert "this server needs its token" in repr(error), repr(error)


def test_refused_from_a_foreign_origin(serve):
    async def go():
        http, client = client_for(serve, {"Authorization": f"Bearer {serve.token}", "Origin": "http://evil.example"})
        async with http:
            with pytest.raises(Exception) as raised:
                async with client:
                    pass
        return raised.value
    error = run(go)
    assert "requests from another site's page are refused" in repr(error), repr(error)


PNG_CODE = """import struct, zlib
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
rows = b''.join(b'\\x00' + b'\\x00\\x80\\xff' * 3 for _ in range(2))
open('plot.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 3, 2, 8, 2, 0, 0, 0))
    + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))
open('table.csv', 'w').write('name,score\\nada,3\\n')
"""


def test_reads_back_the_files_code_made_and_hears_when_one_changes(serve):
    # The "done when": the URL and the token, code runs, its plot and table are read
    # back (the PNG decodes), and a subscription (2026-07-28's listen stream) hears a change.
    import base64
    import struct
    import uuid
    import zlib

    async def go():
        http, client = client_for(serve)
        session = f"py-files-{uuid.uuid4().hex[:8]}"
        async with http, client:
            made = await client.call_tool("execute_python", {"session_id": session, "code": PNG_CODE})
            assert not made.is_error
            links = sorted(c.uri for c in made.content if c.type == "resource_link")
            base = f"runbox://sessions/{session}/files/"
            assert links == [base + "plot.png", base + "table.csv"]
            listed = {r.uri for r in (await client.list_resources()).resources}
            assert {base + "plot.png", base + "table.csv"} <= listed
            table = (await client.read_resource(base + "table.csv")).contents[0]
            assert table.text == "name,score\nada,3\n"
            plot = (await client.read_resource(base + "plot.png")).contents[0]
            assert plot.mime_type == "image/png"
            png = base64.b64decode(plot.blob)
            assert png[:8] == b"\x89PNG\r\n\x1a\n"
            width, height = struct.unpack(">II", png[16:24])
            assert (width, height) == (3, 2)
            idat = png[33 + 8:33 + 8 + struct.unpack(">I", png[33:37])[0]]
            assert zlib.decompress(idat) == (b"\x00" + b"\x00\x80\xff" * 3) * 2
            async with client.listen(resource_subscriptions=[base + "table.csv"]) as subscription:
                await client.call_tool("execute_bash", {"session_id": session,
                                                        "command": "echo lin,4 >> table.csv"})
                with anyio.fail_after(15):
                    async for event in subscription:
                        if getattr(event, "uri", None) == base + "table.csv":
                            break
            table = (await client.read_resource(base + "table.csv")).contents[0]
            assert table.text == "name,score\nada,3\nlin,4\n"
    run(go)

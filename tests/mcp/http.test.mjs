// `runbox serve`'s /mcp driven by the official TypeScript SDK's Streamable
// HTTP client, as a hosted agent would drive it: the URL and the token, and
// nothing else. The same MCP server as `runbox mcp` (sdk.test.mjs) answers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  metric, processesRunning, startServe, stopServe, uniqueSessionId, waitFor,
} from './helpers.mjs';

const TOKEN = `tok-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;

describe('/mcp with the TypeScript SDK client', { timeout: 180000 }, () => {
  let server;
  const clients = [];

  // A client connected with the token (and any other headers).
  async function connect(headers = { Authorization: `Bearer ${TOKEN}` }) {
    const transport = new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } });
    const client = new Client({ name: 'runbox-http-test', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    return { client, transport };
  }

  before(async () => {
    server = await startServe({ token: TOKEN });
  });

  after(async () => {
    for (const client of clients) await client.close().catch(() => {});
    const left = await stopServe(assert, server);
    assert.deepEqual(left.mounts, [], 'no session stayed mounted');
  });

  it('connects with the token: protocol 2025-11-25, a 64-hex-digit session id, runbox as the server', async () => {
    const { client, transport } = await connect();
    assert.match(transport.sessionId, /^[0-9a-f]{64}$/);
    assert.equal(client.getServerVersion().name, 'runbox');
    assert.equal(transport.protocolVersion, '2025-11-25');
    assert.deepEqual(client.getServerCapabilities(), {
      tools: { listChanged: false },
      resources: { subscribe: true, listChanged: true },
      logging: {},
      completions: {},
    });
    assert.match(client.getInstructions(), /session_id/);
    assert.equal(await metric(server, 'runbox_mcp_sessions'), clients.length);
  });

  it('lists the same six tools as the stdio server, with their schemas', async () => {
    const { client } = await connect();
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(),
      ['close_session', 'execute_bash', 'execute_javascript', 'execute_python', 'execute_typescript',
        'list_sessions']);
    const python = tools.find((t) => t.name === 'execute_python');
    assert.deepEqual(python.inputSchema.required, ['code']);
    assert.equal(python.outputSchema.type, 'object');
  });

  it('runs code and streams its output as progress before the result', async () => {
    const { client } = await connect();
    const progress = [];
    const result = await client.callTool(
      { name: 'execute_python', arguments: { code: 'import time\nprint("first", flush=True)\ntime.sleep(2)\nprint("second")' } },
      undefined, { onprogress: (p) => progress.push({ ...p, at: Date.now() }) });
    const done = Date.now();
    assert.equal(result.isError, false);
    assert.equal(result.structuredContent.output, 'first\nsecond\n');
    // The program's writes may come in more chunks than lines.
    assert.equal(progress.map((p) => p.message).join(''), 'first\nsecond\n');
    assert.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), 'progress grows');
    assert.ok(done - progress[0].at >= 1000, 'the first line came while the program still ran');
  });

  it('keeps files between calls of one session_id, and closes the session', async () => {
    const { client } = await connect();
    const session = uniqueSessionId('http');
    const write = await client.callTool({ name: 'execute_bash', arguments: { command: 'echo 42 > answer.txt', session_id: session } });
    assert.equal(write.structuredContent.success, true);
    const read = await client.callTool({ name: 'execute_python', arguments: { code: 'print(open("answer.txt").read().strip())', session_id: session } });
    assert.equal(read.structuredContent.output, '42\n');
    const closed = await client.callTool({ name: 'close_session', arguments: { session_id: session } });
    assert.equal(closed.structuredContent.closed, true);
  });

  it('cancels a running call: the program is killed and the session goes on', async () => {
    const { client } = await connect();
    const controller = new AbortController();
    const marker = `${20 + Math.floor(Math.random() * 1000) / 100}`;
    const call = client.callTool({ name: 'execute_bash', arguments: { command: `sleep ${marker}` } },
      undefined, { signal: controller.signal });
    await waitFor(() => processesRunning('sleep', marker).length > 0, 15000, 'the program to start');
    controller.abort('the user changed their mind');
    await assert.rejects(call, /abort|changed their mind/i);
    await waitFor(() => processesRunning('sleep', marker).length === 0, 10000, 'the program to be killed');
    await client.ping();
  });

  it('a long call holds only its own connection: another client is answered meanwhile', async () => {
    const { client: busy } = await connect();
    const { client: other } = await connect();
    let longEnded = 0;
    const long = busy.callTool({ name: 'execute_bash', arguments: { command: 'sleep 4; echo done' } })
      .then((result) => { longEnded = Date.now(); return result; });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await other.listTools();
    await other.ping();
    const otherEnded = Date.now();
    assert.equal((await long).structuredContent.output, 'done\n');
    assert.ok(longEnded - otherEnded > 1000, 'the other client was answered while the long call ran');
  });

  it('ends the session on close (DELETE): its id is unknown after', async () => {
    const { client, transport } = await connect();
    const id = transport.sessionId;
    await transport.terminateSession();
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': id, 'MCP-Protocol-Version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    assert.equal(response.status, 404);
    assert.equal((await response.json()).error.code, -32001);
    await client.close();
  });

  it('refuses a client without the token (401), and one with a wrong token', async () => {
    const opened = await metric(server, 'runbox_mcp_sessions_opened_total');
    await assert.rejects(connect({}), /401|unauthorized|token/i);
    await assert.rejects(connect({ Authorization: 'Bearer not-the-token' }), /401|unauthorized|token/i);
    assert.equal(await metric(server, 'runbox_mcp_sessions_opened_total'), opened, 'no session was opened');
  });

  // The "done when": a host with only the URL and the token runs code and reads back
  // what it made, and is told when it changes.
  it('reads back the plot and the table code made, and is told when the table changes', async () => {
    const { client } = await connect();
    const updated = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated.push(n.params.uri));
    const id = uniqueSessionId('mcp-http-files');
    const png = 'import struct, zlib\n' +
      'def chunk(kind, data):\n' +
      '    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))\n' +
      'rows = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * 2 for _ in range(2))\n' +
      'open("plot.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) +\n' +
      '    chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))\n' +
      'open("table.csv", "w").write("name,score\\nada,3\\n")\n';
    const made = await client.callTool({ name: 'execute_python', arguments: { session_id: id, code: png } });
    assert.equal(made.isError, false);
    const links = made.content.filter((c) => c.type === 'resource_link').map((c) => c.uri).sort();
    const base = `runbox://sessions/${id}/files/`;
    assert.deepEqual(links, [`${base}plot.png`, `${base}table.csv`]);
    const { resources } = await client.listResources();
    assert.ok(resources.some((r) => r.uri === `${base}plot.png` && r.mimeType === 'image/png'));
    const plot = (await client.readResource({ uri: `${base}plot.png` })).contents[0];
    assert.equal(plot.mimeType, 'image/png');
    const bytes = Buffer.from(plot.blob, 'base64');
    assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.equal(bytes.readUInt32BE(16), 2); // IHDR: 2 x 2
    const table = (await client.readResource({ uri: `${base}table.csv` })).contents[0];
    assert.equal(table.text, 'name,score\nada,3\n');
    await client.subscribeResource({ uri: `${base}table.csv` });
    await client.callTool({ name: 'execute_bash', arguments: { session_id: id, command: 'echo lin,4 >> table.csv' } });
    await waitFor(() => updated.includes(`${base}table.csv`), 10000, 'resources/updated over HTTP');
    assert.equal((await client.readResource({ uri: `${base}table.csv` })).contents[0].text,
      'name,score\nada,3\nlin,4\n');
  });

  it('refuses a page of another site (foreign Origin, 403) even with the token', async () => {
    await assert.rejects(connect({ Authorization: `Bearer ${TOKEN}`, Origin: 'http://evil.example' }), /403|another site/i);
  });
});

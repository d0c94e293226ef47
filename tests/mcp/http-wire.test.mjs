// /mcp over the raw wire: what a hostile or broken client sends gets the
// protocol's answer (a JSON-RPC error with the HTTP status the transport
// specifies), never a crash or a hang; and sessions opened and abandoned
// by the thousand cost nothing once they are gone.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  metric, processesRunning, rssKiB, sleep, startServe, stopServe, waitFor,
} from './helpers.mjs';

const TOKEN = `tok-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
const VERSION = '2025-11-25';
const INITIALIZE = {
  jsonrpc: '2.0', id: 0, method: 'initialize',
  params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'runbox-wire', version: '1' } },
};

function headers(extra = {}) {
  return {
    Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream', ...extra,
  };
}

// One POST; the body is sent as given when it is a string.
async function post(server, body, extra = {}, init = {}) {
  const response = await fetch(server.url, {
    method: 'POST', headers: headers(extra), body: typeof body === 'string' ? body : JSON.stringify(body), ...init,
  });
  const text = await response.text();
  // An SSE answer (a tools/call's): its last event is the response.
  const sse = response.headers.get('content-type') === 'text/event-stream';
  const data = sse ? text.split('\n').filter((l) => l.startsWith('data: ')).pop()?.slice(6) : text;
  let json;
  try {
    json = JSON.parse(data);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

async function initialize(server) {
  const reply = await post(server, INITIALIZE);
  assert.equal(reply.status, 200, reply.text);
  const session = reply.headers.get('mcp-session-id');
  assert.match(session, /^[0-9a-f]{64}$/);
  return { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': VERSION };
}

// The JSON-RPC error of a refused message, with its HTTP status.
function assertRpcError(reply, status, code, pattern) {
  assert.equal(reply.status, status, reply.text);
  assert.equal(reply.json?.jsonrpc, '2.0', reply.text);
  assert.equal(reply.json.error.code, code, reply.text);
  if (pattern) assert.match(reply.json.error.message, pattern);
}

// The events of an SSE stream read for ms milliseconds (then left).
async function readFor(response, ms) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const chunk = await Promise.race([reader.read(), sleep(deadline - Date.now()).then(() => null)]);
    if (!chunk || chunk.done) break;
    text += decoder.decode(chunk.value);
  }
  await reader.cancel().catch(() => {});
  return text;
}

describe('/mcp over the raw wire', { timeout: 240000 }, () => {
  let server;
  let session;

  before(async () => {
    server = await startServe({ token: TOKEN, args: ['--max-body', '65536'] });
    session = await initialize(server);
    assert.equal((await post(server, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status, 202);
  });

  after(async () => {
    const left = await stopServe(assert, server);
    assert.deepEqual(left.mounts, []);
  });

  it('malformed JSON: 400 with -32700 (parse error), id null', async () => {
    const reply = await post(server, '{"jsonrpc": "2.0", "id": 1, "method": ', session);
    assertRpcError(reply, 400, -32700, /Parse error/);
    assert.equal(reply.json.id, null);
  });

  it('JSON that is no JSON-RPC message: 400 with -32600, the id kept when it can be read', async () => {
    for (const body of [{ hello: 1 }, { jsonrpc: '1.0', id: 7, method: 'ping' }, { jsonrpc: '2.0', id: 7, method: 42 },
      { jsonrpc: '2.0', id: null, method: 'ping' }, 'null', '"text"', '42']) {
      const reply = await post(server, body, session);
      assertRpcError(reply, 400, -32600, /Invalid Request/);
    }
    const reply = await post(server, { jsonrpc: '1.0', id: 7, method: 'ping' }, session);
    assert.equal(reply.json.id, 7);
  });

  it('batches are refused as such (the current spec has none), and nothing in them runs', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_bash', arguments: { command: 'sleep 33.3' } } },
      { jsonrpc: '2.0', id: 2, method: 'ping' },
    ];
    const reply = await post(server, batch, session);
    assertRpcError(reply, 400, -32600, /batches are not supported/);
    assert.deepEqual(processesRunning('sleep', '33.3'), []);
    assert.equal((await post(server, [], session)).status, 400);
    assert.equal((await post(server, { jsonrpc: '2.0', id: 3, method: 'ping' }, session)).json.result !== undefined, true);
  });

  it('a message past the body limit: 413, announced or chunked, and the session goes on', async () => {
    const code = 'x'.repeat(70000);
    const big = { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'execute_python', arguments: { code } } };
    const announced = await post(server, big, session);
    assertRpcError(announced, 413, -32000, /larger than the limit of 65536 bytes/);
    // A chunked body is cut off at the limit: 413 (or the connection
    // closed once the server has answered), never read to its end.
    const chunks = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 64; i++) controller.enqueue(new TextEncoder().encode('['.repeat(0) + ' '.repeat(16384)));
        controller.close();
      },
    });
    try {
      const chunked = await fetch(server.url, { method: 'POST', headers: headers(session), body: chunks, duplex: 'half' });
      assert.equal(chunked.status, 413);
    } catch (error) {
      assert.match(String(error.cause ?? error), /closed|reset|EPIPE|terminated|other side/i);
    }
    assert.ok((await post(server, { jsonrpc: '2.0', id: 5, method: 'ping' }, session)).json.result);
  });

  it('JSON nested too deep: 400 with -32700 before jansson recurses', async () => {
    const deep = `${'['.repeat(20000)}${']'.repeat(20000)}`;
    assertRpcError(await post(server, deep, session), 400, -32700, /nested too deep/);
  });

  it('no session id: 400; an unknown or malformed one: 404 with -32001 (initialize again)', async () => {
    const ping = { jsonrpc: '2.0', id: 6, method: 'ping' };
    assertRpcError(await post(server, ping, { 'MCP-Protocol-Version': VERSION }), 400, -32600, /Mcp-Session-Id/);
    assertRpcError(await post(server, ping, { ...session, 'Mcp-Session-Id': '0'.repeat(64) }), 404, -32001, /initialize a new one/);
    assertRpcError(await post(server, ping, { ...session, 'Mcp-Session-Id': session['Mcp-Session-Id'].slice(0, 63) }), 404, -32001);
    assertRpcError(await post(server, ping, { ...session, 'Mcp-Session-Id': '../../etc/passwd\u00ff' }), 404, -32001);
    const get = await fetch(server.url, { headers: { ...headers({ Accept: 'text/event-stream' }), 'Mcp-Session-Id': 'f'.repeat(64) } });
    assert.equal(get.status, 404);
    await get.body?.cancel();
  });

  it('an unsupported MCP-Protocol-Version: 400 with -32022 and the versions the server speaks', async () => {
    const reply = await post(server, { jsonrpc: '2.0', id: 8, method: 'ping' }, { ...session, 'MCP-Protocol-Version': '1999-01-01' });
    assertRpcError(reply, 400, -32022, /Unsupported protocol version/);
    assert.deepEqual(reply.json.error.data.supported, ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']);
    assert.equal(reply.json.error.data.requested, '1999-01-01');
  });

  it('the wrong media types: 415 for a body that is not JSON, 406 for an Accept of neither', async () => {
    const form = await post(server, 'a=1', { ...session, 'Content-Type': 'application/x-www-form-urlencoded' });
    assert.equal(form.status, 415);
    assert.equal(form.json.jsonrpc, '2.0');
    const html = await post(server, { jsonrpc: '2.0', id: 10, method: 'ping' }, { ...session, Accept: 'text/html' });
    assertRpcError(html, 406, -32600, /Not Acceptable/);
  });

  it('notifications and responses are accepted with 202 and an empty body', async () => {
    for (const message of [{ jsonrpc: '2.0', method: 'notifications/whatever' }, { jsonrpc: '2.0', id: 'x', result: {} },
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'never-sent' } }]) {
      const reply = await post(server, message, session);
      assert.equal(reply.status, 202);
      assert.equal(reply.text, '');
    }
  });

  it('a request id still waiting for its answer cannot be reused (409), and a client that leaves cancels its call', async () => {
    const controller = new AbortController();
    const marker = `${40 + Math.floor(Math.random() * 1000) / 100}`;
    const call = { jsonrpc: '2.0', id: 'long', method: 'tools/call', params: { name: 'execute_bash', arguments: { command: `sleep ${marker}` } } };
    const first = fetch(server.url, { method: 'POST', headers: headers(session), body: JSON.stringify(call), signal: controller.signal });
    await waitFor(() => processesRunning('sleep', marker).length > 0, 15000, 'the program to start');
    assertRpcError(await post(server, { ...call, params: { ...call.params, arguments: { command: 'true' } } }, session), 409, -32600, /still waiting/);
    controller.abort();
    await first.catch(() => {});
    await waitFor(() => processesRunning('sleep', marker).length === 0, 10000, 'the program to be killed');
  });

  it('the GET stream: one per session (409 for another), a replayed Last-Event-ID replays nothing', async () => {
    const open = (extra = {}) => fetch(server.url, { headers: { ...headers({ Accept: 'text/event-stream' }), ...session, ...extra } });
    const stream = await open();
    assert.equal(stream.status, 200);
    assert.equal(stream.headers.get('content-type'), 'text/event-stream');
    const second = await open();
    assert.equal(second.status, 409);
    await second.body.cancel();
    const events = readFor(stream, 600);
    // A call answered on its POST never shows up on the GET stream.
    const reply = await post(server, { jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'execute_bash', arguments: { command: 'echo on-the-post' } } }, session);
    assert.match(reply.text, /on-the-post/);
    assert.doesNotMatch(await events, /data:/);
    await waitFor(async () => {
      const again = await open({ 'Last-Event-ID': 'anything-1' });
      if (again.status !== 200) {
        await again.body.cancel();
        return false;
      }
      const text = await readFor(again, 400);
      assert.doesNotMatch(text, /data:/, 'nothing replayed');
      return true;
    }, 5000, 'the first GET stream to be gone');
    for (const id of ['0', '-1', '99999999999999999999', 'x'.repeat(4000), '\u00e9\u0000']) {
      const replayed = await open({ 'Last-Event-ID': encodeURIComponent(id) }).catch(() => null);
      if (replayed) {
        assert.ok([200, 409].includes(replayed.status));
        await readFor(replayed, 100);
      }
    }
    const get = await fetch(server.url, { headers: { ...headers({ Accept: 'application/json' }), ...session } });
    assert.equal(get.status, 406);
  });

  it('a failed initialize opens no session', async () => {
    const opened = await metric(server, 'runbox_mcp_sessions_opened_total');
    const open = await metric(server, 'runbox_mcp_sessions');
    const reply = await post(server, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: 7 } });
    assertRpcError(reply, 200, -32602, /protocolVersion/);
    assert.equal(reply.headers.get('mcp-session-id'), null);
    assert.equal(await metric(server, 'runbox_mcp_sessions'), open);
    assert.equal(await metric(server, 'runbox_mcp_sessions_opened_total'), opened + 1);
  });

  it('clients of 2025-06-18 and 2025-03-26 negotiate their revision and keep its rules', async () => {
    for (const version of ['2025-06-18', '2025-03-26']) {
      const reply = await post(server, { ...INITIALIZE, params: { ...INITIALIZE.params, protocolVersion: version } });
      assert.equal(reply.json.result.protocolVersion, version);
      // 2025-03-26 clients send no MCP-Protocol-Version header.
      const own = { 'Mcp-Session-Id': reply.headers.get('mcp-session-id'), ...(version === '2025-03-26' ? {} : { 'MCP-Protocol-Version': version }) };
      // Before 2025-11-25, arguments that break the schema are -32602.
      const bad = await post(server, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_bash', arguments: { command: 7 } } }, own);
      assert.equal(bad.json.error.code, -32602, bad.text);
      const good = await post(server, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'execute_bash', arguments: { command: 'echo ok' } } }, own);
      assert.equal(good.json.result.structuredContent.output, 'ok\n');
    }
  });

  it('DELETE ends the session: its id gets 404 after, and a second DELETE too', async () => {
    const own = await initialize(server);
    const del = await fetch(server.url, { method: 'DELETE', headers: { ...headers(), ...own } });
    assert.equal(del.status, 204);
    assertRpcError(await post(server, { jsonrpc: '2.0', id: 12, method: 'ping' }, own), 404, -32001);
    const again = await fetch(server.url, { method: 'DELETE', headers: { ...headers(), ...own } });
    assert.equal(again.status, 404);
  });
});

describe('/mcp sessions opened and abandoned by the thousand', { timeout: 300000 }, () => {
  let server;

  before(async () => {
    server = await startServe({ token: TOKEN, args: ['--mcp-session-idle', '3'] });
  });

  after(async () => {
    const left = await stopServe(assert, server);
    assert.deepEqual(left.mounts, []);
  });

  // n sessions, each initialized and then left (tools listed, so that
  // each holds what a real client's would), 8 at a time.
  async function abandon(n) {
    let next = 0;
    const worker = async () => {
      while (next < n) {
        next++;
        const own = await initialize(server);
        const list = await post(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, own);
        // On a loaded machine the other workers can open 32 sessions between this one's
        // initialize and its list, and the limit then rightly evicts it as the idlest.
        assert.ok(list.status === 200 || list.status === 404, `${list.status} ${list.text}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
  }

  // Under ASan, whose LeakSanitizer finds a session's leak in one and whose
  // quarantine makes the RSS bound loose, 300 make the limit evict as surely.
  const many = process.env.ASAN_OPTIONS ? 300 : 1000;

  it(`${many} sessions: their number stays within the per-address limit, memory returns, idle ones expire`, async (t) => {
    await abandon(100); // the allocator's and the server's first growth
    const before = rssKiB(server.child.pid);
    await abandon(many);
    const open = await metric(server, 'runbox_mcp_sessions');
    assert.ok(open <= 32, `at most 32 sessions from one address are kept (${open})`);
    assert.ok(await metric(server, 'runbox_mcp_sessions_ended_total{reason="evicted"}') >= many + 100 - 32);
    await waitFor(async () => (await metric(server, 'runbox_mcp_sessions')) === 0, 10000, 'the idle sessions to expire');
    assert.ok(await metric(server, 'runbox_mcp_sessions_ended_total{reason="expired"}') >= 1);
    const grown = rssKiB(server.child.pid) - before;
    t.diagnostic(`RSS ${before} KiB after 100 sessions, ${before + grown} KiB after ${many + 100} and their expiry`);
    // Under ASan freed memory waits in a quarantine (16 MiB in make test-asan).
    const bound = process.env.ASAN_OPTIONS ? 48 * 1024 : 16 * 1024;
    assert.ok(grown < bound, `the server's RSS grew by ${grown} KiB over ${many} abandoned sessions`);
  });
});

describe('/mcp tool calls share the server\'s turns with POST /v1/execute', { timeout: 120000 }, () => {
  let server;

  before(async () => {
    server = await startServe({ token: TOKEN, args: ['--max-running', '1', '--max-queue', '1'] });
  });

  after(async () => {
    const left = await stopServe(assert, server);
    assert.deepEqual(left.mounts, []);
  });

  it('one runs, one waits for its turn, the next is refused with -32000; tools that run no code are served', async () => {
    const [a, b, c] = [await initialize(server), await initialize(server), await initialize(server)];
    const call = (own, id, command) => post(server, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_bash', arguments: { command } } }, own);
    const running = call(a, 1, 'sleep 2; echo first');
    await waitFor(async () => (await metric(server, 'runbox_executions_running')) === 1, 10000, 'the first call to run');
    const waiting = call(b, 2, 'echo second');
    await waitFor(async () => (await metric(server, 'runbox_executions_queued')) === 1, 10000, 'the second call to wait');
    const refused = await call(c, 3, 'echo third');
    assertRpcError(refused, 200, -32000, /Server busy/);
    const listed = await post(server, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'list_sessions', arguments: {} } }, c);
    assert.equal(listed.json.result.isError, false);
    assert.match((await running).text, /first/);
    assert.match((await waiting).text, /second/);
  });
});

describe('/mcp session limits: the idlest session makes room, busy ones are kept', { timeout: 120000 }, () => {
  let server;

  before(async () => {
    server = await startServe({ token: TOKEN, args: ['--mcp-max-sessions-per-address', '2', '--mcp-max-sessions', '3'] });
  });

  after(async () => {
    const left = await stopServe(assert, server);
    assert.deepEqual(left.mounts, []);
  });

  const stream = (own) => fetch(server.url, { headers: { ...headers({ Accept: 'text/event-stream' }), ...own } });
  const ping = (own) => post(server, { jsonrpc: '2.0', id: 1, method: 'ping' }, own);

  it('past the per-address limit the idle session goes; with every one busy a new one gets 429', async () => {
    const first = await initialize(server);
    const second = await initialize(server);
    const third = await initialize(server); // the first, idle longest, made room
    assertRpcError(await ping(first), 404, -32001);
    assert.ok((await ping(second)).json.result);
    // A session with its GET stream open is busy: it is not evicted.
    const streams = [await stream(second), await stream(third)];
    assert.deepEqual(streams.map((s) => s.status), [200, 200]);
    const refused = await post(server, INITIALIZE);
    assertRpcError(refused, 429, -32000, /all of them busy/);
    assert.equal(refused.headers.get('mcp-session-id'), null);
    assert.equal(await metric(server, 'runbox_mcp_sessions_refused_total'), 1);
    // Its stream closed, a session is idle again, and makes room.
    await streams[0].body.cancel();
    await waitFor(async () => (await post(server, INITIALIZE)).status === 200, 5000, 'room for a session');
    assertRpcError(await ping(second), 404, -32001);
    assert.ok((await ping(third)).json.result, 'the busy session was kept');
    await streams[1].body.cancel();
    assert.ok(await metric(server, 'runbox_mcp_sessions') <= 2);
  });
});

// MCP 2026-07-28: no initialize, no session; every request names its
// revision and the client's capabilities in _meta, and repeats revision,
// method and target in headers.
const STATELESS = '2026-07-28';
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': STATELESS,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'runbox-wire', version: '1' },
};
function stateless(id, method, params = {}, extra = {}) {
  const name = method === 'tools/call' ? params.name : method === 'resources/read' ? params.uri : undefined;
  return [{ jsonrpc: '2.0', id, method, params: { ...params, _meta: { ...ENVELOPE, ...(params._meta || {}) } } },
    { 'MCP-Protocol-Version': STATELESS, 'Mcp-Method': method, ...(name ? { 'Mcp-Name': name } : {}), ...extra }];
}

describe('/mcp at 2026-07-28 (stateless) over the raw wire', { timeout: 120000 }, () => {
  let server;

  before(async () => {
    server = await startServe({ token: TOKEN });
  });

  after(async () => {
    const left = await stopServe(assert, server);
    assert.deepEqual(left.mounts, []);
  });

  it('server/discover: the revisions, capabilities and who runbox is, cacheable, without a session', async () => {
    const reply = await post(server, ...stateless(1, 'server/discover'));
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get('mcp-session-id'), null);
    const result = reply.json.result;
    assert.equal(result.resultType, 'complete');
    assert.deepEqual(result.supportedVersions, [STATELESS, '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']);
    assert.equal(result.cacheScope, 'private');
    assert.ok(Number.isInteger(result.ttlMs) && result.ttlMs >= 0);
    assert.equal(result._meta['io.modelcontextprotocol/serverInfo'].name, 'runbox');
    assert.ok(result.capabilities.tools);
  });

  it('a tool call without initialize: its progress on SSE, then a result marked complete', async () => {
    const [body, extra] = stateless(2, 'tools/call', {
      name: 'execute_bash', arguments: { command: 'echo one; echo two' }, _meta: { progressToken: 'p' },
    });
    const reply = await post(server, body, extra);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get('content-type'), 'text/event-stream');
    assert.match(reply.text, /notifications\/progress/);
    assert.equal(reply.json.result.resultType, 'complete');
    assert.equal(reply.json.result.structuredContent.output, 'one\ntwo\n');
  });

  it('a missing or bad _meta: 400 with -32602, the id kept', async () => {
    for (const meta of [undefined, 'text', {}, { 'io.modelcontextprotocol/protocolVersion': STATELESS },
      { 'io.modelcontextprotocol/clientCapabilities': {} }]) {
      const reply = await post(server, { jsonrpc: '2.0', id: 3, method: 'tools/list', params: meta === undefined ? {} : { _meta: meta } },
        { 'MCP-Protocol-Version': STATELESS, 'Mcp-Method': 'tools/list' });
      assertRpcError(reply, 400, -32602, /_meta/);
      assert.equal(reply.json.id, 3);
    }
    const noParams = await post(server, { jsonrpc: '2.0', id: 4, method: 'tools/list' }, { 'MCP-Protocol-Version': STATELESS, 'Mcp-Method': 'tools/list' });
    assertRpcError(noParams, 400, -32602);
  });

  it('a per-request version that is missing, not served or not a string: -32020, -32022 or -32602', async () => {
    // _meta names 2026-07-28, the header is missing: the client contradicts itself.
    const [body] = stateless(5, 'tools/list');
    assertRpcError(await post(server, body, { 'Mcp-Method': 'tools/list' }), 400, -32020, /MCP-Protocol-Version/);
    // The header names another revision than _meta.
    const [, extra] = stateless(5, 'tools/list');
    const other = { ...body, params: { _meta: { ...ENVELOPE, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } };
    assertRpcError(await post(server, other, extra), 400, -32020);
    // Both name a revision runbox does not serve: refused before any header rung.
    const unknown = await post(server, other, { ...extra, 'MCP-Protocol-Version': '2099-01-01' });
    assertRpcError(unknown, 400, -32022, /Unsupported protocol version/);
    assert.equal(unknown.json.error.data.requested, '2099-01-01');
    assert.ok(unknown.json.error.data.supported.includes(STATELESS));
    // A handshake revision without a session: a session is needed for it.
    const handshake = await post(server, { ...body, params: { _meta: { ...ENVELOPE, 'io.modelcontextprotocol/protocolVersion': '2025-11-25' } } },
      { ...extra, 'MCP-Protocol-Version': '2025-11-25' });
    assertRpcError(handshake, 400, -32600, /Mcp-Session-Id/);
    const number = { ...body, params: { _meta: { ...ENVELOPE, 'io.modelcontextprotocol/protocolVersion': 20260728 } } };
    assertRpcError(await post(server, number, extra), 400, -32020);
  });

  it('Mcp-Method and Mcp-Name that do not match the body, or a routing header twice: 400 with -32020', async () => {
    const [body, extra] = stateless(6, 'tools/call', { name: 'execute_bash', arguments: { command: 'true' } });
    assertRpcError(await post(server, body, { ...extra, 'Mcp-Method': 'tools/list' }), 400, -32020, /Mcp-Method/);
    const { 'Mcp-Method': _, ...withoutMethod } = extra;
    assertRpcError(await post(server, body, withoutMethod), 400, -32020, /Mcp-Method/);
    assertRpcError(await post(server, body, { ...extra, 'Mcp-Name': 'execute_python' }), 400, -32020, /Mcp-Name/);
    const { 'Mcp-Name': __, ...withoutName } = extra;
    assertRpcError(await post(server, body, withoutName), 400, -32020, /Mcp-Name/);
    // The name as base64 (how a value no header can carry is sent), and with spaces around it: accepted.
    const encoded = `=?base64?${Buffer.from('execute_bash').toString('base64')}?=`;
    assert.equal((await post(server, body, { ...extra, 'Mcp-Name': encoded })).json.result.resultType, 'complete');
    assert.equal((await post(server, body, { ...extra, 'Mcp-Name': ' execute_bash ' })).status, 200);
    assertRpcError(await post(server, body, { ...extra, 'Mcp-Name': '=?base64?!!!?=' }), 400, -32020);
    // fetch folds a repeated header into one value: two Mcp-Method lines are
    // sent as "a, b", which matches no method.
    const doubled = new Headers(headers(extra));
    doubled.append('Mcp-Method', 'tools/call');
    const reply = await fetch(server.url, { method: 'POST', headers: doubled, body: JSON.stringify(body) });
    assert.equal(reply.status, 400);
    assert.equal((await reply.json()).error.code, -32020);
    // The same header on two lines, as a raw client can send it: which one
    // counts is ambiguous, so it is refused.
    const text = JSON.stringify(body);
    const { host, hostname, port } = new URL(server.url);
    const raw = await new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname.replace(/^\[|\]$/g, ''));
      let answer = '';
      socket.on('data', (chunk) => { answer += chunk; });
      socket.on('end', () => resolve(answer));
      socket.on('error', reject);
      socket.write(`POST /mcp HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\n`
        + 'Accept: application/json, text/event-stream\r\nConnection: close\r\n'
        + `MCP-Protocol-Version: ${STATELESS}\r\nMcp-Method: tools/call\r\nMcp-Method: tools/call\r\n`
        + `Mcp-Name: execute_bash\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
    });
    assert.match(raw, /^HTTP\/1\.1 400/);
    assert.match(raw, /"code":\s*-32020/);
    assert.match(raw, /appears more than once/);
  });

  it('methods 2026-07-28 dropped (initialize, ping, logging/setLevel, resources/subscribe) and unknown ones: 404 with -32601', async () => {
    for (const method of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'no/such']) {
      const reply = await post(server, ...stateless(7, method));
      assertRpcError(reply, 404, -32601, /Method not found/);
      assert.equal(reply.json.id, 7);
    }
  });

  it('lists and reads are cacheable; a missing resource is -32602 (SEP-2164); notifications get 202', async () => {
    for (const method of ['tools/list', 'resources/list', 'resources/templates/list']) {
      const reply = await post(server, ...stateless(8, method));
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.result.resultType, 'complete');
      assert.equal(reply.json.result.cacheScope, 'private');
      assert.ok(Number.isInteger(reply.json.result.ttlMs));
    }
    const missing = await post(server, ...stateless(9, 'resources/read', { uri: 'runbox://sessions/nope/files/x' }));
    assertRpcError(missing, 400, -32602, /Resource not found/);
    const note = await post(server, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } },
      { 'MCP-Protocol-Version': STATELESS });
    assert.equal(note.status, 202);
    // GET and DELETE belong to sessions, which 2026-07-28 has not.
    const get = await fetch(server.url, { headers: headers({ 'MCP-Protocol-Version': STATELESS, Accept: 'text/event-stream' }) });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
  });

  it('a client that closes its call\'s stream cancels it: its program is killed', async () => {
    const marker = `${60 + Math.floor(Math.random() * 1000) / 100}`;
    const [body, extra] = stateless(10, 'tools/call', { name: 'execute_bash', arguments: { command: `sleep ${marker}` } });
    const abort = new AbortController();
    const pending = fetch(server.url, { method: 'POST', headers: headers(extra), body: JSON.stringify(body), signal: abort.signal })
      .then((r) => r.text()).catch(() => null);
    await waitFor(() => processesRunning('sleep', marker).length > 0, 15000, 'the program to start');
    abort.abort();
    await pending;
    await waitFor(() => processesRunning('sleep', marker).length === 0, 10000, 'the program to be killed');
  });

  it('a subscriptions/listen stream hears of the files another request\'s call changed', async () => {
    const session = `wire-listen-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const watched = `runbox://sessions/${session}/files/watched.txt`;
    const [listen, listenHeaders] = stateless('listen-1', 'subscriptions/listen',
      { notifications: { resourceSubscriptions: [watched], resourcesListChanged: true } });
    const stream = await fetch(server.url, { method: 'POST', headers: headers(listenHeaders), body: JSON.stringify(listen) });
    assert.equal(stream.status, 200);
    assert.equal(stream.headers.get('content-type'), 'text/event-stream');
    const reader = stream.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const until = async (pattern) => {
      const deadline = Date.now() + 15000;
      while (!pattern.test(text) && Date.now() < deadline) {
        const chunk = await Promise.race([reader.read(), sleep(deadline - Date.now()).then(() => null)]);
        if (!chunk || chunk.done) break;
        text += decoder.decode(chunk.value);
      }
      assert.match(text, pattern);
    };
    await until(/notifications\/subscriptions\/acknowledged/);
    const call = await post(server, ...stateless(12, 'tools/call',
      { name: 'execute_bash', arguments: { command: 'echo 1 > watched.txt', session_id: session } }));
    assert.equal(call.json.result.isError, false, call.text);
    await until(/notifications\/resources\/updated[^\n]*watched\.txt[^\n]*listen-1/);
    await until(/notifications\/resources\/list_changed[^\n]*listen-1/);
    await reader.cancel();
    await post(server, ...stateless(13, 'tools/call', { name: 'close_session', arguments: { session_id: session } }));
  });

  it('no token: 401 as a JSON-RPC error, before anything is read', async () => {
    const [body, extra] = stateless(11, 'server/discover');
    const reply = await fetch(server.url, { method: 'POST', headers: { ...headers(extra), Authorization: 'Bearer wrong' }, body: JSON.stringify(body) });
    assert.equal(reply.status, 401);
    assert.equal((await reply.json()).jsonrpc, '2.0');
  });
});

describe('/mcp at 2026-07-28: the server stops with a call running', { timeout: 60000 }, () => {
  it('stops within seconds, ends the call\'s stream and kills its program (the call is in no session)', async () => {
    const server = await startServe({ token: TOKEN });
    const marker = `${70 + Math.floor(Math.random() * 1000) / 100}`;
    const [body, extra] = stateless(1, 'tools/call', { name: 'execute_bash', arguments: { command: `sleep ${marker}` } });
    const reply = fetch(server.url, { method: 'POST', headers: headers(extra), body: JSON.stringify(body) })
      .then((r) => r.text()).catch(() => null);
    await waitFor(() => processesRunning('sleep', marker).length > 0, 15000, 'the program to start');
    const started = Date.now();
    const left = await stopServe(assert, server);
    assert.ok(Date.now() - started < 10000, `stopped in ${Date.now() - started} ms`);
    assert.deepEqual(left.mounts, []);
    await reply;
    await waitFor(() => processesRunning('sleep', marker).length === 0, 10000, 'the program to be killed');
  });
});

// `runbox mcp` over the raw wire: the traffic that SDKs never send, each
// case one line of intent. Every line the server writes must be valid
// UTF-8 and valid JSON (WireServer checks), and nothing is answered twice.
import assert from 'node:assert/strict';
import dns from 'node:dns/promises';
import { after, describe, it } from 'node:test';
import {
  WireServer, assertCleanStderr, cleanStateDir, newStateDir, processesRunning, sleep, uniqueSessionId,
  waitFor,
} from './helpers.mjs';

const stateDir = newStateDir();
const servers = [];

function start() {
  const server = new WireServer(stateDir);
  servers.push(server);
  return server;
}

const invalidLines = (server) => server.messages.filter((m) => m.invalidLine);
const bash = (id, command, extra = {}) => ({
  jsonrpc: '2.0', id, method: 'tools/call',
  params: { name: 'execute_bash', arguments: { command }, ...extra },
});

after(async () => {
  for (const server of servers) {
    if (server.child.exitCode === null) await server.close();
  }
  const left = cleanStateDir(stateDir); // first, so that a failure below leaves nothing behind
  for (const server of servers) {
    assertCleanStderr(assert, server.stderr.text);
    assert.deepEqual(invalidLines(server), []);
  }
  assert.deepEqual(left, { sessions: [], mounts: [] });
});

describe('before initialize', () => {
  it('answers ping, refuses other requests at once, and says -32601 to server/discover', async () => {
    const server = start();
    assert.deepEqual((await server.request(1, 'ping')).result, {});
    const early = await server.request(2, 'tools/list');
    assert.equal(early.error.code, -32600);
    assert.match(early.error.message, /initialize/);
    // Newer clients probe server/discover first and fall back on -32601.
    assert.equal((await server.request(3, 'server/discover')).error.code, -32601);
    assert.equal((await server.initialize()).result.protocolVersion, '2025-11-25');
    assert.equal((await server.request(4, 'tools/list')).result.tools.length, 6);
    await server.close();
  });
});

describe('version negotiation', () => {
  for (const version of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
    it(`echoes ${version}`, async () => {
      const server = start();
      assert.equal((await server.initialize(version)).result.protocolVersion, version);
      await server.close();
    });
  }

  it('answers an unknown version with the newest one', async () => {
    const server = start();
    const reply = await server.initialize('1999-01-01');
    assert.equal(reply.result.protocolVersion, '2025-11-25');
    assert.equal(reply.result.serverInfo.name, 'runbox');
    assert.match(reply.result.instructions, /session_id/);
    await server.close();
  });

  it('refuses initialize without a protocolVersion, and a second initialize', async () => {
    const server = start();
    assert.equal((await server.request(1, 'initialize', { capabilities: {} })).error.code, -32602);
    await server.initialize();
    assert.equal((await server.request(2, 'initialize', { protocolVersion: '2025-11-25' })).error.code, -32600);
    await server.close();
  });
});

describe('malformed traffic', () => {
  const server = start();

  it('answers bad JSON with -32700 and id null, and carries on', async () => {
    await server.initialize();
    server.send('{"jsonrpc": "2.0", "id": 1, "method": \n');
    const parseError = await server.next((m) => m.error?.code === -32700);
    assert.equal(parseError.id, null);
    assert.deepEqual((await server.request(2, 'ping')).result, {});
  });

  it('echoes string and integer ids with their type', async () => {
    assert.equal((await server.request('7', 'ping')).id, '7');
    assert.equal((await server.request(7, 'ping')).id, 7);
    assert.equal((await server.request(-3, 'ping')).id, -3);
    assert.equal((await server.request(123456789012, 'ping')).id, 123456789012);
    assert.equal((await server.request('ünïcode id', 'ping')).id, 'ünïcode id');
  });

  it('refuses a request with id null (-32600)', async () => {
    server.send({ jsonrpc: '2.0', id: null, method: 'ping' });
    const error = await server.next((m) => m.error?.code === -32600 && /null id/.test(m.error.message));
    assert.equal(error.id, null);
  });

  it('answers a batch with one -32600 error', async () => {
    const before = server.messages.length;
    server.send([{ jsonrpc: '2.0', id: 'b1', method: 'ping' }, { jsonrpc: '2.0', id: 'b2', method: 'ping' }]);
    const error = await server.next((m) => m.error?.code === -32600 && /batch/.test(m.error.message));
    assert.equal(error.id, null);
    await server.request('after-batch', 'ping');
    assert.equal(server.messages.length, before + 2, 'one error for the batch, then the ping');
  });

  it('answers unknown methods with -32601 and bogus params with -32602', async () => {
    assert.equal((await server.request(10, 'prompts/list')).error.code, -32601);
    assert.equal((await server.request(11, 'ping', [1, 2])).error.code, -32602);
    assert.deepEqual((await server.request(16, 'ping', null)).result, {}, 'null params count as none');
    assert.equal((await server.request(12, 'tools/call', { name: 'execute_bash', arguments: 'echo' })).error.code, -32602);
    assert.equal((await server.request(13, 'tools/call', {})).error.code, -32602);
    assert.equal((await server.request(14, 'tools/call', { name: 'nope' })).error.code, -32602);
    assert.equal((await server.request(15, 'tools/list', { cursor: 'x' })).error.code, -32602);
  });

  it('refuses a message that is not JSON-RPC 2.0', async () => {
    server.send({ id: 20, method: 'ping' });
    assert.equal((await server.reply(20)).error.code, -32600);
    server.send('42\n');
    const error = await server.next((m) => m.error?.code === -32600 && /JSON object/.test(m.error.message));
    assert.equal(error.id, null);
  });

  it('ignores notifications it does not know, and responses', async () => {
    const before = server.messages.length;
    server.send({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
    server.send({ jsonrpc: '2.0', id: 'from-client', result: {} });
    await server.request(21, 'ping');
    assert.equal(server.messages.length, before + 1);
  });

  it('skips a line longer than 4 MiB without holding it, and carries on', async () => {
    const huge = `{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":"${'x'.repeat(5 << 20)}"}}\n`;
    server.send(huge);
    const error = await server.next((m) => m.error?.code === -32600 && /longer than/.test(m.error.message));
    assert.equal(error.id, null);
    assert.deepEqual((await server.request(22, 'ping')).result, {});
  });

  it('ignores a cancel for an unknown id: no response, no crash', async () => {
    const before = server.messages.length;
    server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'never-sent' } });
    server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99999 } });
    server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: {} });
    await sleep(200);
    assert.deepEqual((await server.request(23, 'ping')).result, {});
    assert.equal(server.messages.length, before + 1);
  });

  it('refuses a second call with the id of one in progress', async () => {
    server.send(bash('dup', 'sleep 1; echo first'));
    server.send(bash('dup', 'echo second'));
    const refused = await server.next((m) => m.id === 'dup' && m.error);
    assert.equal(refused.error.code, -32600);
    const first = await server.next((m) => m.id === 'dup' && m.result);
    assert.equal(first.result.structuredContent.output, 'first\n');
  });

  it('exits 0 when stdin closes', async () => {
    assert.deepEqual(await server.close(), { code: 0, signal: null });
  });
});

describe('tool calls on the wire', () => {
  it('answers ping while a call runs, before the call finishes', async () => {
    const server = start();
    await server.initialize();
    server.send(bash('slow', 'sleep 1.5; echo done'));
    await sleep(200);
    const sent = Date.now();
    const pong = await server.request('ping-while-running', 'ping');
    const done = await server.reply('slow');
    assert.ok(pong.receivedAt - sent < 500, `ping took ${pong.receivedAt - sent} ms`);
    assert.ok(pong.receivedAt < done.receivedAt);
    assert.equal(done.result.structuredContent.output, 'done\n');
    await server.close();
  });

  it('cancels a running call: the program is killed and no response comes', async () => {
    const server = start();
    await server.initialize();
    server.send(bash('doomed', 'sleep 6363.6363'));
    await waitFor(() => processesRunning('sleep', '6363.6363').length > 0, 10000, 'the sleep to start');
    server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'doomed', reason: 'test' } });
    await waitFor(() => processesRunning('sleep', '6363.6363').length === 0, 5000, 'the sleep to be killed');
    await server.request('after-cancel', 'ping');
    await sleep(300);
    assert.equal(server.messages.filter((m) => m.id === 'doomed').length, 0);
    await server.close();
  });

  it('exits promptly with code 0 when stdin closes mid-call, and the program is gone', async () => {
    const server = start();
    await server.initialize();
    server.send(bash('orphan', 'sleep 6262.6262'));
    await waitFor(() => processesRunning('sleep', '6262.6262').length > 0, 10000, 'the sleep to start');
    const closing = Date.now();
    assert.deepEqual(await server.close(), { code: 0, signal: null });
    assert.ok(Date.now() - closing < 3000, `exit took ${Date.now() - closing} ms`);
    assert.deepEqual(processesRunning('sleep', '6262.6262'), []);
    assert.equal(server.messages.filter((m) => m.id === 'orphan').length, 0);
  });

  it('keeps progress valid UTF-8 whatever the program prints, and sends none after the result', async () => {
    const server = start();
    await server.initialize();
    server.send(bash('bytes', String.raw`printf 'bad \xff\xfe bytes\n'; printf '\xe2\x82'; sleep 0.2; printf '\xac euro\n'`,
      { _meta: { progressToken: 'tok' } }));
    const result = await server.reply('bytes');
    await server.request('later', 'ping');
    const progress = server.messages.filter((m) => m.method === 'notifications/progress');
    assert.ok(progress.length >= 1);
    assert.ok(progress.every((m) => m.params.progressToken === 'tok' && m.receivedAt <= result.receivedAt));
    const streamed = progress.map((m) => m.params.message).join('');
    assert.match(streamed, /^bad \uFFFD\uFFFD bytes\n/);
    assert.equal(result.result.structuredContent.output, 'bad \uFFFD\uFFFD bytes\n\u20AC euro\n');
    assert.equal(result.result.isError, false);
    await server.close();
  });

  it('runs calls beyond the eight at once in turn, answering every one', async () => {
    const server = start();
    await server.initialize();
    for (let i = 0; i < 10; i++) server.send(bash(`many-${i}`, `sleep 0.3; echo ${i}`));
    for (let i = 0; i < 10; i++) {
      assert.equal((await server.reply(`many-${i}`, 20000)).result.structuredContent.output, `${i}\n`);
    }
    await server.close();
  });

  it('answers bad arguments with -32602 under 2025-06-18, and as a tool error under 2025-11-25', async () => {
    const older = start();
    await older.initialize('2025-06-18');
    older.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_python', arguments: {} } });
    const refused = await older.reply(1);
    assert.equal(refused.error.code, -32602);
    assert.match(refused.error.message, /missing required argument 'code'/);
    await older.close();

    const newer = start();
    await newer.initialize('2025-11-25');
    newer.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_python', arguments: { code: 'print(1)\u0000' } } });
    const toolError = await newer.reply(1);
    assert.equal(toolError.result.isError, true);
    assert.match(toolError.result.content[0].text, /NUL/);
    await newer.close();
  });

  it('takes cpus: the quota is in the result, and a bad value is refused with its reason', async () => {
    const server = start();
    await server.initialize('2025-11-25');
    const tools = (await server.request(9, 'tools/list')).result.tools;
    const schema = tools.find((t) => t.name === 'execute_bash').inputSchema.properties.cpus;
    assert.equal(schema.type, 'number');
    server.send(bash(1, 'true', {}));
    server.send({ jsonrpc: '2.0', id: 2, method: 'tools/call',
      params: { name: 'execute_bash', arguments: { command: 'true', cpus: 0.5 } } });
    server.send({ jsonrpc: '2.0', id: 3, method: 'tools/call',
      params: { name: 'execute_bash', arguments: { command: 'true', cpus: 'two' } } });
    server.send({ jsonrpc: '2.0', id: 4, method: 'tools/call',
      params: { name: 'execute_bash', arguments: { command: 'true', cpus: 100000 } } });
    const [plain, half, word, huge] = await Promise.all([1, 2, 3, 4].map((id) => server.reply(id)));
    const { limits } = plain.result.structuredContent;
    assert.equal(plain.result.structuredContent.cpus, limits === 'rlimits' ? null : 1);
    assert.equal(half.result.structuredContent.cpus, limits === 'rlimits' ? null : 0.5);
    assert.equal(word.result.isError, true);
    assert.match(word.result.content[0].text, /cpus/);
    assert.equal(huge.result.isError, true);
    assert.match(huge.result.content[0].text, /cpus/);
    await server.close();
  });

  it('takes egress_allow: every malformed list is a tool error naming egress_allow', async () => {
    const server = start();
    await server.initialize('2025-11-25');
    const tools = (await server.request('list', 'tools/list')).result.tools;
    for (const tool of tools.filter((t) => t.name.startsWith('execute_'))) {
      const schema = tool.inputSchema.properties.egress_allow;
      assert.deepEqual([schema.type, schema.items, schema.maxItems], ['array', { type: 'string' }, 64], tool.name);
    }
    const hostile = [
      'pypi.org', 42, { 'pypi.org': true }, null, ['pypi.org', 7], ['pypi.org\u0000.evil.com'],
      Array.from({ length: 65 }, (_, i) => `10.0.${i}.0/24`),
      ['10.0.0.0/33'], ['*'], ['exa mple.com'], ['http://x'], [''],
    ];
    hostile.forEach((egress_allow, i) => server.send({ jsonrpc: '2.0', id: `bad-${i}`, method: 'tools/call',
      params: { name: 'execute_bash', arguments: { command: 'echo ran', egress_allow } } }));
    for (const [i, egress_allow] of hostile.entries()) {
      const reply = await server.reply(`bad-${i}`);
      assert.equal(reply.result?.isError, true, `${JSON.stringify(egress_allow)}: ${JSON.stringify(reply)}`);
      assert.match(reply.result.content[0].text, /egress_allow/, JSON.stringify(egress_allow));
      assert.equal(reply.result.structuredContent, undefined, 'refused before anything ran');
    }
    const tooMany = await server.reply('bad-6');
    assert.match(tooMany.result.content[0].text, /65 items: at most 64/);
    // 64 destinations, the most there may be, and the three kinds of destination are taken.
    const most = Array.from({ length: 64 }, (_, i) => `10.0.${i}.0/24`);
    for (const egress_allow of [most, ['10.0.0.0/8', 'pypi.org', '*.example.com'], []]) {
      const ran = await server.request(`ok-${egress_allow.length}`, 'tools/call',
        { name: 'execute_bash', arguments: { command: 'echo ran', egress_allow } });
      assert.equal(ran.result.isError, false, JSON.stringify(ran));
      const result = ran.result.structuredContent;
      assert.equal(result.output, 'ran\n');
      assert.equal(result.egress_denied, 0);
      assert.deepEqual(result.egress_denied_to, []);
    }
    await server.close();
  });

  it('reaches nothing with egress_allow [], and says where the code tried to connect', async (t) => {
    if (process.getuid() !== 0) return t.skip('network-on needs runbox-net and the tun device, set up here only as root');
    const server = start();
    await server.initialize('2025-11-25');
    // The package index's address: the default policy allows it, only the narrowing refuses it.
    let address;
    try {
      address = (await dns.lookup('pypi.org', { family: 4 })).address;
    } catch {
      return t.skip('pypi.org does not resolve here');
    }
    const reply = await server.request('none', 'tools/call', { name: 'execute_bash', arguments: {
      command: `timeout 5 bash -c "exec 3<>/dev/tcp/${address}/443" && echo connected || echo refused`,
      egress_allow: [], timeout: 20 } });
    const result = reply.result.structuredContent;
    assert.equal(result.network, true);
    assert.equal(result.output, 'refused\n');
    assert.ok(result.egress_denied >= 1, JSON.stringify(result));
    assert.ok(result.egress_denied_to.includes(`${address}:443`), JSON.stringify(result.egress_denied_to));
    await server.close();
  });

  it('stops what runs in a session when close_session removes it', async () => {
    const server = start();
    await server.initialize();
    const session_id = uniqueSessionId('wire-close');
    server.send({ jsonrpc: '2.0', id: 'in-session', method: 'tools/call',
      params: { name: 'execute_bash', arguments: { command: 'touch here; sleep 6565.6565', session_id } } });
    await waitFor(() => processesRunning('sleep', '6565.6565').length > 0, 10000, 'the session sleep to start');
    const closed = await server.request('close', 'tools/call', { name: 'close_session', arguments: { session_id } });
    assert.deepEqual(closed.result.structuredContent, { session_id, closed: true });
    const stopped = await server.reply('in-session');
    assert.equal(stopped.result.structuredContent.cancelled, true);
    assert.deepEqual(processesRunning('sleep', '6565.6565'), []);
    await server.close();
  });

  // Engine issue, see the MCP report: a sandbox's init keeps the descriptors
  // runbox had open when it was cloned, among them another session's locked
  // lock file, so that session stays busy until the unrelated call ends.
  it('closes a session while a call runs outside it', async () => {
    const server = start();
    await server.initialize();
    const session_id = uniqueSessionId('wire-close-busy');
    server.send(bash('elsewhere', 'sleep 6464.6464'));
    server.send({ jsonrpc: '2.0', id: 'in-session', method: 'tools/call',
      params: { name: 'execute_bash', arguments: { command: 'sleep 6565.6565', session_id } } });
    await waitFor(() => processesRunning('sleep', '6565.6565').length > 0, 10000, 'the session sleep to start');
    // Both calls run before the close (under load the one outside may start later).
    await waitFor(() => processesRunning('sleep', '6464.6464').length > 0, 10000, 'the other sleep to start');
    try {
      const closed = await server.request('close', 'tools/call', { name: 'close_session', arguments: { session_id } });
      assert.deepEqual(closed.result.structuredContent, { session_id, closed: true });
      assert.equal(processesRunning('sleep', '6464.6464').length, 1, 'the call outside the session still runs');
    } finally {
      server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'elsewhere' } });
      await waitFor(() => processesRunning('sleep', '6464.6464').length === 0, 5000, 'the other sleep to be killed');
      await server.close();
    }
  });
});

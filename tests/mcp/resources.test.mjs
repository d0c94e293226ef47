// Sessions' files as MCP resources, driven by the official TypeScript SDK
// client over stdio as a host would: code makes a plot and a table, the
// result links them, the host lists, reads, subscribes and is told of
// changes; logs of the server's own events, and completion of the
// resource template's arguments.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { crc32, inflateSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  LoggingMessageNotificationSchema, McpError, ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  RUNBOX, assertCleanStderr, cleanStateDir, collect, newStateDir, serverEnv, uniqueSessionId, waitFor,
} from './helpers.mjs';

const TEMPLATE = 'runbox://sessions/{session_id}/files/{+path}';
const fileUri = (session, path) => `runbox://sessions/${session}/files/${path}`;

// A 4x3 RGB PNG made with the standard library only, and a CSV; prints
// the PNG's SHA-256 so the test can compare what it reads back.
const MAKE_PLOT_AND_TABLE = `
import hashlib, struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
rows = b"".join(b"\\x00" + bytes([v for x in range(4) for v in (x * 60, y * 80, 200)]) for y in range(3))
png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 3, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
import os
os.makedirs("out", exist_ok=True)
open("out/plot.png", "wb").write(png)
open("data.csv", "w").write("x,y\\n1,2\\n3,4\\n")
print(hashlib.sha256(png).hexdigest())
`;

// The chunks of a PNG, each CRC checked: what a viewer would refuse.
function pngChunks(bytes) {
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  const chunks = [];
  for (let at = 8; at < bytes.length;) {
    const length = bytes.readUInt32BE(at);
    const kind = bytes.subarray(at + 4, at + 8).toString('latin1');
    const data = bytes.subarray(at + 8, at + 8 + length);
    assert.equal(bytes.readUInt32BE(at + 8 + length), crc32(bytes.subarray(at + 4, at + 8 + length)), `${kind} CRC`);
    chunks.push({ kind, data });
    at += 12 + length;
  }
  return chunks;
}

describe('session files as resources, with the SDK client', { timeout: 180000 }, () => {
  const stateDir = newStateDir();
  const transport = new StdioClientTransport({
    command: RUNBOX, args: ['mcp'], env: serverEnv(stateDir), stderr: 'pipe',
  });
  const stderr = collect(transport.stderr);
  const client = new Client({ name: 'runbox-resources-test', version: '1.0.0' });
  const updated = [];
  const listChanged = [];
  const logs = [];
  const sessions = [];

  const call = (name, args) => client.callTool({ name, arguments: args });
  const session = (prefix) => {
    const id = uniqueSessionId(prefix);
    sessions.push(id);
    return id;
  };

  before(async () => {
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated.push(n.params.uri));
    client.setNotificationHandler(ResourceListChangedNotificationSchema, () => listChanged.push(Date.now()));
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
    await client.connect(transport);
    await client.listTools();
  });

  after(async () => {
    for (const id of sessions) await call('close_session', { session_id: id }).catch(() => {});
    await client.close();
    const left = cleanStateDir(stateDir);
    assertCleanStderr(assert, stderr.text);
    assert.deepEqual(left, { sessions: [], mounts: [] });
  });

  it('declares resources (subscribe, listChanged), logging and completions', () => {
    const capabilities = client.getServerCapabilities();
    assert.deepEqual(capabilities.resources, { subscribe: true, listChanged: true });
    assert.deepEqual(capabilities.logging, {});
    assert.deepEqual(capabilities.completions, {});
  });

  it('links the PNG and the CSV an execution wrote, and reads them back: the PNG decodes, the CSV is text', async () => {
    const id = session('res-plot');
    const result = await call('execute_python', { session_id: id, code: MAKE_PLOT_AND_TABLE });
    assert.equal(result.isError, false, JSON.stringify(result));
    const sha256 = result.structuredContent.output.trim();
    const links = result.content.filter((c) => c.type === 'resource_link');
    assert.deepEqual(links.map((l) => l.uri).sort(), [fileUri(id, 'data.csv'), fileUri(id, 'out/plot.png')]);
    const plotLink = links.find((l) => l.uri.endsWith('plot.png'));
    assert.equal(plotLink.mimeType, 'image/png');
    assert.equal(plotLink.name, 'out/plot.png');
    assert.equal(links.find((l) => l.uri.endsWith('.csv')).mimeType, 'text/csv');

    const plot = (await client.readResource({ uri: plotLink.uri })).contents;
    assert.equal(plot.length, 1);
    assert.equal(plot[0].mimeType, 'image/png');
    assert.equal(plot[0].text, undefined, 'a PNG comes as a blob');
    const bytes = Buffer.from(plot[0].blob, 'base64');
    assert.equal(createHash('sha256').update(bytes).digest('hex'), sha256, 'the bytes the code wrote');
    const chunks = pngChunks(bytes);
    assert.deepEqual(chunks.map((c) => c.kind), ['IHDR', 'IDAT', 'IEND']);
    const ihdr = chunks[0].data;
    assert.deepEqual([ihdr.readUInt32BE(0), ihdr.readUInt32BE(4), ihdr[8], ihdr[9]], [4, 3, 8, 2], '4x3, 8-bit RGB');
    assert.equal(inflateSync(chunks[1].data).length, 3 * (1 + 4 * 3), 'the pixels inflate to 3 rows of 4');

    const table = (await client.readResource({ uri: fileUri(id, 'data.csv') })).contents[0];
    assert.deepEqual(table, { uri: fileUri(id, 'data.csv'), mimeType: 'text/csv', text: 'x,y\n1,2\n3,4\n' });

    // A call that changes nothing links nothing.
    const quiet = await call('execute_bash', { session_id: id, command: 'cat data.csv >/dev/null' });
    assert.deepEqual(quiet.content.filter((c) => c.type === 'resource_link'), []);
  });

  it('lists every file of every session once, a page of at most 100 at a time', async () => {
    const id = session('res-many');
    const made = await call('execute_bash', {
      session_id: id, command: 'mkdir -p d; for i in $(seq 1 150); do echo "$i" > "d/f $i.txt"; done; ln -s d/f\\ 1.txt link',
    });
    assert.equal(made.isError, false);
    // At most 16 links per result, and a note of the rest.
    const links = made.content.filter((c) => c.type === 'resource_link');
    assert.equal(links.length, 16);
    assert.match(made.content.at(-1).text, /134 more files were created or changed \(at most 16 links per result\)/);
    const seen = [];
    let cursor;
    let pages = 0;
    do {
      const page = await client.listResources(cursor ? { cursor } : {});
      assert.ok(page.resources.length <= 100, `page ${pages} has ${page.resources.length}`);
      seen.push(...page.resources);
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 50);
    assert.ok(pages >= 2, 'more than one page');
    const mine = seen.filter((r) => r.uri.startsWith(`runbox://sessions/${id}/`));
    assert.equal(mine.length, 150, 'every file, and no link');
    assert.equal(new Set(seen.map((r) => r.uri)).size, seen.length, 'no resource twice');
    const one = mine.find((r) => r.name === 'd/f 7.txt');
    assert.equal(one.uri, fileUri(id, 'd/f%207.txt'), 'the path is percent-encoded');
    assert.equal(one.size, 2);
    assert.equal(one.mimeType, 'text/plain');
    assert.match(one.annotations.lastModified, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal((await client.readResource({ uri: one.uri })).contents[0].text, '7\n');
  });

  it('names the URI template', async () => {
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.equal(resourceTemplates.length, 1);
    assert.equal(resourceTemplates[0].uriTemplate, TEMPLATE);
    assert.match(resourceTemplates[0].description, /links are never followed/);
  });

  it('tells a subscriber when code changes the file, and everyone when files come and go', async () => {
    const id = session('res-watch');
    await call('execute_bash', { session_id: id, command: 'echo 1 > watched.txt; echo 1 > other.txt' });
    const watched = fileUri(id, 'watched.txt');
    await client.subscribeResource({ uri: watched });
    await client.listResources(); // list_changed concerns a client that holds the list
    updated.length = 0;
    listChanged.length = 0;

    // Same size, same second: still a change.
    await call('execute_bash', { session_id: id, command: 'echo 2 > watched.txt; echo 2 > other.txt' });
    await waitFor(() => updated.length > 0, 5000, 'notifications/resources/updated');
    assert.deepEqual(updated, [watched], 'only the subscribed file');
    assert.equal(listChanged.length, 0, 'no file came or went');
    assert.equal((await client.readResource({ uri: watched })).contents[0].text, '2\n');

    await call('execute_bash', { session_id: id, command: 'echo new > appeared.txt' });
    await waitFor(() => listChanged.length > 0, 5000, 'notifications/resources/list_changed');
    assert.deepEqual(updated, [watched], 'appeared.txt is not subscribed');

    // Removed: the subscriber hears of it, and the read says not found.
    await call('execute_bash', { session_id: id, command: 'rm watched.txt' });
    await waitFor(() => updated.length === 2, 5000, 'updated for the removal');
    await assert.rejects(client.readResource({ uri: watched }),
      (error) => error instanceof McpError && error.code === -32002);

    await client.unsubscribeResource({ uri: watched });
    await call('execute_bash', { session_id: id, command: 'echo back > watched.txt' });
    assert.equal(updated.length, 2, 'nothing after unsubscribe');
  });

  it('sends the server\'s events as notifications/message once a level is set, at that level or above', async () => {
    const id = session('res-log');
    await call('execute_bash', { session_id: id, command: 'true' });
    await call('close_session', { session_id: id });
    assert.deepEqual(logs, [], 'nothing before logging/setLevel');

    await client.setLoggingLevel('warning');
    const refused = await call('execute_bash', { command: 'true', image: 'no-such-image' });
    assert.equal(refused.isError, true);
    await waitFor(() => logs.length > 0, 5000, 'notifications/message');
    assert.equal(logs[0].level, 'warning');
    assert.equal(logs[0].logger, 'runbox');
    assert.equal(logs[0].data.event, 'execution_refused');
    assert.match(logs[0].data.message, /no-such-image/);

    // A closed session is info: below warning, not sent; sent at info.
    await call('execute_bash', { session_id: id, command: 'true' });
    await call('close_session', { session_id: id });
    assert.equal(logs.length, 1);
    await client.setLoggingLevel('info');
    await call('execute_bash', { session_id: id, command: 'true' });
    await call('close_session', { session_id: id });
    await waitFor(() => logs.length === 2, 5000, 'the info message');
    assert.deepEqual([logs[1].level, logs[1].data.event, logs[1].data.session_id], ['info', 'session_closed', id]);

    // A stateful interpreter that died is a warning: its variables are gone.
    const stateful = session('res-kernel');
    await call('execute_python', { session_id: stateful, stateful: true, code: 'x = 1' });
    await call('execute_python', { session_id: stateful, stateful: true, code: 'import os; os._exit(3)' });
    await waitFor(() => logs.some((l) => l.data.event === 'kernel_restarted'), 5000, 'kernel_restarted');
    assert.equal(logs.find((l) => l.data.event === 'kernel_restarted').data.session_id, stateful);
  });

  it('completes the template\'s session id and path', async () => {
    const id = session('res-complete');
    await call('execute_bash', { session_id: id, command: 'mkdir -p out; echo > out/a.csv; echo > out/b.png; echo > top.txt' });
    const ids = await client.complete({ ref: { type: 'ref/resource', uri: TEMPLATE }, argument: { name: 'session_id', value: 'res-complete-' } });
    assert.deepEqual(ids.completion.values, [id]);
    assert.equal(ids.completion.hasMore, false);
    const paths = await client.complete({
      ref: { type: 'ref/resource', uri: TEMPLATE }, argument: { name: 'path', value: 'out/' },
      context: { arguments: { session_id: id } },
    });
    assert.deepEqual(paths.completion.values, ['out/a.csv', 'out/b.png']);
    // runbox has no prompts: nothing to complete, and no error.
    const prompt = await client.complete({ ref: { type: 'ref/prompt', name: 'anything' }, argument: { name: 'x', value: '' } });
    assert.deepEqual(prompt.completion.values, []);
  });
});

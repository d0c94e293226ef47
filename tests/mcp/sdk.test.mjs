// `runbox mcp` driven by the official MCP TypeScript SDK client over stdio,
// as an MCP host would drive it. listTools runs first, so every callTool
// below is also checked by the SDK against the tool's outputSchema.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import {
  RUNBOX, assertCleanStderr, cleanStateDir, collect, newStateDir, processesRunning, serverEnv,
  uniqueSessionId, waitFor,
} from './helpers.mjs';

const RESULT_FIELDS = ['success', 'output', 'error', 'exit_code', 'duration_ms', 'session_id', 'language', 'image', 'image_note',
  'error_type', 'exception', 'timed_out', 'cancelled', 'truncated', 'signal', 'cpu_ms', 'peak_memory_kb',
  'limits', 'cpus', 'stateful', 'results', 'execution_count', 'kernel_restarted', 'kernel_restored',
  'restore_ms', 'restart_reason', 'network', 'egress_denied',
  'egress_denied_to', 'pooled'];

describe('runbox mcp with the SDK client', { timeout: 180000 }, () => {
  const stateDir = newStateDir();
  const transport = new StdioClientTransport({
    command: RUNBOX, args: ['mcp'], env: serverEnv(stateDir), stderr: 'pipe',
  });
  const stderr = collect(transport.stderr);
  const client = new Client({ name: 'runbox-sdk-test', version: '1.0.0' });
  let tools;

  const call = (name, args, options) => client.callTool({ name, arguments: args }, undefined, options);
  // A successful call's result object, checked against its JSON text twin.
  const structured = (result) => {
    assert.equal(result.content[0].type, 'text');
    assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
    return result.structuredContent;
  };

  before(async () => {
    await client.connect(transport);
    tools = (await client.listTools()).tools;
  });

  after(async () => {
    await client.close();
    const left = cleanStateDir(stateDir);
    assertCleanStderr(assert, stderr.text);
    assert.deepEqual(left, { sessions: [], mounts: [] }, 'every session was closed by its test');
  });

  it('initializes with the newest protocol, server info and instructions', () => {
    assert.equal(client.getServerVersion().name, 'runbox');
    assert.match(client.getServerVersion().version, /^\d+\.\d+\.\d+$/);
    assert.deepEqual(client.getServerCapabilities(), {
      tools: { listChanged: false }, resources: { subscribe: true, listChanged: true }, logging: {}, completions: {},
    });
    assert.match(client.getInstructions(), /session_id/);
  });

  it('lists the six tools with strict input schemas, output schemas and annotations', () => {
    assert.deepEqual(tools.map((t) => t.name).sort(),
      ['close_session', 'execute_bash', 'execute_javascript', 'execute_python', 'execute_typescript',
        'list_sessions']);
    for (const tool of tools) {
      assert.equal(tool.inputSchema.$schema, 'https://json-schema.org/draft/2020-12/schema', tool.name);
      assert.equal(tool.inputSchema.additionalProperties, false, tool.name);
      assert.equal(tool.outputSchema.type, 'object', tool.name);
      assert.equal(typeof tool.annotations.title, 'string', tool.name);
      for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
        assert.equal(typeof tool.annotations[hint], 'boolean', `${tool.name} ${hint}`);
      }
    }
    const python = tools.find((t) => t.name === 'execute_python');
    assert.deepEqual(Object.keys(python.inputSchema.properties),
      ['code', 'timeout', 'session_id', 'cpus', 'stateful', 'requirements', 'egress_allow', 'image']);
    assert.deepEqual(python.inputSchema.required, ['code']);
    assert.deepEqual(python.outputSchema.required, RESULT_FIELDS);
    assert.deepEqual(python.outputSchema.properties.error_type.type, ['string', 'null']);
    assert.equal(python.annotations.readOnlyHint, false);
    const bash = tools.find((t) => t.name === 'execute_bash');
    assert.deepEqual(Object.keys(bash.inputSchema.properties),
      ['command', 'timeout', 'session_id', 'cpus', 'stateful', 'egress_allow', 'image']);
    // What a model must know before its first call is in the description.
    for (const fact of ['/home/user', 'session_id', '30 s', '300 s', '512 MiB', '1 MiB', 'head and the tail', 'Network']) {
      assert.ok(python.description.includes(fact), `execute_python's description mentions ${fact}`);
    }
    assert.equal(tools.find((t) => t.name === 'list_sessions').annotations.readOnlyHint, true);
  });

  it('runs Python, JavaScript and Bash', async () => {
    const python = structured(await call('execute_python', { code: 'print(6 * 7)' }));
    assert.equal(python.output, '42\n');
    assert.equal(python.language, 'python');
    const js = structured(await call('execute_javascript', { code: 'console.log([1, 2].map((x) => x * 2).join(","))' }));
    assert.equal(js.output, '2,4\n');
    const bash = await call('execute_bash', { command: 'echo "$((6 * 7))"; echo oops >&2' });
    assert.equal(bash.isError, false);
    assert.equal(structured(bash).output, '42\n');
    assert.equal(structured(bash).error, 'oops\n');
    assert.equal(structured(bash).success, true);
  });

  // TypeScript needs the default image's Node.js (type stripping); the host's is 20.
  it('runs TypeScript with its types stripped', { skip: !process.env.RUNBOX_IMAGES && 'no image' }, async () => {
    const ts = structured(await call('execute_typescript', { code: 'const n: number = 41;\nconsole.log(n + 1)' }));
    assert.equal(ts.output, '42\n');
    assert.equal(ts.language, 'typescript');
    const refused = await call('execute_typescript', { code: 'enum E { A }' });
    assert.equal(refused.isError, true);
    assert.equal(structured(refused).error_type, 'SyntaxError');
  });

  it('returns a failing program as isError with its classified error', async () => {
    const result = await call('execute_python', { code: 'print("before")\n1 / 0' });
    assert.equal(result.isError, true);
    const failed = structured(result);
    assert.equal(failed.success, false);
    assert.equal(failed.output, 'before\n');
    assert.equal(failed.error_type, 'RuntimeError');
    assert.equal(failed.exception, 'ZeroDivisionError');
    assert.equal(failed.exit_code, 1);
  });

  it('reports a timeout as TimeoutError within the requested limit', async () => {
    const started = Date.now();
    const result = structured(await call('execute_bash', { command: 'sleep 30', timeout: 1 }));
    assert.equal(result.timed_out, true);
    assert.equal(result.error_type, 'TimeoutError');
    assert.ok(Date.now() - started < 5000);
  });

  it('refuses bad arguments as a tool error the model can read (MCP 2025-11-25)', async () => {
    const missing = await call('execute_python', { source: 'print(1)' });
    assert.equal(missing.isError, true);
    assert.match(missing.content[0].text, /unknown argument 'source'.*accepted: code, timeout/);
    const wrongType = await call('execute_bash', { command: 'true', timeout: 'soon' });
    assert.match(wrongType.content[0].text, /argument 'timeout' must be a number, not a string/);
    const tooLong = await call('execute_bash', { command: 'true', timeout: 301 });
    assert.match(tooLong.content[0].text, /more than 0 and at most 300/);
    // The engine's own refusal (RBX_EINVAL) is a tool error too.
    const badSession = await call('execute_bash', { command: 'true', session_id: '../etc' });
    assert.equal(badSession.isError, true);
    assert.match(badSession.content[0].text, /invalid session id/);
  });

  it('hands requirements to the engine, whose install result the schema covers', async () => {
    const malformed = await call('execute_python', { code: 'print(1)', requirements: ['not a spec!!'] });
    assert.equal(malformed.isError, true);
    assert.match(malformed.content[0].text, /requirement/);
    const result = await call('execute_python', {
      code: 'print(1)', requirements: ['runbox-surely-no-such-package-xyzzy==0.0.1'],
    });
    assert.equal(result.isError, true);
    const failed = structured(result);
    assert.equal(failed.error_type, 'ImportError');
    assert.match(failed.error, /installing the requirements failed; the code was not run/);
    assert.equal(typeof failed.install.environment, 'string');
  });

  it('answers an unknown tool with JSON-RPC error -32602', async () => {
    await assert.rejects(call('execute_cobol', { code: 'DISPLAY 1' }),
      (error) => error instanceof McpError && error.code === -32602 && /Unknown tool: execute_cobol/.test(error.message));
  });

  it('streams output as progress before the result', async () => {
    const progress = [];
    const code = 'import time\nfor i in range(3):\n    print(f"tick {i}", flush=True)\n    time.sleep(0.4)\n';
    const result = structured(await call('execute_python', { code }, {
      onprogress: (p) => progress.push({ ...p, at: Date.now() }),
    }));
    const resultAt = Date.now();
    assert.equal(result.output, 'tick 0\ntick 1\ntick 2\n');
    assert.ok(progress.length >= 2, `progress arrived while it ran: ${JSON.stringify(progress)}`);
    assert.ok(progress[0].at < resultAt - 500, 'the first tick came long before the result');
    assert.equal(progress.map((p) => p.message).join(''), result.output);
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress);
    assert.equal(progress.at(-1).progress, Buffer.byteLength(result.output));
  });

  it('kills the program of a cancelled call', async () => {
    const controller = new AbortController();
    const pending = call('execute_bash', { command: 'sleep 6161.6161' }, { signal: controller.signal });
    await waitFor(() => processesRunning('sleep', '6161.6161').length > 0, 10000, 'the sleep to start');
    controller.abort('the user changed their mind');
    await assert.rejects(pending);
    await waitFor(() => processesRunning('sleep', '6161.6161').length === 0, 5000, 'the sleep to be killed');
    // The server carries on.
    assert.equal(structured(await call('execute_bash', { command: 'echo still here' })).output, 'still here\n');
  });

  it('runs two calls at once', async () => {
    const started = Date.now();
    const [a, b] = await Promise.all([
      call('execute_bash', { command: 'sleep 2; echo a' }),
      call('execute_python', { code: 'import time; time.sleep(2); print("b")' }),
    ]);
    const elapsed = Date.now() - started;
    assert.equal(structured(a).output, 'a\n');
    assert.equal(structured(b).output, 'b\n');
    assert.ok(elapsed < 3500, `both took ${elapsed} ms: they overlapped (in turn they take over 4000)`);
  });

  it('keeps files in a session across calls and languages until close_session', async () => {
    const session_id = uniqueSessionId('sdk-files');
    const write = structured(await call('execute_python', {
      session_id, code: 'open("notes.txt", "w").write("kept between calls")\nx = 1',
    }));
    assert.equal(write.session_id, session_id);
    const read = structured(await call('execute_python', {
      session_id, code: 'import os\nprint(open("notes.txt").read(), os.getcwd(), "x" in globals())',
    }));
    assert.equal(read.output, 'kept between calls /home/user False\n');
    assert.equal(structured(await call('execute_bash', { session_id, command: 'cat notes.txt' })).output, 'kept between calls');

    const listed = structured(await call('list_sessions', {})).sessions.find((s) => s.session_id === session_id);
    assert.equal(listed.running, false);
    assert.ok(listed.disk_bytes > 0);

    const closed = structured(await call('close_session', { session_id }));
    assert.deepEqual(closed, { session_id, closed: true });
    const after = structured(await call('list_sessions', {})).sessions.map((s) => s.session_id);
    assert.ok(!after.includes(session_id));
    const again = await call('close_session', { session_id });
    assert.equal(again.isError, true);
    assert.match(again.content[0].text, /no session/);
  });

  it('keeps a live interpreter with stateful and shows a plot as an image', async () => {
    const session_id = uniqueSessionId('sdk-stateful');
    const first = structured(await call('execute_python', { session_id, stateful: true, code: 'x = 41' }));
    assert.equal(first.stateful, true);
    const second = await call('execute_python', { session_id, stateful: true, code: 'x + 1' });
    assert.equal(structured(second).execution_count, 2);
    assert.deepEqual(second.content[1], { type: 'text', text: '42' });
    const plot = await call('execute_python', {
      session_id, stateful: true,
      code: "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([3, 1, 2]);",
    });
    const image = plot.content.find((c) => c.type === 'image');
    assert.equal(image.mimeType, 'image/png');
    assert.equal(Buffer.from(image.data, 'base64').subarray(1, 4).toString(), 'PNG');
    const listed = structured(await call('list_sessions', {})).sessions.find((s) => s.session_id === session_id);
    assert.deepEqual(listed.kernels.map((k) => k.language), ['python']);
    assert.deepEqual(structured(await call('close_session', { session_id })), { session_id, closed: true });
    const fresh = await call('execute_python', { session_id, stateful: true, code: "'x' in dir()" });
    assert.deepEqual(fresh.content[1], { type: 'text', text: 'False' });
    await call('close_session', { session_id });
  });

  it('shows the plot of a one-off run as an image too', async () => {
    const plot = await call('execute_python', {
      code: "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.show()\nprint('shown')",
    });
    const result = structured(plot);
    assert.equal(result.stateful, false);
    assert.equal(result.output, 'shown\n');
    assert.deepEqual(result.results.map((r) => r.kind), ['display_data']);
    const images = plot.content.filter((c) => c.type === 'image');
    assert.equal(images.length, 1);
    assert.equal(images[0].mimeType, 'image/png');
    assert.equal(Buffer.from(images[0].data, 'base64').subarray(1, 4).toString(), 'PNG');
    assert.equal(images[0].data, result.results[0].data['image/png']);
  });

  it('answers ping', async () => {
    assert.deepEqual(await client.ping(), {});
  });
});

describe('runbox mcp exits when its client goes away', { timeout: 60000 }, () => {
  it('exits by itself once stdin closes, without needing SIGTERM', async () => {
    const stateDir = newStateDir();
    const transport = new StdioClientTransport({ command: RUNBOX, args: ['mcp'], env: serverEnv(stateDir), stderr: 'pipe' });
    const stderr = collect(transport.stderr);
    const client = new Client({ name: 'runbox-sdk-test', version: '1.0.0' });
    await client.connect(transport);
    await client.listTools();
    await client.callTool({ name: 'execute_bash', arguments: { command: 'true' } });
    const pid = transport.pid;
    const closing = Date.now();
    await client.close(); // ends stdin, and sends SIGTERM only after 2 s
    assert.ok(Date.now() - closing < 1900, `closing took ${Date.now() - closing} ms`);
    await waitFor(() => !existsSync(`/proc/${pid}`), 2000, 'the server process to be gone');
    const left = cleanStateDir(stateDir);
    assert.match(stderr.text, /runbox mcp: stopped/);
    assertCleanStderr(assert, stderr.text);
    assert.deepEqual(left, { sessions: [], mounts: [] });
  });
});

// The MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// package.json) against `runbox serve`'s /mcp: its server scenarios of the
// 2025-11-25 and 2025-06-18 revisions, which runbox serves over HTTP (with
// 2025-03-26, which the suite no longer tests on its own), and every
// scenario the stateless revision 2026-07-28 requires (--requirements).
// Each scenario the suite runs is in the lists below (once per revision); a
// scenario the pinned suite adds fails the test until it is sorted into one.
//
// The server runs without a token on loopback: the suite's client sends no
// Authorization header (the token's checks are in http.test.mjs).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startServe, stopServe } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const SUITE = path.join(path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js');
const SPEC_VERSIONS = ['2026-07-28', '2025-11-25', '2025-06-18'];
const STATELESS = '2026-07-28';

// Scenarios that must pass: a code-execution server's part of the spec.
const APPLICABLE = [
  'server-initialize',
  'server-session-lifecycle',
  'ping',
  'tools-list',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
  // Resources, logging and completion (issue 33, items 2 and 3).
  'logging-set-level',
  'completion-complete',
  'resources-list',
  'resources-subscribe',
  'resources-unsubscribe',
];
// Of them, those the suite runs for 2025-11-25 only.
const SINCE_2025_11_25 = ['server-sse-multiple-streams', 'dns-rebinding-protection'];
// 2026-07-28 (stateless): what it requires of a code-execution server.
const APPLICABLE_2026 = [
  'server-stateless',
  'caching',
  'http-header-validation',
  'sep-2164-resource-not-found',
  'input-required-result-unsupported-methods',
  'completion-complete',
  'tools-list',
  'server-sse-multiple-streams',
  'resources-list',
  'dns-rebinding-protection',
];
// Checks of those scenarios that can only fail here: they need a tool or a
// prompt of the suite's reference server. Every other check must pass.
const NEEDS_FIXTURE = {
  'server-stateless': {
    'sep-2575-server-rejects-undeclared-capability': 'calls the reference server\'s test_missing_capability tool',
    'sep-2575-missing-capability-http-400': 'calls the reference server\'s test_missing_capability tool',
    'sep-2575-http-server-no-independent-requests-on-stream': 'calls the reference server\'s test_streaming_elicitation tool',
    'sep-2575-server-no-log-without-loglevel': 'calls the reference server\'s test_logging_tool',
  },
  caching: { 'sep-2549-prompts-list-caching-hints': 'runbox offers no prompts (prompts/list is -32601)' },
};

// Scenarios that test the suite's reference server (its fixture tools,
// prompts and test:// resources) or what a code-execution server does not
// do. The README's MCP section lists them with these reasons.
const FIXTURE_TOOL = 'calls a tool of the suite\'s reference server (test_*); runbox\'s tools run code';
const NOT_APPLICABLE = {
  'tools-call-simple-text': FIXTURE_TOOL,
  'tools-call-image': FIXTURE_TOOL,
  'tools-call-audio': FIXTURE_TOOL,
  'tools-call-embedded-resource': FIXTURE_TOOL,
  'tools-call-mixed-content': FIXTURE_TOOL,
  'tools-call-with-logging': FIXTURE_TOOL,
  'tools-call-error': FIXTURE_TOOL,
  'tools-call-with-progress': `${FIXTURE_TOOL} (runbox's progress is tested with both SDKs)`,
  'tools-call-sampling': 'the server asks the client\'s model (sampling); runbox\'s tools never do',
  'tools-call-elicitation': 'the server asks the user (elicitation); runbox\'s tools never do',
  'elicitation-sep1034-defaults': 'elicitation: runbox asks the user nothing',
  'elicitation-sep1330-enums': 'elicitation: runbox asks the user nothing',
  'resources-read-text': 'reads the fixture resource test://static-text',
  'resources-read-binary': 'reads the fixture resource test://static-binary',
  'resources-templates-read': 'reads the fixture template test://template/{id}/data',
  'prompts-list': 'runbox offers no prompts',
  'prompts-get-simple': 'runbox offers no prompts',
  'prompts-get-with-args': 'runbox offers no prompts',
  'prompts-get-embedded-resource': 'runbox offers no prompts',
  'prompts-get-with-image': 'runbox offers no prompts',
  // 2026-07-28's own.
  'json-schema-2020-12': FIXTURE_TOOL,
  'http-custom-header-server-validation': 'needs a tool whose inputSchema declares x-mcp-header; runbox\'s arguments (code) are no routing keys',
  ...Object.fromEntries([
    'basic-elicitation', 'basic-sampling', 'basic-list-roots', 'request-state', 'multiple-input-requests',
    'multi-round', 'missing-input-response', 'non-tool-request', 'result-type', 'tampered-state',
    'capability-check', 'ignore-extra-params', 'validate-input',
  ].map((s) => [`input-required-result-${s}`,
    'the server asks the client for input (InputRequiredResult) in a fixture tool or prompt; runbox\'s tools never do'])),
  ...Object.fromEntries([
    'lifecycle', 'capability-negotiation', 'wire-fields', 'request-state-removal', 'mrtr-input', 'request-headers',
    'dispatch-and-envelope', 'status-notifications', 'required-task-error', 'mrtr-composition',
  ].map((s) => [`tasks-${s}`, 'tasks (SEP-2663): runbox does not offer its calls as tasks; a call\'s answer is its result'])),
};

// A check that failed (WARNING and INFO do not fail a scenario).
const failed = (checks) => checks.filter((c) => c.status === 'FAILURE');

for (const SPEC_VERSION of SPEC_VERSIONS) describe(`the MCP conformance suite's server scenarios (${SPEC_VERSION})`, { timeout: 600000 }, () => {
  let server;
  const results = {};
  let output = '';
  const applicable = SPEC_VERSION === STATELESS ? APPLICABLE_2026
    : SPEC_VERSION === '2025-11-25' ? APPLICABLE : APPLICABLE.filter((s) => !SINCE_2025_11_25.includes(s));

  before(async () => {
    server = await startServe();
    const out = mkdtempSync(path.join(tmpdir(), 'rbx-conformance-'));
    // Node.js 20 (Debian 12) lacks fs.globSync, which the suite imports for
    // a command not run here: conformance/node20.mjs supplies it.
    // 2026-07-28: exactly the scenarios the revision requires, frozen at its release.
    const which = SPEC_VERSION === STATELESS ? ['--requirements', SPEC_VERSION] : ['--spec-version', SPEC_VERSION];
    const child = spawn(process.execPath, ['--import', path.join(here, 'conformance', 'node20.mjs'), SUITE, 'server',
      '--url', server.url, ...which, '--output-dir', out], { cwd: out, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk) => { output += chunk; });
    child.stderr.on('data', (chunk) => { output += chunk; });
    await new Promise((resolve) => child.on('exit', resolve));
    for (const dir of readdirSync(out)) {
      const scenario = /^server-(.+)-\d{4}-\d\d-\d\dT/.exec(dir)?.[1];
      if (scenario) results[scenario] = JSON.parse(readFileSync(path.join(out, dir, 'checks.json'), 'utf8'));
    }
    rmSync(out, { recursive: true, force: true });
  });

  after(async () => {
    const left = await stopServe(assert, server);
    assert.deepEqual(left.mounts, []);
  });

  it('ran, and every scenario it ran is sorted into one list', () => {
    const ran = Object.keys(results).sort();
    assert.ok(ran.length >= applicable.length, `the suite ran:\n${output.slice(-3000)}`);
    const sorted = [...APPLICABLE, ...APPLICABLE_2026, ...Object.keys(NOT_APPLICABLE)];
    assert.deepEqual(ran.filter((s) => !sorted.includes(s)), [], 'scenarios in no list');
  });

  for (const scenario of applicable) {
    it(`passes ${scenario}`, () => {
      assert.ok(results[scenario], `${scenario} ran`);
      const excused = (SPEC_VERSION === STATELESS && NEEDS_FIXTURE[scenario]) || {};
      const failures = failed(results[scenario]);
      assert.deepEqual(failures.filter((c) => !excused[c.id]), [], `${scenario} failed`);
      // An excused check still runs and fails for the reason given: when it
      // passes, it moves out of NEEDS_FIXTURE.
      assert.deepEqual(failures.map((c) => c.id).filter((id) => excused[id]).sort(), Object.keys(excused).sort(),
        `${scenario}: an excused check did not fail as expected`);
    });
  }

  // What runbox sends is valid for the spec's schema in every scenario,
  // those that do not apply included (the suite's wire-schema-valid check).
  it('sends only messages valid for the spec\'s JSON schema, in every scenario', () => {
    for (const [scenario, checks] of Object.entries(results)) {
      const wire = checks.filter((c) => c.id === 'wire-schema-valid');
      assert.deepEqual(failed(wire), [], `${scenario}: a message of runbox broke the schema`);
    }
  });
});

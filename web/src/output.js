// What a run shows: stdout and stderr as they stream, rich outputs, then
// the result's fields and its error, classified. Everything from the code
// goes in as text (textContent); HTML output only inside a sandboxed
// iframe that may not run scripts.
import { byId, el, formatBytes } from './dom.js';

// What each error_type of the Result means for the person who ran the code.
const ERROR_TYPES = {
  SyntaxError: 'The code did not parse: nothing of it ran.',
  TimeoutError: 'It ran past its timeout and was killed.',
  MemoryError: 'It went over its memory limit and was killed.',
  ImportError: 'A module it imports is not there (name it in requirements).',
  PermissionError: 'The sandbox refused something it tried.',
  RuntimeError: 'It failed while running.',
};

const RESULT_FIELDS = [
  ['success', 'success'],
  ['exit_code', 'exit code'],
  ['duration_ms', 'duration (ms)'],
  ['session_id', 'session'],
  ['language', 'language'],
  ['image', 'image'],
  ['stateful', 'stateful'],
  ['execution_count', 'execution count'],
  ['kernel_restarted', 'kernel restarted'],
  ['kernel_restored', 'kernel restored'],
  ['restore_ms', 'restore (ms)'],
  ['timed_out', 'timed out'],
  ['cancelled', 'cancelled'],
  ['signal', 'signal'],
  ['cpu_ms', 'CPU (ms)'],
  ['peak_memory_kb', 'peak memory'],
  ['pooled', 'pooled'],
  ['network', 'network'],
];

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function image(mime, base64) {
  const clean = String(base64).replace(/\s+/g, '');
  if (!BASE64.test(clean)) return el('pre', { class: 'rich-text', text: `(${mime} that is not base64)` });
  return el('img', { src: `data:${mime};base64,${clean}`, alt: `${mime} output` });
}

// One rich output (a MIME bundle), in the richest form that is safe.
export function renderRich(kind, data) {
  let body;
  if (typeof data['image/png'] === 'string') body = image('image/png', data['image/png']);
  else if (typeof data['image/jpeg'] === 'string') body = image('image/jpeg', data['image/jpeg']);
  else if (typeof data['image/svg+xml'] === 'string') {
    // An SVG as an image runs no script, whatever it holds.
    body = el('img', {
      src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(data['image/svg+xml'])}`,
      alt: 'image/svg+xml output',
    });
  } else if (typeof data['text/html'] === 'string') {
    // sandbox="" with nothing allowed: no scripts, no forms, no navigation
    // of the page, an opaque origin; the page's CSP is inherited too.
    body = el('iframe', { sandbox: '', title: 'HTML output (sandboxed, no scripts)', class: 'rich-html' });
    body.srcdoc = data['text/html'];
  } else if (typeof data['text/markdown'] === 'string') {
    body = el('pre', { class: 'rich-text', text: data['text/markdown'] });
  } else if (data['application/json'] !== undefined) {
    body = el('pre', { class: 'rich-text', text: JSON.stringify(data['application/json'], null, 2) });
  } else {
    body = el('pre', { class: 'rich-text', text: String(data['text/plain'] ?? '') });
  }
  const label = kind === 'execute_result' ? 'result' : 'display';
  const mimes = Object.keys(data).join(', ');
  return el('figure', { class: `rich-item rich-${label}` }, el('figcaption', { text: `${label} · ${mimes}` }), body);
}

function value(name, v) {
  if (v === null || v === undefined) return '—';
  if (name === 'peak_memory_kb') return formatBytes(v * 1024);
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

export class RunView {
  constructor() {
    this.stdout = byId('stdout');
    this.stderr = byId('stderr');
    this.rich = byId('rich');
    this.result = byId('result');
    this.richCount = 0;
  }

  start() {
    this.stdout.textContent = '';
    this.stderr.textContent = '';
    this.rich.replaceChildren();
    this.richCount = 0;
    this.started = performance.now();
    this.result.replaceChildren(el('p', { class: 'status status-running', text: 'running…' }));
  }

  write(stream, text) {
    const target = stream === 'stderr' ? this.stderr : this.stdout;
    const atBottom = target.scrollTop + target.clientHeight >= target.scrollHeight - 4;
    target.append(document.createTextNode(text));
    if (atBottom) target.scrollTop = target.scrollHeight;
  }

  display(kind, data) {
    if (!data || typeof data !== 'object') return;
    this.richCount += 1;
    this.rich.append(renderRich(kind, data));
  }

  elapsed() {
    return Math.round(performance.now() - this.started);
  }

  finish(result) {
    // The result repeats the rich outputs; show them when no event did.
    if (this.richCount === 0 && Array.isArray(result.results)) {
      for (const item of result.results) this.display(item.kind, item.data);
    }
    const ok = result.success === true;
    const rows = RESULT_FIELDS.filter(([name]) => name in result).map(([name, label]) => el('div', {},
      el('dt', { text: label }),
      el('dd', { class: `field-${name}`, text: value(name, result[name]) })));
    const truncated = result.truncated || {};
    const cut = Object.entries(truncated).filter(([, n]) => n > 0);
    const parts = [
      el('p', { class: `status ${ok ? 'status-ok' : 'status-failed'}`, text: ok ? 'success' : 'failed' }),
    ];
    if (result.error_type) {
      parts.push(el('div', { class: `error-kind error-${result.error_type}`, role: 'alert' },
        el('strong', { class: 'error-type', text: result.error_type }),
        result.exception ? el('span', { class: 'exception', text: ` (${result.exception})` }) : null,
        el('span', { text: ` — ${ERROR_TYPES[result.error_type] || 'It failed.'}` })));
    }
    parts.push(el('dl', { class: 'fields' }, rows));
    if (cut.length) {
      parts.push(el('p', { class: 'muted', text: `left out: ${cut.map(([k, n]) => `${n} ${k === 'results' ? 'rich outputs' : `bytes of ${k}`}`).join(', ')}` }));
    }
    if (result.egress_denied > 0) {
      parts.push(el('p', { class: 'muted', text: `network refused ${result.egress_denied} time(s): ${(result.egress_denied_to || []).join(', ')}` }));
    }
    this.result.replaceChildren(...parts);
  }

  stopped() {
    this.result.replaceChildren(
      el('p', { class: 'status status-stopped', role: 'alert', text: `stopped after ${this.elapsed()} ms` }),
      el('p', { class: 'muted', text: 'The connection was closed: the server killed every process of the run.' }));
  }

  failed(code, message) {
    this.result.replaceChildren(
      el('div', { class: 'error-kind error-request', role: 'alert' },
        el('strong', { class: 'error-type', text: code }),
        el('span', { text: ` — ${message}` })));
  }
}

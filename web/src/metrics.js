// Live figures from /metrics (Prometheus text): every gauge the server
// has (executions running and queued, pool sandboxes, kernels...), and the
// executions counted so far. Whatever gauges exist are shown, so a server
// with more or fewer of them needs no change here.
import { api, errorOf } from './api.js';
import { byId, el, formatBytes } from './dom.js';

export function parseMetrics(text) {
  const types = new Map();
  const help = new Map();
  const samples = [];
  for (const line of text.split('\n')) {
    let m;
    if ((m = /^# TYPE (\S+) (\S+)/.exec(line))) types.set(m[1], m[2]);
    else if ((m = /^# HELP (\S+) (.*)$/.exec(line))) help.set(m[1], m[2]);
    else if ((m = /^(runbox_[A-Za-z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line))) {
      const labels = {};
      for (const pair of (m[2] || '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
      samples.push({ name: m[1], labels, value: Number(m[3]) });
    }
  }
  return { types, help, samples };
}

function show(name, value) {
  return /_bytes$/.test(name) ? formatBytes(value) : String(value);
}

function figure(name, label, value, title) {
  return el('div', { class: 'figure', title, 'data-metric': name },
    el('span', { class: 'figure-value', text: value }),
    el('span', { class: 'figure-name', text: label }));
}

export function renderMetrics(container, text) {
  const { types, help, samples } = parseMetrics(text);
  const figures = [];
  const executions = samples.filter((s) => s.name === 'runbox_executions_total');
  if (executions.length || types.has('runbox_executions_total')) {
    const total = executions.reduce((sum, s) => sum + s.value, 0);
    figures.push(figure('runbox_executions_total', 'executions', String(total), help.get('runbox_executions_total') || ''));
  }
  const gauges = [...new Set(samples.filter((s) => types.get(s.name) === 'gauge').map((s) => s.name))];
  for (const name of gauges) {
    const label = name.replace(/^runbox_/, '').replace(/_bytes$/, '').replace(/_/g, ' ');
    const mine = samples.filter((s) => s.name === name);
    if (mine.length === 1 && Object.keys(mine[0].labels).length === 0) {
      figures.push(figure(name, label, show(name, mine[0].value), help.get(name) || ''));
      continue;
    }
    // A gauge by label (pool sandboxes by state): one figure, its values
    // in the order of their labels.
    const value = mine.map((s) => show(name, s.value)).join(' / ');
    const parts = mine.map((s) => Object.values(s.labels).join(' ')).join(' / ');
    figures.push(figure(name, `${label} ${parts}`, value, help.get(name) || ''));
  }
  if (figures.length === 0) figures.push(el('span', { class: 'muted', text: 'no figures from /metrics' }));
  container.replaceChildren(...figures);
}

export async function refreshMetrics() {
  const container = byId('metrics');
  try {
    const response = await api('/metrics');
    if (!response.ok) throw await errorOf(response);
    renderMetrics(container, await response.text());
  } catch (error) {
    container.replaceChildren(el('span', { class: 'muted', text: `figures: ${error.message}` }));
  }
}

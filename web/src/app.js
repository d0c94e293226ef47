// The playground of runbox serve: one page, no framework. Run streams an
// execution's NDJSON events into the output; Stop aborts the request, and
// the server kills a run whose client went away.
import { api, errorOf, onTokenAsked } from './api.js';
import { byId } from './dom.js';
import { createEditor, EXAMPLES } from './editor.js';
import { ImagePicker } from './images.js';
import { refreshMetrics } from './metrics.js';
import { RunView } from './output.js';
import { SessionsView } from './sessions.js';

const REFRESH_MS = 4000;

// The events of a streamed execution, one JSON object a line.
async function* streamEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.trim() !== '') yield JSON.parse(line);
    }
  }
  buffered += decoder.decode();
  if (buffered.trim() !== '') yield JSON.parse(buffered);
}

function start() {
  const languagePicker = byId('language');
  const images = new ImagePicker();
  const stateful = byId('stateful');
  const timeout = byId('timeout');
  const runButton = byId('run');
  const stopButton = byId('stop');
  const view = new RunView();
  const sessions = new SessionsView();
  let running = null; // the AbortController of the run in progress

  function setRunning(controller) {
    running = controller;
    runButton.disabled = controller !== null;
    stopButton.disabled = controller === null;
    document.body.classList.toggle('is-running', controller !== null);
  }

  async function run() {
    if (running) return;
    const controller = new AbortController();
    setRunning(controller);
    view.start();
    const sessionId = sessions.current();
    const request = { language: languagePicker.value, code: editor.code(), stream: true };
    if (stateful.checked) request.stateful = true;
    if (images.value()) request.image = images.value();
    const seconds = Number(timeout.value);
    if (Number.isFinite(seconds) && seconds > 0) request.timeout = seconds;
    const path = sessionId ? `/v1/sessions/${encodeURIComponent(sessionId)}/execute` : '/v1/execute';
    let finished = false;
    let kept = null; // the session a stateful one-off run was given
    // The figures show the run once the server has taken it.
    const figures = setTimeout(refreshMetrics, 300);
    try {
      const response = await api(path, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' },
        body: JSON.stringify(request),
        signal: controller.signal,
      });
      if (!response.ok) {
        const error = await errorOf(response);
        view.failed(error.code, error.message);
        return;
      }
      for await (const event of streamEvents(response)) {
        if (event.type === 'stdout' || event.type === 'stderr') view.write(event.type, String(event.data ?? ''));
        else if (event.type === 'display') view.display(event.kind, event.data);
        else if (event.type === 'result') {
          finished = true;
          view.finish(event);
          if (!sessionId && request.stateful && typeof event.session_id === 'string') kept = event.session_id;
        } else if (event.type === 'error') {
          finished = true;
          view.failed(event.error?.code || 'error', event.error?.message || 'the execution failed');
        }
      }
      if (!finished) view.failed('stream_ended', 'The answer ended before the result (the server stopped?).');
    } catch (error) {
      if (error.name === 'AbortError') view.stopped();
      else view.failed('request_failed', error.message);
    } finally {
      clearTimeout(figures);
      refreshMetrics();
      setRunning(null);
      if (sessionId) sessions.refreshFiles();
      // A stateful run's interpreter lives in a session, which the server
      // made for a one-off run: it becomes the page's session, so that the
      // next run finds its variables (and no session is made per run).
      sessions.refresh().then(() => {
        if (kept) sessions.choose(kept);
      });
    }
  }

  function stop() {
    if (!running) return false;
    running.abort();
    return true;
  }

  const editor = createEditor(byId('editor'), { language: languagePicker.value, onRun: run, onStop: stop });

  // A new language keeps the code unless it is another language's example.
  languagePicker.addEventListener('change', () => {
    const next = languagePicker.value;
    if (Object.values(EXAMPLES).includes(editor.code()) || editor.code().trim() === '') editor.setCode(EXAMPLES[next]);
    editor.setLanguage(next);
    images.fit(next);
  });
  runButton.addEventListener('click', run);
  stopButton.addEventListener('click', stop);

  // The same keys anywhere on the page; the editor handles them first.
  document.addEventListener('keydown', (event) => {
    if (event.defaultPrevented || !byId('token-dialog').hidden) return;
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      run();
    } else if (event.key === 'Escape' && stop()) {
      event.preventDefault();
    }
  });

  onTokenAsked(() => sessions.clear());

  // Figures and sessions refresh while the tab is seen.
  async function poll() {
    if (!document.hidden) await Promise.all([refreshMetrics(), sessions.refresh()]);
    setTimeout(poll, REFRESH_MS);
  }
  sessions.showFiles();
  images.fit(languagePicker.value);
  images.load();
  poll();
  editor.focus();
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();

// Sessions (their state, disk, kernels; create and remove) and the files
// of the chosen session (list, upload, download, delete). The session
// picker of the run bar is the one "current session" of the page.
import { api, apiJSON, errorOf, filePath } from './api.js';
import { byId, el, formatBytes, formatSeconds } from './dom.js';

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export class SessionsView {
  constructor() {
    this.picker = byId('session');
    this.table = byId('sessions').tBodies[0];
    this.message = byId('sessions-message');
    this.filesBody = byId('files').tBodies[0];
    this.filesMessage = byId('files-message');
    this.filesSession = byId('files-session');
    this.upload = byId('upload');
    this.filesRefresh = byId('files-refresh');
    this.sessions = [];
    this.armed = null; // the session whose Remove waits for a second press

    byId('sessions-refresh').addEventListener('click', () => this.refresh());
    this.filesRefresh.addEventListener('click', () => this.refreshFiles());
    byId('session-create').addEventListener('submit', (event) => {
      event.preventDefault();
      this.create(byId('session-new-id').value.trim());
    });
    this.picker.addEventListener('change', () => this.showFiles());
    this.upload.addEventListener('change', () => this.uploadChosen());
  }

  current() {
    return this.picker.value;
  }

  // Forgets what was shown (a refused token must show nothing).
  clear() {
    this.sessions = [];
    this.table.replaceChildren();
    this.filesBody.replaceChildren();
    this.fillPicker();
  }

  say(target, text, isError = false) {
    target.textContent = text;
    target.classList.toggle('error', isError);
  }

  async refresh() {
    try {
      const body = await apiJSON('/v1/sessions');
      this.sessions = Array.isArray(body.sessions) ? body.sessions : [];
      this.sessions.sort((a, b) => b.last_used - a.last_used);
      this.render();
      // What the last action said stays; only the list's own words change.
      if (this.sessions.length === 0) this.say(this.message, 'No sessions yet: create one, or run with a session.');
      else if (this.listSaid) this.say(this.message, '');
      this.listSaid = this.sessions.length === 0;
    } catch (error) {
      this.say(this.message, `cannot list sessions: ${error.message}`, true);
      this.listSaid = true;
    }
  }

  fillPicker() {
    const chosen = this.picker.value;
    if (this.sessions.some((s) => s.session_id === this.pending)) this.pending = null;
    const options = [el('option', { value: '', text: 'one-off' })];
    for (const session of this.sessions) {
      options.push(el('option', { value: session.session_id, text: session.session_id }));
    }
    // A session named by the person but not listed yet stays choosable.
    if (chosen && !this.sessions.some((s) => s.session_id === chosen) && this.pending === chosen) {
      options.push(el('option', { value: chosen, text: chosen }));
    }
    this.picker.replaceChildren(...options);
    this.picker.value = [...this.picker.options].some((o) => o.value === chosen) ? chosen : '';
    if (this.picker.value !== chosen) this.showFiles();
  }

  render() {
    // A refresh must not take the keyboard's place away.
    const focused = this.table.contains(document.activeElement)
      ? document.activeElement.getAttribute('aria-label') : null;
    const now = Date.now() / 1000;
    const rows = this.sessions.map((session) => {
      const id = session.session_id;
      const kernels = (session.kernels || []).map((k) =>
        el('li', { text: `${k.language} kernel ${k.state}, idle ${formatSeconds(k.idle_s)}, ${formatBytes(k.memory_bytes)}` }));
      const state = el('td', { class: 'session-state' },
        el('span', { class: session.running ? 'badge badge-running' : 'badge', text: session.running ? 'running' : 'idle' }),
        el('span', { class: 'muted', text: ` used ${formatSeconds(now - session.last_used)} ago` }),
        kernels.length ? el('ul', { class: 'kernels' }, kernels) : el('div', { class: 'muted', text: 'no kernel' }));
      const remove = el('button', {
        type: 'button',
        class: 'danger',
        'aria-label': `Remove session ${id}`,
        text: this.armed === id ? 'Really remove?' : 'Remove',
        onclick: () => this.remove(id),
      });
      const use = el('button', {
        type: 'button',
        'aria-label': `Use session ${id}`,
        text: this.current() === id ? 'In use' : 'Use',
        onclick: () => this.choose(id),
      });
      return el('tr', { 'data-session': id, class: this.current() === id ? 'chosen' : null },
        el('th', { scope: 'row', class: 'session-id', text: id }),
        state,
        el('td', { class: 'session-disk', text: formatBytes(session.disk_bytes) }),
        el('td', { class: 'actions' }, use, remove));
    });
    this.table.replaceChildren(...rows);
    if (focused) {
      [...this.table.querySelectorAll('button')].find((b) => b.getAttribute('aria-label') === focused)?.focus();
    }
    this.fillPicker();
  }

  choose(id) {
    this.picker.value = id;
    this.showFiles();
    this.render();
  }

  async create(id) {
    if (id && !ID_PATTERN.test(id)) {
      this.say(this.message, 'A session id is letters, digits, ".", "_" and "-" (at most 64), starting with a letter or digit.', true);
      return;
    }
    try {
      const body = await apiJSON('/v1/sessions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(id ? { session_id: id } : {}),
      });
      byId('session-new-id').value = '';
      this.pending = body.session_id;
      await this.refresh();
      this.choose(body.session_id);
      this.say(this.message, `session ${body.session_id} created`);
    } catch (error) {
      this.say(this.message, `cannot create the session: ${error.message}`, true);
    }
  }

  // Two presses: the first arms the button for a few seconds.
  async remove(id) {
    if (this.armed !== id) {
      this.armed = id;
      this.render();
      clearTimeout(this.disarm);
      this.disarm = setTimeout(() => { this.armed = null; this.render(); }, 5000);
      this.table.querySelector(`tr[data-session="${CSS.escape(id)}"] button.danger`)?.focus();
      return;
    }
    this.armed = null;
    clearTimeout(this.disarm);
    let said;
    try {
      const response = await api(`/v1/sessions/${encodeURIComponent(id)}`, { method: 'DELETE' });
      if (!response.ok) throw await errorOf(response);
      said = [`session ${id} removed`, false];
    } catch (error) {
      said = [`cannot remove ${id}: ${error.message}`, true];
    }
    await this.refresh();
    this.say(this.message, ...said);
  }

  showFiles() {
    const id = this.current();
    this.filesSession.textContent = id ? `of ${id}` : '';
    this.upload.disabled = !id;
    this.filesRefresh.disabled = !id;
    this.filesBody.replaceChildren();
    if (!id) {
      this.say(this.filesMessage, 'Choose a session to see its files.');
      return;
    }
    this.refreshFiles();
  }

  async refreshFiles() {
    const id = this.current();
    if (!id) return;
    try {
      const body = await apiJSON(`/v1/sessions/${encodeURIComponent(id)}/files`);
      if (id !== this.current()) return;
      const files = Array.isArray(body.files) ? body.files : [];
      this.filesBody.replaceChildren(...files.map((file) => this.fileRow(id, file)));
      this.say(this.filesMessage, files.length ? '' : 'No files in this session.');
    } catch (error) {
      this.say(this.filesMessage, `cannot list files: ${error.message}`, true);
    }
  }

  fileRow(id, file) {
    const actions = el('td', { class: 'actions' });
    if (file.type === 'file') {
      actions.append(el('button', {
        type: 'button', 'aria-label': `Download ${file.path}`, text: 'Download',
        onclick: () => this.download(id, file.path),
      }));
    }
    actions.append(el('button', {
      type: 'button', class: 'danger', 'aria-label': `Delete ${file.path}`, text: 'Delete',
      onclick: () => this.deleteFile(id, file.path),
    }));
    const size = file.type === 'directory' ? 'dir' : file.type === 'link' ? 'link' : formatBytes(file.size);
    return el('tr', { 'data-path': file.path },
      el('th', { scope: 'row', class: 'file-path', text: file.path }),
      el('td', { class: 'file-size', text: size }),
      actions);
  }

  // Fetched with the token, then handed to the browser as a blob.
  async download(id, path) {
    try {
      const response = await api(filePath(id, path));
      if (!response.ok) throw await errorOf(response);
      const url = URL.createObjectURL(await response.blob());
      const link = el('a', { href: url, download: path.split('/').pop() || 'download', hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (error) {
      this.say(this.filesMessage, `cannot download ${path}: ${error.message}`, true);
    }
  }

  async deleteFile(id, path) {
    try {
      const response = await api(filePath(id, path), { method: 'DELETE' });
      if (!response.ok) throw await errorOf(response);
      this.say(this.filesMessage, `${path} deleted`);
    } catch (error) {
      this.say(this.filesMessage, `cannot delete ${path}: ${error.message}`, true);
    }
    await this.refreshFiles();
    this.refresh();
  }

  async uploadChosen() {
    const id = this.current();
    const files = [...this.upload.files];
    if (!id || files.length === 0) return;
    const done = [];
    for (const file of files) {
      try {
        const response = await api(filePath(id, file.name), {
          method: 'PUT',
          headers: { 'Content-Type': 'application/octet-stream' },
          body: file,
        });
        if (!response.ok) throw await errorOf(response);
        done.push(file.name);
      } catch (error) {
        this.say(this.filesMessage, `cannot upload ${file.name}: ${error.message}`, true);
        this.upload.value = '';
        await this.refreshFiles();
        return;
      }
    }
    this.upload.value = '';
    await this.refreshFiles();
    this.say(this.filesMessage, `uploaded ${done.join(', ')}`);
    this.refresh();
  }
}

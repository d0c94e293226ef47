// The page's one way to the API: fetch with the bearer token of this tab.
// A 401 asks the person for a token (once, however many requests were
// refused together) and sends the request again with it.

const TOKEN_KEY = 'runbox.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let asking = null;
const askListeners = [];

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

// fn(refused) runs when the page starts asking: the views forget what an
// earlier token showed.
export function onTokenAsked(fn) {
  askListeners.push(fn);
}

function abortError() {
  return new DOMException('The request was stopped.', 'AbortError');
}

// While the form asks, the page behind it takes neither focus nor clicks.
function setBehind(inert) {
  for (const part of document.querySelectorAll('body > header, body > main')) part.inert = inert;
}

// Shows the form and resolves when a token was given. A refused token is
// forgotten at once, so that no later request sends it again.
function askToken(sent) {
  // A token given (or refused) since this request was sent: it goes again
  // with the token there is now, or asks with the others.
  if (sent !== token()) return Promise.resolve();
  if (asking) return asking;
  const refused = sent !== '';
  if (refused) sessionStorage.removeItem(TOKEN_KEY);
  for (const fn of askListeners) fn(refused);

  const dialog = document.getElementById('token-dialog');
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  const message = document.getElementById('token-message');
  message.textContent = refused
    ? 'Token refused: the server did not accept that token. Enter the right one.'
    : 'The server answered 401: enter its API token to go on.';
  message.classList.toggle('refused', refused);
  input.value = '';
  dialog.hidden = false;
  setBehind(true);
  input.focus();

  asking = new Promise((resolve) => {
    const submit = (event) => {
      event.preventDefault();
      const given = input.value.trim();
      if (!given) return;
      sessionStorage.setItem(TOKEN_KEY, given);
      form.removeEventListener('submit', submit);
      dialog.hidden = true;
      setBehind(false);
      asking = null;
      resolve();
    };
    form.addEventListener('submit', submit);
  });
  return asking;
}

// Waits for the token form, or fails at once when the caller stops.
function untilToken(sent, signal) {
  const given = askToken(sent);
  if (!signal) return given;
  if (signal.aborted) return Promise.reject(abortError());
  return new Promise((resolve, reject) => {
    signal.addEventListener('abort', () => reject(abortError()), { once: true });
    given.then(resolve);
  });
}

export async function api(path, options = {}) {
  for (;;) {
    const sent = token();
    const headers = new Headers(options.headers || {});
    if (sent) headers.set('Authorization', `Bearer ${sent}`);
    const response = await fetch(path, { ...options, headers });
    if (response.status !== 401) return response;
    await untilToken(sent, options.signal);
  }
}

// The error of a response that is not 2xx: the API's {"error": {code, message}}.
export async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, code, message);
}

export async function apiJSON(path, options = {}) {
  const response = await api(path, options);
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

// A file path inside a session, each part escaped for the URL.
export function filePath(sessionId, path) {
  const parts = path.split('/').filter((part) => part !== '').map(encodeURIComponent);
  return `/v1/sessions/${encodeURIComponent(sessionId)}/files/${parts.join('/')}`;
}

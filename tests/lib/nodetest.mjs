// Shared by the Node.js test suites (tests/mcp, tests/web): polling, and
// the cleanup of a runbox state directory that leaves no session mounted.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Waits until check() is true, polling; fails after timeoutMs.
export async function waitFor(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

// Removes what a test left in its state directory: sessions (each a
// loop-mounted disk as root) through runbox itself, then the directory.
// Returns the mounts that were still there, which the caller asserts empty.
export function cleanStateDir(runbox, stateDir) {
  const env = { ...process.env, RUNBOX_STATE_DIR: stateDir };
  let leftover = [];
  try {
    leftover = JSON.parse(execFileSync(runbox, ['sessions', 'list', '--json'], { env, encoding: 'utf8' }));
  } catch {
    // no state yet
  }
  for (const session of leftover) {
    try {
      execFileSync(runbox, ['sessions', 'rm', session.session_id, '--wait', '10'], { env });
    } catch {
      // reported below as a mount or a leftover session
    }
  }
  try {
    // As root the storage is an image mounted once: leave none behind.
    execFileSync(runbox, ['storage', 'unmount'], { env });
  } catch {
    // reported below as a mount
  }
  const mounts = execFileSync('findmnt', ['-rn', '-o', 'TARGET'], { encoding: 'utf8' })
    .split('\n')
    .filter((target) => target.startsWith(stateDir));
  if (mounts.length === 0) rmSync(stateDir, { recursive: true, force: true });
  return { sessions: leftover.map((s) => s.session_id), mounts };
}

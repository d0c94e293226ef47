// E2B's JavaScript SDK (e2b 2.51.0), unmodified, against runbox's envd: files (write one and
// many, read as text, bytes and a stream, list, makeDir, rename, remove, exists, getInfo, watchDir
// seeing a file made by a command), commands (foreground with callbacks, an exit code as
// CommandExitError, background with wait, kill, sendStdin, list, connect), a terminal (input,
// resize, output), setTimeout, pause and connect (files kept), kill. Its client differs from
// Python's where runbox must be exact: it needs every stream's end-of-stream frame, reads
// config.args of each listed process, and watches through the WatchDir stream. Run by
// tests/e2b/test_e2b_envd_js.py with only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set;
// prints one JSON line that the test checks.
import { CommandExitError, FileType, Sandbox } from 'e2b'

const sbx = await Sandbox.create({ envs: { FROM_CREATE: 'created' } })
const report = {}

// Files.
await sbx.files.write('notes/one.txt', 'first')
await sbx.files.write([{ path: 'notes/two.txt', data: 'second' }, { path: 'bin.dat', data: new Uint8Array([0, 1, 255]).buffer }])
report.text = await sbx.files.read('notes/one.txt')
report.bytes = Array.from(await sbx.files.read('bin.dat', { format: 'bytes' }))
const stream = await sbx.files.read('notes/two.txt', { format: 'stream' })
let streamed = ''
for await (const chunk of stream) streamed += new TextDecoder().decode(chunk)
report.stream = streamed
report.listed = (await sbx.files.list('notes')).map((e) => `${e.name}:${e.type}`).sort()
report.madeDir = [await sbx.files.makeDir('made/deep'), await sbx.files.makeDir('made/deep')]
const renamed = await sbx.files.rename('notes/one.txt', 'made/one.txt')
report.renamed = renamed.path
report.exists = [await sbx.files.exists('made/one.txt'), await sbx.files.exists('notes/one.txt')]
const info = await sbx.files.getInfo('made/one.txt')
report.info = { type: info.type === FileType.FILE, size: info.size }
await sbx.files.remove('made')
report.removed = await sbx.files.exists('made')

// A watch sees what a command makes.
const events = []
const watch = await sbx.files.watchDir('notes', (event) => events.push(`${event.name}:${event.type}`))
await sbx.commands.run('echo by-command > notes/by_command.txt')
for (let i = 0; i < 100 && !events.some((e) => e.startsWith('by_command.txt')); i++)
  await new Promise((resolve) => setTimeout(resolve, 50))
await watch.stop()
report.watched = events.some((e) => e.startsWith('by_command.txt'))

// Commands.
const out = []
const err = []
const ran = await sbx.commands.run('echo "$FROM_CREATE $MINE"; echo oops >&2', {
  envs: { MINE: 'mine' }, onStdout: (d) => out.push(d), onStderr: (d) => err.push(d),
})
report.foreground = { exitCode: ran.exitCode, stdout: ran.stdout, stderr: ran.stderr, seen: out.join('') + err.join('') }
try {
  await sbx.commands.run('echo before; exit 3')
  report.nonZero = 'no error'
} catch (e) {
  report.nonZero = e instanceof CommandExitError ? { exitCode: e.exitCode, stdout: e.stdout } : String(e)
}
const waited = await sbx.commands.run('sleep 0.2; echo waited', { background: true })
report.waited = (await waited.wait()).stdout
const reader = await sbx.commands.run('read line; echo "got $line"', { background: true, stdin: true })
await sbx.commands.sendStdin(reader.pid, 'hello\n')
report.stdin = (await reader.wait()).stdout
const sleeper = await sbx.commands.run('sleep 60', { background: true })
const listed = await sbx.commands.list()
report.listedSleeper = listed.some((p) => p.pid === sleeper.pid && p.cmd === '/bin/bash' && Array.isArray(p.args))
const ticker = await sbx.commands.run('for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.3; done', { background: true })
const attached = await sbx.commands.connect(ticker.pid)
report.connected = (await attached.wait()).stdout.includes('tick 6')
report.killed = [await sbx.commands.kill(sleeper.pid), await sbx.commands.kill(sleeper.pid)]

// A terminal.
let screen = ''
const terminal = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { screen += new TextDecoder().decode(d) } })
await sbx.pty.resize(terminal.pid, { cols: 100, rows: 30 })
await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size; exit 5\n'))
const ended = await terminal.wait().catch((e) => e)
report.pty = { size: screen.includes('30 100'), exitCode: ended.exitCode }

// Time, pause and connect, kill.
await sbx.setTimeout(120_000)
report.running = await sbx.isRunning()
await sbx.pause()
report.pausedRunning = await sbx.isRunning()
const resumed = await Sandbox.connect(sbx.sandboxId)
report.keptAfterPause = await resumed.files.read('notes/two.txt')
report.killed2 = [await resumed.kill(), await Sandbox.kill(sbx.sandboxId)]

console.log(JSON.stringify(report))

// E2B's JavaScript SDKs (e2b 2.51.0, @e2b/code-interpreter 2.8.0), unmodified, against runbox:
// create, list with a metadata filter, connect from a second client, runCode in each
// language, kill. Run by tests/e2b/test_e2b_sandboxes.py with only E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY set; prints one JSON line that the test checks.
import { Sandbox } from '@e2b/code-interpreter'
import { Sandbox as BaseSandbox } from 'e2b'

const tag = `js-${process.pid}`
const a = await Sandbox.create({ metadata: { tag, who: 'a' }, envs: { FROM: 'from-js' } })
const b = await Sandbox.create({ metadata: { tag, who: 'b' } })
await a.runCode("secret = 1\nopen('a.txt', 'w').write('a')")
const seen = await b.runCode("import os\n'secret' in globals(), os.path.exists('a.txt')")

const paginator = BaseSandbox.list({ query: { metadata: { tag, who: 'b' } } })
const listed = await paginator.nextItems()

const second = await Sandbox.connect(a.sandboxId)
await a.runCode('shared = 41')
const connected = await second.runCode('shared + 1')

const py = await second.runCode('1 + 1')
const js = await second.runCode('console.log(1 + 2)', { language: 'javascript' })
const sh = await second.runCode('echo $((2 + 2))', { language: 'bash' })
const env = await second.runCode('console.log(process.env.FROM)', { language: 'js' })

const killed = [await a.kill(), await BaseSandbox.kill(a.sandboxId)]
await b.kill()
const left = await BaseSandbox.list({ query: { metadata: { tag } } }).nextItems()

console.log(JSON.stringify({
  distinct: a.sandboxId !== b.sandboxId,
  isolated: seen.text === '(False, False)' ? 'false false' : seen.text,
  listed: listed.length === 1 && listed[0].sandboxId === b.sandboxId && listed[0].metadata.who === 'b',
  connected: connected.text,
  languages: [`py ${py.text}`, `js ${js.logs.stdout.join('').trim()}`, `sh ${sh.logs.stdout.join('').trim()}`],
  env: env.logs.stdout.join('').trim(),
  killed,
  gone: left.length === 0,
}))

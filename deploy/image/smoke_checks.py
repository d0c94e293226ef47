"""The smoke checks of runbox serve in its container (smoke-test.sh runs this inside, with the
port runbox listens on): health, runbox check, an execution per language, pandas, a stateful
session, and requirements installed from their registries. Exits 1 if any fails."""
import json, subprocess, sys, urllib.error, urllib.request
port = sys.argv[1]
base = f"http://127.0.0.1:{port}"
token = open("/run/secrets/runbox/token").read().strip()
failures = []

def call(path, body=None):
    request = urllib.request.Request(base + path, method="POST" if body is not None else "GET",
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def expect(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(what)

status, health = call("/healthz")
expect("/healthz answers ok", status == 200 and health["status"] == "ok", json.dumps(health))
check = json.loads(subprocess.run(["runbox", "--state-dir", "/var/lib/runbox", "check", "--json"],
                                  capture_output=True, text=True).stdout)
expect("runbox check: usable", check["usable"],
       "; ".join(f"{c['name']}: {c['detail'][:120]}" for c in check["checks"] if not c["ok"]) or "every check ok")
for language, code, wanted in [
        ("python", "import sys; print(sys.version_info[0])", "3\n"),
        ("javascript", "console.log(typeof process.version)", "string\n"),
        ("bash", "echo $((6 * 7))", "42\n"),
        ("python", "import pandas, numpy, matplotlib; print('batteries')", "batteries\n")]:
    status, result = call("/v1/execute", {"language": language, "code": code})
    expect(f"{language}: {code}", result.get("success") and result.get("output") == wanted,
           repr(result.get("output")) + " " + (result.get("error") or "")[-200:])
call("/v1/execute", {"language": "python", "code": "x = 41", "stateful": True, "session_id": "smoke"})
status, result = call("/v1/execute", {"language": "python", "code": "print(x + 1)", "stateful": True,
                                      "session_id": "smoke"})
expect("a stateful session keeps x", result.get("output") == "42\n", repr(result.get("output")))
for language, requirement, code, wanted in [
        ("python", "six", "import six; print(six.__name__)", "six\n"),
        ("javascript", "left-pad", "console.log(require('left-pad')('x', 3, '.'))", "..x\n")]:
    status, result = call("/v1/execute", {"language": language, "code": code, "requirements": [requirement]})
    expect(f"{language} requirement {requirement} installed", result.get("output") == wanted,
           repr(result.get("output")) + " " + (result.get("error") or "")[-300:])
sys.exit(1 if failures else 0)

"""TypeScript (issue 30): Node.js strips the types (not checked), then the code runs as
JavaScript does; one-off and stateful, with requirements as for JavaScript. Syntax that
stripping cannot remove (enum, namespace) is a SyntaxError result and nothing runs.

Type stripping needs Node.js 22.13 or newer: the default image's official Node.js has it;
the host's Debian Node.js 20 does not, so these cases run where the suite runs on an image."""
import json
import subprocess

import pytest

from conftest import ON_IMAGE_ENV, default_image_tree

pytestmark = pytest.mark.skipif(
    not ON_IMAGE_ENV, reason="TypeScript needs the default image's Node.js (the host's is 20)")


def host_node_strips_types():
    version = subprocess.run(["/usr/bin/node", "--version"], capture_output=True,
                             text=True).stdout.strip().lstrip("v")
    return tuple(int(part) for part in version.split(".")[:2]) >= (22, 13)


@pytest.mark.skipif(host_node_strips_types(), reason="the host's Node.js strips types itself")
def test_a_root_whose_node_cannot_strip_types_says_what_typescript_needs(runbox):
    result = runbox.run("typescript", "const n: number = 1", "--image", "host", "--no-network")
    assert result["error_type"] == "RuntimeError" and result["image"] == "host"
    assert "typescript needs Node.js 22.13 or newer" in result["error"], result["error"]


def test_types_are_stripped_and_the_code_runs(runbox):
    result = runbox.run("typescript", "const n: number = 41;\nconsole.log(n + 1)", "--no-network")
    assert result["success"], result["error"]
    assert result["output"] == "42\n" and result["language"] == "typescript"


@pytest.mark.parametrize("alias", ["ts", "tsx", "TypeScript"])
def test_aliases_name_typescript(runbox, alias):
    result = runbox.run(alias, "type T = { a: string };\nconst t: T = { a: 'x' };\n"
                        "console.log(t.a)", "--no-network")
    assert result["output"] == "x\n" and result["language"] == "typescript"


def test_interfaces_generics_and_casts_strip(runbox):
    code = ("interface Box<T> { value: T }\n"
            "function unbox<T>(b: Box<T>): T { return b.value; }\n"
            "const raw = JSON.parse('{\"value\": 7}') as Box<number>;\n"
            "let total!: number;\n"
            "total = unbox<number>(raw) * 6;\n"
            "console.log(total satisfies number)\n")
    result = runbox.run("typescript", code, "--no-network")
    assert result["success"], result["error"]
    assert result["output"] == "42\n"


def test_an_enum_is_a_syntax_error_with_its_line_and_nothing_runs(runbox):
    result = runbox.run("typescript", "console.log('ran');\nenum Color { Red }\n", "--no-network")
    assert result["error_type"] == "SyntaxError", result
    assert result["output"] == ""
    assert "enum is not supported" in result["error"]
    assert "<code>:2" in result["error"], result["error"]


STRIPPER = "/usr/lib/runbox/typescript/amaro.js"

# Each shape the stripper treats apart: generics, casts, non-null, this, overloads, a
# return type on a line of its own (the ")" moves), "as" before a line that opens with "["
# (a ";" goes in), and what it refuses (enum, a parameter property, <T>x, bad syntax).
STRIP_CORPUS = [
    "function g<T>(x: T): T { return x }",
    "let f = (a: number)\n  : number => a;",
    "let w = a as unknown as string[]\n[0]",
    "let q = obj!.a!; let s = q satisfies Y;",
    "function h(this: Window, a?: number) {}\nfunction over(a: string): void;",
    "import type {Y} from 'y';\ntype X = {a: 1};\nexport type {X};",
    "abstract class A implements I { abstract m(): void; declare y: string }",
    "let a = 1;\nenum E { A }",
    "class C { constructor(public z: number) {} }",
    "let v = <any>3;",
    "let x: = 3;\nfoo(",
]


def test_the_image_strips_with_node_own_stripper_read_from_a_file(runbox):
    """The image's copy of Node.js's stripper (its WebAssembly in a file, so that a fresh
    node need not parse a 3.8 MB base64 literal) strips every shape as Node.js's built-in
    one does, and a TypeScript one-off and kernel use it."""
    check = ("const M = require('module'), ours = require(%r);\n"
             "const one = (f) => { try { return f(); } catch (e) { return 'threw ' + e.code; } };\n"
             "const corpus = %s;\n"
             "for (const c of corpus) console.log(JSON.stringify([c,"
             " one(() => ours.transformSync(c, {mode: 'strip-only'}).code),"
             " one(() => M.stripTypeScriptTypes(c))]));") % (STRIPPER, json.dumps(STRIP_CORPUS))
    result = runbox.run("javascript", check, "--no-network")
    assert result["success"], result["error"]
    rows = [json.loads(line) for line in result["output"].splitlines()]
    assert [row[0] for row in rows] == STRIP_CORPUS
    codes = {"UnsupportedSyntax": "ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX",
             "InvalidSyntax": "ERR_INVALID_TYPESCRIPT_SYNTAX"}
    for source, ours, node in rows:
        if ours.startswith("threw "):
            assert codes.get(ours[6:]) == node[6:], (source, ours, node)
        else:
            assert ours == node, source
    assert sum(row[1].startswith("threw ") for row in rows) == 4, rows
    used = f"console.log(Object.keys(require.cache).includes({STRIPPER!r}))"
    # Loading it says nothing of its own: no warning of Node.js's reaches the output.
    one_off = runbox.run("typescript", used, "--no-network")
    assert one_off["output"] == "true\n" and one_off["error"] == "", one_off
    kernel = runbox.run("typescript", "const k: number = 1;\n" + used, "--stateful",
                        "--session", "ts-stripper", "--no-network")
    assert kernel["output"] == "true\n" and kernel["error"] == "", kernel


# A module whose one function ends without its result: invalid, refused at compile time.
INVALID_WASM = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 127, 3, 2, 1, 0, 10, 4, 1, 2, 0, 11]


def test_the_code_s_own_webassembly_is_validated_whole_after_the_stripper_loads(runbox):
    """The stripper's module is loaded with lazy validation (it was validated whole when the
    image was built); the flag must be off again for the code's own modules, one-off and
    kernel, or an invalid module would compile and fail only when called."""
    code = ("const used: boolean = Object.keys(require.cache).includes(%r);\n"
            "let told: string;\n"
            "try { new WebAssembly.Module(new Uint8Array(%s)); told = 'compiled'; }\n"
            "catch (e) { told = (e as Error).constructor.name; }\n"
            "console.log(used, told, WebAssembly.validate(new Uint8Array(%s)))"
            ) % (STRIPPER, INVALID_WASM, INVALID_WASM)
    assert runbox.run("typescript", code, "--no-network")["output"] == "true CompileError false\n"
    kernel = runbox.run("typescript", code, "--stateful", "--session", "ts-wasm", "--no-network")
    assert kernel["output"] == "true CompileError false\n", kernel


@pytest.mark.parametrize("source", [s for s in STRIP_CORPUS if "enum" in s or "public" in s
                                    or "<any>" in s or "x: =" in s])
def test_what_cannot_be_stripped_is_told_as_node_tells_it(runbox, source):
    """A one-off's SyntaxError is word for word what module.stripTypeScriptTypes says."""
    told = ("const M = require('module');\n"
            "try { M.stripTypeScriptTypes(%s, {sourceUrl: '<code>'}); }\n"
            "catch (e) { console.log(e.stack.split('\\n').filter(l => !/^\\s+at /.test(l))"
            ".join('\\n').trim()); }") % json.dumps(source)
    node = runbox.run("javascript", told, "--no-network")
    assert node["success"] and node["output"].startswith("<code>:"), node
    result = runbox.run("typescript", source, "--no-network")
    assert result["error_type"] == "SyntaxError", result
    assert result["error"] == node["output"], (result["error"], node["output"])


def test_a_type_error_is_not_checked(runbox):
    result = runbox.run("typescript", "const n: number = 'not a number' as any;\nconsole.log(n)",
                        "--no-network")
    assert result["success"] and result["output"] == "not a number\n"


def test_runtime_errors_keep_their_lines(runbox):
    code = "const a: number = 1;\nconst b: string = 'x';\nthrow new TypeError(`bad ${a}${b}`);\n"
    result = runbox.run("typescript", code, "--no-network")
    assert result["error_type"] == "RuntimeError" and result["exception"] == "TypeError"
    assert "<code>:3" in result["error"], result["error"]


def test_an_es_module_with_types(runbox):
    code = ("import path from 'node:path';\n"
            "const joined: string = path.join('a', 'b');\n"
            "await Promise.resolve();\n"
            "export const done: boolean = true;\n"
            "console.log(joined)\n")
    result = runbox.run("typescript", code, "--no-network")
    assert result["success"], result["error"]
    assert result["output"] == "a/b\n"


def test_a_stateful_session_keeps_typed_variables(runbox):
    def call(code):
        return runbox.run("typescript", code, "--stateful", "--session", "ts-state",
                          "--no-network")
    first = call("const base: number = 40;\nfunction add(x: number): number { return base + x; }")
    assert first["success"], first["error"]
    second = call("add(2)")
    assert second["success"] and second["stateful"], second
    assert json.loads(second["results"][0]["data"]["text/plain"]) == 42
    refused = call("enum E { A }")
    assert refused["error_type"] == "SyntaxError", refused
    assert call("add(1)")["results"][0]["data"]["text/plain"] == "41"


def test_the_typescript_and_javascript_kernels_of_a_session_are_apart(runbox):
    ts = runbox.run("typescript", "const only: string = 'ts'", "--stateful", "--session", "two",
                    "--no-network")
    assert ts["success"], ts["error"]
    js = runbox.run("javascript", "typeof only", "--stateful", "--session", "two", "--no-network")
    assert js["results"][0]["data"]["text/plain"] == "'undefined'"


def test_the_default_image_has_the_official_node(runbox):
    result = runbox.run("javascript", "console.log(process.version, !!process.release.lts)",
                        "--no-network")
    assert result["output"] == "v24.22.3 true\n", result
    images = json.loads(runbox.cli("images", "list", "--json").stdout)
    default = next(image for image in images if image["default"])
    assert default["node"].startswith("24.22.3 official"), default
    # Debian's nodejs package is not in it: the official build is.
    with open(f"{default_image_tree()}/var/lib/dpkg/status", encoding="utf-8") as status:
        assert "\nPackage: nodejs\n" not in "\n" + status.read()


def test_npm_requirements_work_as_for_javascript(runbox):
    checks = json.loads(runbox.cli("check", "--json").stdout)["checks"]
    if not next(c for c in checks if c["name"] == "network")["ok"]:
        pytest.skip("no network helper on this host for this user (see runbox check)")
    code = "import isNumber from 'is-number';\nconst seen: boolean = isNumber(5);\nconsole.log(seen)"
    result = runbox.run("typescript", code, "--require", "is-number@7.0.0")
    assert result["success"], result["error"]
    assert result["output"] == "true\n" and result["install"]["reused"] is False

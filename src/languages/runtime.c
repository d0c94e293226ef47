/* The languages runbox runs, as data. Adding a language means adding an
 * entry here: its interpreter, and a bootstrap that reads the code on fd 3,
 * checks its syntax in the same process without running any of it, reports
 * on fd 4, closes both, and only then runs the code. The report ends with
 * "R" when the code parsed; otherwise it is "S" and the interpreter's
 * message (just "S": the message is on stderr). One interpreter start per
 * execution.
 *
 * What fd 3 carries (rbx_code_payload): the execution's environment as
 * "NAME=VALUE\0" entries, an empty entry, then the code (bash's is counted
 * instead, see bash_bootstrap). A cold start has
 * its environment from execve already and sends no entries; a prepared
 * sandbox's interpreter (pool/pool.h) started before its execution was known,
 * so its bootstrap takes the environment from there, and steps into its
 * working directory again (the session's directory was mounted over it
 * meanwhile) before the code is even parsed. The same bootstrap text runs
 * both ways, so its command line is the same too. A prepared sandbox's fd 3
 * is a socket (a cold start's is a memfd): there the bootstrap first writes
 * "W", once its interpreter is up and about to wait for the code, so the
 * pool offers only sandboxes that have paid their interpreter's start (an
 * image's Node.js takes 100 ms and more to start, the host's 25). */
#include "languages/runtime.h"
#include "base/error.h"
#include "runbox.h"
#include "sandbox/mount.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Python: compile() first, so a syntax error anywhere runs nothing. The
 * excepthook hides the bootstrap's own frame from tracebacks. The report
 * stays open after "R" (close-on-exec: the program's children never get
 * it) as the channel of the program's rich outputs: when the code ends,
 * however it ends, matplotlib figures left open (shown or not: the
 * sandbox has no display, so show() keeps them) go there as PNG display
 * events, as a stateful call's do (kernels/python_kernel.py), by the code
 * in the bootstrap's next argument (python_show_figures). A program that
 * never imported pyplot pays one dictionary lookup. */
static const char python_bootstrap[] =
    "import sys,os\n"
    "def _rbx_warm(env):\n"
    "    os.environb.clear()\n"
    "    for e in env.split(b'\\0'):\n"
    "        k,_,v=e.partition(b'=');os.environb[k]=v\n"
    "    os.chdir('" RBX_SANDBOX_HOME "')\n"
    "    import site\n"
    "    p=site.getusersitepackages()\n"
    "    if site.ENABLE_USER_SITE and os.path.isdir(p) and p not in sys.path:\n"
    "        at=[sys.path.index(x) for x in site.getsitepackages() if x in sys.path]\n"
    "        "
    "site.addsitedir(p);sys.path.remove(p);sys.path.insert(min(at,default=len(sys.path)),p)\n"
    "def _rbx_load():\n"
    "    if os.fstat(3).st_mode&0o170000==0o140000:os.write(3,b'W')\n"
    "    f=os.fdopen(3,'rb');s=f.read();f.close()\n"
    "    if s[:1]==b'\\0':s=s[1:]\n"
    "    else:\n"
    "        env,_,s=s.partition(b'\\0\\0');_rbx_warm(env)\n"
    "    try:\n"
    "        c=compile(s,'<code>','exec')\n"
    "    except (SyntaxError,ValueError) as e:\n"
    "        import traceback\n"
    "        m=''.join(traceback.format_exception_only(type(e),e))\n"
    "        os.write(4,b'S'+m.encode('utf-8','replace'));os._exit(2)\n"
    "    os.write(4,b'R');os.set_inheritable(4,False)\n"
    "    return c\n"
    "def _rbx_hook(t,v,tb):\n"
    "    if tb is not None and tb.tb_frame.f_code.co_filename=='<string>':\n"
    "        tb=tb.tb_next\n"
    "        if v is not None:v.__traceback__=tb\n"
    "    sys.__excepthook__(t,v,tb)\n"
    "sys.excepthook=_rbx_hook\n"
    "_rbx_code=_rbx_load()\n"
    "del _rbx_load,_rbx_warm\n"
    "_rbx_show=sys.argv[1]\n"
    "sys.argv=['<code>']\n"
    "_rbx_g={'__name__':'__main__','__builtins__':__builtins__,'__doc__':None}\n"
    "try:\n"
    "    exec(_rbx_code,_rbx_g)\n"
    "finally:\n"
    "    if 'matplotlib.pyplot' in sys.modules:exec(_rbx_show)\n";

/* What Python's bootstrap runs when the code ends, if it imported pyplot:
 * the open figures as display events on the report (fd 4), when it is
 * still the report (a program may have closed it and opened a file
 * there). Passed as an argument, so that a run without plots does not
 * even compile it. */
static const char python_show_figures[] =
    "try:\n"
    "    if os.fstat(4).st_mode&0o170000==0o10000:\n"
    "        import io,json,base64\n"
    "        p=sys.modules['matplotlib.pyplot']\n"
    "        w=open(4,'wb',closefd=False)\n"
    "        for n in p.get_fignums():\n"
    "            f=p.figure(n);b=io.BytesIO();f.savefig(b,format='png',bbox_inches='tight')\n"
    "            d={'image/png':base64.b64encode(b.getvalue()).decode(),'text/plain':repr(f)}\n"
    "            w.write(json.dumps({'type':'display','kind':'display_data','data':d}).encode()"
    "+b'\\n')\n"
    "            w.flush()\n"
    "        p.close('all')\n"
    "except Exception as e:\n"
    "    sys.stderr.write(f'[runbox: cannot render the open figures: {e}]\\n')\n";

/* JavaScript: a prepared sandbox makes process.stdout and stderr while it
 * waits (and TypeScript's stripper, whose WebAssembly is compiled on first
 * use), since their modules are compiled on first use: 10 ms of an
 * execution on an image whose Node.js has no code cache, 3 on the host's).
 * Then, compile as a CommonJS function body first (with import()
 * working as in a main script; its experimental-feature warning is muted).
 * Code with import or export statements (or top-level await) is an ES
 * module: it is written next to the session's files, so that bare
 * specifiers resolve through node_modules as for a real file, and loaded
 * with import(), which parses the whole module before evaluating any of it.
 * The module's first statement marks that evaluation began (and removes
 * the file), so a parse error is told apart from a SyntaxError thrown
 * while running. Node gives a module's parse error its line only when it
 * prints the error itself, so that one is rethrown and reported as "S"
 * with the message on stderr.
 *
 * TypeScript runs on the same bootstrap: node started with
 * --experimental-strip-types (Node.js 22.13 or newer) has its types
 * stripped first by Node.js's own stripper, which keeps every position, so
 * lines stay true: the image's copy of it (RBX_TYPESCRIPT_STRIPPER_DIR),
 * with its errors told as module.stripTypeScriptTypes tells them, else
 * module.stripTypeScriptTypes itself. The copy's WebAssembly was validated
 * whole when the image was built, so it is loaded with its functions
 * validated as they are first compiled (the flag set for that module
 * only: the code's own modules are validated whole): 15 ms of the 35 that
 * loading it costs. Types are not checked; syntax it
 * cannot strip (enums, namespaces) is a SyntaxError with its line, as a
 * parse error. */
static const char javascript_bootstrap[] =
    "'use strict';"
    "const fs=require('fs'),vm=require('vm'),Module=require('module'),path=require('path');"
    "const emit=process.emitWarning;process.emitWarning=function(w,...a){"
    "if(/USE_MAIN_CONTEXT_DEFAULT_LOADER|stripTypeScriptTypes/.test(String(w)))return;return "
    "emit.call(this,w,...a);};"
    "const ts=process.execArgv.includes('--experimental-strip-types');"
    "let amaro;const strip=(s)=>{"
    "if(amaro===undefined){const v8=require('v8');v8.setFlagsFromString('--wasm-lazy-validation');"
    "try{amaro=require('" RBX_TYPESCRIPT_STRIPPER_DIR "/amaro.js');}"
    "catch{amaro=null;}finally{v8.setFlagsFromString('--no-wasm-lazy-validation');}}"
    "if(!amaro)return Module.stripTypeScriptTypes(s,{sourceUrl:'<code>'});let r;"
    "try{r=amaro.transformSync(s,{mode:'strip-only',sourceMap:false,filename:'<code>'});}"
    "catch(e){const c={UnsupportedSyntax:'UNSUPPORTED',InvalidSyntax:'INVALID'}[e&&e.code];"
    "if(!c)return Module.stripTypeScriptTypes(s,{sourceUrl:'<code>'});"
    "const x=new SyntaxError(e.message);x.stack=e.filename+':'+e.startLine+'\\n'+e.snippet+"
    "'\\nSyntaxError [ERR_'+c+'_TYPESCRIPT_SYNTAX]: '+e.message;throw x;}"
    "return r.code+'\\n\\n//# sourceURL=<code>';};"
    "if(fs.fstatSync(3).isSocket()){process.stdout;process.stderr;"
    "if(ts)strip('interface I{a:number}const f=<T,>(v:T):T=>v as T;');"
    "fs.writeSync(3,'W');}"
    "let src=fs.readFileSync(3,'utf8');fs.closeSync(3);"
    "if(src[0]==='\\0')src=src.slice(1);else{const end=src.indexOf('\\0\\0');"
    "for(const k of Object.keys(process.env))delete process.env[k];"
    "for(const e of src.slice(0,end).split('\\0')){const i=e.indexOf('=');"
    "process.env[e.slice(0,i)]=e.slice(i+1);}"
    "src=src.slice(end+2);process.chdir('" RBX_SANDBOX_HOME "');Module._initPaths();}"
    "const clean=(e)=>String(e&&e.stack||e).split('\\n').filter(l=>!/^\\s+at /.test(l))"
    ".join('\\n').trim()+'\\n';"
    "const syntax=(e)=>{fs.writeSync(4,'S'+clean(e));process.exit(2);};"
    "const ready=()=>{fs.writeSync(4,'R');fs.closeSync(4);};"
    "const esmHint=/Cannot use import statement|Unexpected token 'export'|await is only valid|"
    "import\\.meta/;"
    "if(ts){try{src=strip(src);}catch(e){syntax(e);}}"
    "let fn=null;"
    "try{fn=vm.compileFunction(src,['exports','require','module','__filename','__dirname'],"
    "{filename:'<code>',importModuleDynamically:vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER});}"
    "catch(e){if(!(e instanceof SyntaxError)||!esmHint.test(String(e.message)))syntax(e);}"
    "const file=path.join(process.cwd(),'<code>');"
    "if(fn){const m=new Module(file,null);m.filename=file;"
    "m.paths=Module._nodeModulePaths(process.cwd());"
    "process.mainModule=m;require.main=m;ready();"
    "fn.call(m.exports,m.exports,Module.createRequire(file),m,file,process.cwd());}"
    "else{const file=path.join(process.cwd(),'.runbox-main-'+process.pid+'.mjs');"
    "const url=require('url').pathToFileURL(file).href;"
    "const drop=()=>{try{fs.unlinkSync(file);}catch{}};let started=false;"
    "globalThis.__rbx_started=()=>{started=true;delete globalThis.__rbx_started;drop();ready();};"
    "fs.writeFileSync(file,'__rbx_started();'+src);"
    "import(url).catch((e)=>{if(!started){drop();if(e instanceof SyntaxError){"
    "fs.writeSync(4,'S');process.exitCode=2;setImmediate(()=>{throw e;});return;}"
    "ready();}process.exitCode=1;console.error(e);});}";

/* Bash: defining a function whose body is the code parses all of it
 * without running any of it, with bash's own messages and line numbers,
 * which go straight to the report after an "S" (no subshell: a fork less).
 * The definition is eval'd: sourcing it from a here-string (as before) cost
 * bash a pipe and an open of /dev/stdin, through the sandbox's /proc, about
 * 0.1 ms of every execution's CPU; bash says "eval: line N" instead of
 * "/dev/stdin: line N".
 * "SR" means it parsed; the code then runs with eval on line 1, so $LINENO
 * matches the code's lines. Its payload is counted (rbx_code_payload):
 * read -N takes a socket in blocks where a delimiter takes it a byte at a
 * time, and counts bytes only in the C locale (LC_ALL for that read). The
 * counts are kept where no exported variable can reach them: $1 and $2. */
static const char bash_bootstrap[] =
    "[ -S /dev/fd/3 ] && printf W >&3; "
    "IFS= LC_ALL=C read -r -N 20 -u 3 __rbx_code; "
    "set -- \"$((10#${__rbx_code:0:10}))\" \"$((10#${__rbx_code:10:10}))\"; __rbx_code=; "
    "if (($1)); then IFS= LC_ALL=C read -r -N \"$1\" -u 3 __rbx_code; "
    "builtin cd -- " RBX_SANDBOX_HOME "; unset OLDPWD; export OLDPWD; eval \"$__rbx_code\"; "
    "__rbx_code=; fi; "
    "(($2)) && IFS= LC_ALL=C read -r -N \"$2\" -u 3 __rbx_code; set --; exec 3<&-; printf S >&4; "
    "{ eval \"__rbx_check() { ${__rbx_code}\"$'\\n}'; } 2>&4 || exit 2; "
    "unset -f __rbx_check; printf R >&4; exec 4>&-; eval \"unset __rbx_code; $__rbx_code\"";

/* Node.js trusts the certificate authorities of the system's store
 * (--use-openssl-ca), which is the host's /etc/ssl in every sandbox (a
 * proxy's authority among them), as Debian's Node.js does by default; the
 * official build would otherwise trust only the list compiled into it.
 *
 * JavaScript's and TypeScript's installs: a package.json of its own makes
 * the environment npm's project root (npm would otherwise look for one up
 * to /, where /node_modules, the mount point executions see environments
 * at, would confuse it). npm honours NPM_CONFIG_REGISTRY and .npmrc. */
#define NPM_INSTALL                                                                                \
    "export NODE_OPTIONS=--use-openssl-ca; "                                                       \
    "cd /opt/runbox/env && echo '{\"private\":true}' > package.json"                              \
    " && exec /usr/bin/npm install --no-audit --no-fund --no-update-notifier"                      \
    " --loglevel=error -- \"$@\""

/* What JavaScript and TypeScript share: npm environments, which appear
 * at /node_modules, the last place Node looks from /home/user, for require
 * and import alike; and the kernel driver. */
#define NODE_ENVIRONMENTS                                                                          \
    .install = NPM_INSTALL, .env_inside = "/opt/runbox/env", .env_subdir = "node_modules",         \
    .env_run_at = "/node_modules", .normalize_spec = rbx_spec_npm
#define NODE_KERNEL_DRIVER                                                                         \
    .kernel_driver = rbx_kernel_javascript, .kernel_driver_size = &rbx_kernel_javascript_size,     \
    .kernel_dialect = RBX_KERNEL_JSON

/* V8's code range and the like (runtime.h: reserved_mb), measured: Node.js
 * 24 starts under 600 MiB of RLIMIT_DATA and not under 512. */
#define NODE_RESERVED_MB 256

static const rbx_runtime runtimes[] = {
    {
        .name = "python",
        .aliases = {"py", "python3"},
        .interpreter = "/usr/bin/python3",
        .extension = ".py",
        .version_code = "import sys; print(sys.version.split()[0])",
        .needs = "Python 3.8 or newer",
        .argv = {"python3", "-c", python_bootstrap, python_show_figures},
        .results_channel = true,
        .classify = rbx_classify_python,
        /* A venv that sees the system's site-packages, so a requirement that
         * Debian's python3-* packages already satisfy needs no download; pip
         * honours PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf... */
        .install = "/usr/bin/python3 -m venv --system-site-packages --without-pip /opt/runbox/env"
                   " && exec /usr/bin/python3 -m pip --python /opt/runbox/env/bin/python3 install"
                   " --no-input --disable-pip-version-check --progress-bar off"
                   " --no-warn-script-location -- \"$@\"",
        .env_inside = "/opt/runbox/env",
        .env_subdir = "",
        .env_run_at = "/opt/runbox/env",
        .env_interpreter = "/opt/runbox/env/bin/python3",
        .normalize_spec = rbx_spec_python,
        .kernel_argv = {"python3", "-c"},
        .kernel_driver = rbx_kernel_python,
        .kernel_driver_size = &rbx_kernel_python_size,
        .kernel_dialect = RBX_KERNEL_JSON,
    },
    {
        .name = "javascript",
        .aliases = {"js", "node", "nodejs"},
        .interpreter = "/usr/bin/node",
        .extension = ".js",
        .version_code = "console.log(process.version)",
        .needs = "Node.js 20.12 or newer",
        .reserved_mb = NODE_RESERVED_MB,
        .argv = {"node", "--use-openssl-ca", "-e", javascript_bootstrap},
        .classify = rbx_classify_javascript,
        NODE_ENVIRONMENTS,
        /* The REPL's own top-level await rewriting and its parser are Node's
         * internals. */
        .kernel_argv = {"node", "--expose-internals", "--use-openssl-ca", "-e"},
        NODE_KERNEL_DRIVER,
    },
    {
        .name = "bash",
        .aliases = {"sh", "shell"},
        .interpreter = "/bin/bash",
        .extension = ".sh",
        .version_code = "echo \"$BASH_VERSION\"",
        .needs = "bash 4 or newer",
        .argv = {"bash", "--norc", "--noprofile", "-c", bash_bootstrap, "bash"},
        .payload_counted = true,
        .classify = rbx_classify_bash,
        /* Interactive: SIGINT stops the command that runs and the shell
         * goes on to the next, as at a prompt. */
        .kernel_argv = {"bash", "--norc", "--noprofile", "--noediting", "-i"},
        .kernel_driver = rbx_kernel_bash,
        .kernel_driver_size = &rbx_kernel_bash_size,
        .kernel_dialect = RBX_KERNEL_BASH,
        .kernel_greeting = true,
        .kernel_interrupt_group = true,
    },
    /* TypeScript: JavaScript's interpreter, bootstrap, environments and
     * kernel, with types stripped first (see javascript_bootstrap). Its
     * environments are its own: a requirement list names one runtime's. */
    {
        .name = "typescript",
        .aliases = {"ts", "tsx"},
        .interpreter = "/usr/bin/node",
        .extension = ".ts",
        .version_code = "console.log(process.version)",
        .needs = "Node.js 22.13 or newer (its type stripping)",
        .too_old = "bad option: --experimental-strip-types",
        .reserved_mb = NODE_RESERVED_MB,
        .argv = {"node", "--use-openssl-ca", "--experimental-strip-types", "-e",
                 javascript_bootstrap},
        .classify = rbx_classify_javascript,
        NODE_ENVIRONMENTS,
        .kernel_argv = {"node", "--expose-internals", "--use-openssl-ca",
                        "--experimental-strip-types", "-e"},
        NODE_KERNEL_DRIVER,
    },
};

#define RUNTIME_COUNT (sizeof runtimes / sizeof runtimes[0])

const rbx_runtime *rbx_runtime_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < RUNTIME_COUNT; i++) {
        if (strcasecmp(name, runtimes[i].name) == 0)
            return &runtimes[i];
        for (size_t a = 0; a < 4 && runtimes[i].aliases[a]; a++)
            if (strcasecmp(name, runtimes[i].aliases[a]) == 0)
                return &runtimes[i];
    }
    return NULL;
}

size_t rbx_runtime_count(void)
{
    return RUNTIME_COUNT;
}

const char *rbx_runtime_name(size_t index)
{
    return index < RUNTIME_COUNT ? runtimes[index].name : NULL;
}

const char *rbx_runtime_canonical(const char *name)
{
    const rbx_runtime *runtime = rbx_runtime_find(name);
    return runtime ? runtime->name : NULL;
}

void rbx_runtime_env_bind(const rbx_runtime *runtime, const char *env_path, char *dir,
                          size_t dir_size, struct rbx_root_request *request,
                          const char **interpreter)
{
    snprintf(dir, dir_size, "%s/%s", env_path, runtime->env_subdir);
    request->binds[0] = (rbx_bind){.host = dir, .inside = runtime->env_run_at, .writable = false};
    request->bind_count = 1;
    if (runtime->env_interpreter)
        *interpreter = runtime->env_interpreter;
}

void rbx_runtime_names(char *out, size_t size)
{
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; i < rbx_runtime_count() && used < size; i++)
        used +=
            (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", rbx_runtime_name(i));
}

rbx_status rbx_unknown_language(rbx_error *err, const char *language)
{
    char names[128];
    rbx_runtime_names(names, sizeof names);
    return rbx_fail(err, RBX_EINVAL,
                    "unknown language '%.32s' (accepted: %s, and aliases py, python3, js, "
                    "node, nodejs, ts, tsx, sh, shell)",
                    language, names);
}

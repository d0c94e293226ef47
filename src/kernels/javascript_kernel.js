// runbox's JavaScript kernel: a live Node.js for a session's stateful calls.
// Reads one request per line (JSON) on fd 3 and answers on fd 3 with events,
// one JSON object per line: "display" for each rich output, then "done".
// Cells run as scripts in Node's own global context, as the REPL runs them,
// so top-level const, let, function and class declarations persist from one
// call to the next; top-level await is rewritten the REPL's own way
// (node --expose-internals), and static imports become dynamic ones.
(() => {
  'use strict';
  const fs = require('fs');
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const Module = require('module');
  const { processTopLevelAwait } = require('internal/repl/await');
  const acorn = require('internal/deps/acorn/acorn/dist/acorn');

  const channel = new net.Socket({ fd: 3, readable: true, writable: true });
  channel.setEncoding('utf8'); // a character split between reads stays whole
  const send = (event) => channel.write(`${JSON.stringify(event)}\n`);
  let count = 0;
  // The TypeScript kernel is this one, started with --experimental-strip-types.
  const typescript = process.execArgv.includes('--experimental-strip-types');
  if (typescript) {
    const emit = process.emitWarning;
    process.emitWarning = function quiet(warning, ...rest) {
      if (String(warning).includes('stripTypeScriptTypes')) return undefined;
      return emit.call(this, warning, ...rest);
    };
  }
  // Node.js's own stripper, the image's copy of it where there is one
  // (languages/runtime.h: RBX_TYPESCRIPT_STRIPPER_DIR), its errors told as
  // module.stripTypeScriptTypes tells them: loading that copy costs a
  // third of what the built-in one does. Its WebAssembly was validated
  // whole when the image was built (images/node_dist.c strips a sample with
  // it), so its functions are validated as they are first compiled rather
  // than all of them up front (a third of the load again); the flag is
  // set for that one module only, so the cells' own modules are still
  // refused whole at compile time when invalid.
  let amaro;
  const stripTypes = (code) => {
    if (amaro === undefined) {
      const v8 = require('v8');
      v8.setFlagsFromString('--wasm-lazy-validation');
      try {
        amaro = require('/usr/lib/runbox/typescript/amaro.js');
      } catch {
        amaro = null;
      } finally {
        v8.setFlagsFromString('--no-wasm-lazy-validation');
      }
    }
    if (!amaro) return Module.stripTypeScriptTypes(code);
    try {
      return amaro.transformSync(code, { mode: 'strip-only', sourceMap: false, filename: '<cell>' }).code;
    } catch (error) {
      const kind = { UnsupportedSyntax: 'UNSUPPORTED', InvalidSyntax: 'INVALID' }[error?.code];
      if (!kind) return Module.stripTypeScriptTypes(code);
      const told = new SyntaxError(error.message);
      told.stack = `${error.filename}:${error.startLine}\n${error.snippet}\n`
        + `SyntaxError [ERR_${kind}_TYPESCRIPT_SYNTAX]: ${error.message}`;
      throw told;
    }
  };
  let interrupt = null; // rejects the running cell's await when SIGINT comes

  // What a cell's code sees, as in a CommonJS module in /home/user.
  const file = path.join(process.cwd(), '<cell>');
  globalThis.require = Module.createRequire(file);
  globalThis.module = new Module(file, null);
  globalThis.exports = globalThis.module.exports;
  globalThis.__filename = file;
  globalThis.__dirname = process.cwd();

  const mimeBundle = (value) => {
    if (value && typeof value === 'object' && typeof value[Symbol.for('runbox.mimebundle')] === 'function')
      return value[Symbol.for('runbox.mimebundle')]();
    return { 'text/plain': util.inspect(value, { colors: false, depth: 4 }) };
  };
  // display(value) shows it; display(bundle, { raw: true }) shows a MIME
  // bundle as it is, e.g. display({ 'text/html': '<b>hi</b>' }, { raw: true }).
  globalThis.display = (value, options = {}) => {
    send({ type: 'display', kind: 'display_data', data: options.raw ? value : mimeBundle(value) });
  };

  // import x from 'm' and the like become awaited dynamic imports: a script
  // cannot hold static imports, and the declarations must stay top level.
  const rewriteImports = (code) => {
    let tree;
    try {
      tree = acorn.parse(code, {
        ecmaVersion: 'latest', sourceType: 'module', allowAwaitOutsideFunction: true,
        allowReturnOutsideFunction: true, allowHashBang: true,
      });
    } catch {
      return code; // the script's own compile reports what is wrong
    }
    const edits = [];
    for (const node of tree.body) {
      if (node.type === 'ImportDeclaration') {
        const source = JSON.stringify(node.source.value);
        const parts = [];
        let named = [];
        for (const spec of node.specifiers) {
          if (spec.type === 'ImportDefaultSpecifier') parts.push(`${spec.local.name} = __rbx_m.default`);
          else if (spec.type === 'ImportNamespaceSpecifier') parts.push(`${spec.local.name} = __rbx_m`);
          else named.push(spec.imported.name === spec.local.name ? spec.local.name
            : `${spec.imported.type === 'Literal' ? JSON.stringify(spec.imported.value) : spec.imported.name}: ${spec.local.name}`);
        }
        if (named.length) parts.push(`{ ${named.join(', ')} } = __rbx_m`);
        const text = parts.length
          ? `const ${parts.join(', ').replace(/__rbx_m/g, `(await import(${source}))`)};`
          : `await import(${source});`;
        edits.push([node.start, node.end, text]);
      } else if (node.type === 'ExportNamedDeclaration' && node.declaration) {
        edits.push([node.start, node.declaration.start, '']);
      } else if (node.type === 'ExportDefaultDeclaration') {
        edits.push([node.start, node.declaration.start, '']);
      }
    }
    for (const [start, end, text] of edits.reverse()) code = code.slice(0, start) + text + code.slice(end);
    return code;
  };

  // A stack without this kernel's frames (vm's, the driver's, Node's own).
  const ownFrame = /^\s+at .*(node:vm|\[eval\]|node:internal|sigintHandlersWrap)/;
  const describe = (error) => {
    if (error && typeof error === 'object') {
      const name = error.name || (error.constructor && error.constructor.name) || 'Error';
      const stack = typeof error.stack === 'string'
        ? error.stack.split('\n').filter((line) => !ownFrame.test(line)).join('\n') : '';
      return { name, text: stack || `${name}: ${error.message}` };
    }
    return { name: 'Error', text: `Uncaught ${util.inspect(error)}` };
  };

  // The call is taken: its mark opens stdout and stderr, then "start" on the
  // channel; what came before belongs to no call (kernels/wire.h).
  const start = (request) => {
    const mark = `\x1erunbox:${Number(request.id)}\x1e`;
    for (const fd of [1, 2]) {
      try { fs.writeSync(fd, mark); } catch { /* a closed descriptor: nothing to mark */ }
    }
    send({ type: 'start', id: request.id });
  };

  const execute = async (request) => {
    start(request);
    count += 1;
    const done = { type: 'done', id: request.id, execution_count: count, status: 'ok', exception: null };
    if (request.cwd) {  // a fresh kernel's first call: where it was asked to start
      try {
        process.chdir(request.cwd);
      } catch (error) {
        process.stderr.write(`[runbox: cannot start in ${request.cwd}: ${error.code || error.message}]\n`);
      }
    }
    const env = request.env || {};
    const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
    Object.assign(process.env, env);
    try {
      let code = request.code;
      if (typescript) {
        // Types stripped, every position kept; what cannot be stripped
        // (an enum, a namespace) is the cell's syntax error, with its line.
        // (Without a sourceUrl: the comment it appends would end up inside
        // the wrapper that top-level await gets; the error's line is named.)
        try {
          code = stripTypes(code);
        } catch (error) {
          if (typeof error.stack === 'string') error.stack = error.stack.replace(/^:(\d+)\n/, '<cell>:$1\n');
          process.stderr.write(`${describe(error).text}\n`);
          return { ...done, status: 'syntax', exception: describe(error).name };
        }
      }
      code = rewriteImports(code);
      const wrapped = processTopLevelAwait(code);
      let script;
      try {
        script = new vm.Script(wrapped || code, {
          filename: '<cell>',
          importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
        });
      } catch (error) {
        process.stderr.write(`${describe(error).text}\n`);
        return { ...done, status: 'syntax', exception: describe(error).name };
      }
      try {
        let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
        if (wrapped) {
          const stopped = new Promise((resolve, reject) => { interrupt = reject; });
          value = (await Promise.race([value, stopped])).value;
        }
        if (value !== undefined) {
          globalThis._ = value;
          send({ type: 'display', kind: 'execute_result', data: mimeBundle(value) });
        }
      } catch (error) {
        const interrupted = error && (error.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED' || error === 'interrupted');
        process.stderr.write(`${interrupted ? 'Error: interrupted' : describe(error).text}\n`);
        return { ...done, status: interrupted ? 'interrupted' : 'error', exception: interrupted ? 'Interrupted' : describe(error).name };
      } finally {
        interrupt = null;
      }
      return done;
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  };

  // SIGINT: breakOnSigint stops a busy cell; one that awaits is let go.
  process.on('SIGINT', () => { if (interrupt) interrupt('interrupted'); });
  // An error in a callback after its cell ended is shown, and the kernel lives on.
  process.on('uncaughtException', (error) => process.stderr.write(`${describe(error).text}\n`));
  process.on('unhandledRejection', (error) => process.stderr.write(`${describe(error).text}\n`));

  let pending = '';
  let queue = Promise.resolve();
  channel.on('data', (chunk) => {
    pending += chunk;
    let newline;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      queue = queue.then(() => execute(JSON.parse(line))).then(send);
    }
  });
  channel.on('end', () => process.exit(0));
  fs.writeSync(4, 'R'); // ready: runbox's report descriptor
  fs.closeSync(4);
})();

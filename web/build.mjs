// Builds the playground into OUTDIR: index.html, app.js (one minified
// bundle of app.js and CodeMirror) and app.css; the server embeds the three.
//   node web/build.mjs OUTDIR
import {
  appendFileSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const web = path.dirname(fileURLToPath(import.meta.url));
const src = path.join(web, 'src');

function fail(message) {
  console.error(`web/build.mjs: ${message}`);
  process.exit(1);
}

const outArg = process.argv[2];
if (!outArg || process.argv.length > 3) fail('usage: node web/build.mjs OUTDIR');
const outDir = path.resolve(outArg);

if (!existsSync(path.join(web, 'node_modules', 'esbuild'))) {
  fail(`${path.join(web, 'node_modules')} is missing: run \`npm ci --prefix web\` (or \`make deps\`) first`);
}

// The page must load exactly the two files the server serves beside it,
// and nothing inline (the server's Content-Security-Policy forbids it).
const html = readFileSync(path.join(src, 'index.html'), 'utf8');
for (const needed of ['src="/playground/app.js"', 'href="/playground/app.css"']) {
  if (!html.includes(needed)) fail(`src/index.html must reference ${needed}`);
}
if (/<script(?![^>]*\bsrc=)[^>]*>/i.test(html) || /\son[a-z]+\s*=/i.test(html)) {
  fail('src/index.html has an inline script or event handler, which the CSP forbids');
}

const esbuild = await import(pathToFileURL(path.join(web, 'node_modules', 'esbuild', 'lib', 'main.js')).href);
mkdirSync(outDir, { recursive: true });
let metafile;
try {
  ({ metafile } = await esbuild.build({
    absWorkingDir: web,
    entryPoints: [path.join(src, 'app.js')],
    outfile: path.join(outDir, 'app.js'),
    bundle: true,
    format: 'iife',
    target: 'es2020',
    minify: true,
    sourcemap: false,
    legalComments: 'none', // the packages' notices go at the end, whole (below)
    metafile: true,
    logLevel: 'warning',
  }));
} catch {
  fail('esbuild failed (see above)');
}

// The bundle is a copy of every package it took code from, so it carries
// each one's licence, as their licences (MIT) ask: name, version, licence
// and the LICENSE file's text, in one comment at the end.
const packages = new Map();
for (const input of Object.keys(metafile.inputs)) {
  const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (match) packages.set(match[1], path.join(web, match[1]));
}
const notices = [...packages.values()].sort().map((dir) => {
  const meta = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((name) => /^licen[cs]e/i.test(name));
  if (!file) fail(`${meta.name} has no LICENSE file to bundle with it`);
  const text = readFileSync(path.join(dir, file), 'utf8').replaceAll('*/', '* /').trim();
  return `${meta.name} ${meta.version} (${meta.license})\n\n${text}`;
});
appendFileSync(path.join(outDir, 'app.js'),
  `/*! The playground bundles these packages, under their licences:\n\n${notices.join('\n\n---\n\n')}\n*/\n`);
copyFileSync(path.join(src, 'index.html'), path.join(outDir, 'index.html'));
copyFileSync(path.join(src, 'app.css'), path.join(outDir, 'app.css'));

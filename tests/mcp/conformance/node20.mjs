// The conformance suite imports fs.globSync (Node.js 22) for its tier-check
// command only; Debian 12's Node.js 20 lacks it, so the import of 'fs' from
// the suite resolves to fs plus a globSync that says so. The server
// scenarios never call it.
import { register } from 'node:module';

register('./node20-hooks.mjs', import.meta.url);

// node:fs, and the globSync of Node.js 22 that Node.js 20 lacks.
export * from 'node:fs';
export { default } from 'node:fs';

export function globSync() {
  throw new Error('fs.globSync needs Node.js 22 (used by the suite\'s tier-check only)');
}

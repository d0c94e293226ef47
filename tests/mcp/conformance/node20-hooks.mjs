// Module hooks for node20.mjs: 'fs' imported by the conformance suite only.
const SHIM = new URL('./node20-fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier === 'fs' && context.parentURL?.includes('/@modelcontextprotocol/conformance/')) {
    return { url: SHIM, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

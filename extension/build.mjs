// Bundles src/extension.ts and its dependencies (vscode-languageclient) into dist/extension.js.
// `vscode` stays external: VS Code provides it at run time.
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

const context = await esbuild.context({
  entryPoints: ['src/extension.ts'],
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  outfile: 'dist/extension.js',
  external: ['vscode'],
  sourcemap: !production,
  minify: production,
  logLevel: 'info',
});
if (watch) {
  await context.watch();
} else {
  await context.rebuild();
  await context.dispose();
}

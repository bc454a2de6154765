// Every TypeScript block of README.md and docs/*.md, type-checked against the
// built package (dist/lib/esm, imported by its name, as an app would import it).
//
//   node docs/check/snippets.mjs      (after npm run build:lib)
//
// A block is a file of its own, with its imports; a block of a VitePress code
// group (```ts [its tab's title]) too. Rarely, the HTML comment on the line
// before a block changes that:
//   <!-- snippet: prelude=NAME -->  compile it after docs/check/preludes/NAME.ts
//                                   (or NAME,NAME: each, in order)
//                                   (declarations a fragment leans on)
//   <!-- snippet: in=PATH -->       PATH (a consumer fixture's file, which CI
//                                   runs) holds the block verbatim; PATH is
//                                   compiled, beside a copy of its app
//   <!-- snippet: skip REASON -->   not TypeScript on its own (a fragment of a
//                                   config file, say); the reason is printed
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const out = join(root, 'docs/.snippets');
const sources = ['README.md', ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

/** The ts blocks of a Markdown file: their text (list indentation taken off), first line, and the directive above them. */
function blocks(file) {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const found = [];
  for (let at = 0; at < lines.length; at++) {
    const open = /^( *)```(ts|typescript)(\s+\[[^\]]*\])?\s*$/.exec(lines[at]);
    if (!open) continue;
    const indent = open[1];
    const end = lines.findIndex((line, index) => index > at && line === `${indent}\`\`\``);
    if (end < 0) throw new Error(`${file}:${at + 1}: a ts block that never closes`);
    const directive = /<!--\s*snippet:\s*(prelude=|in=|skip\b)\s*(.*?)\s*-->/.exec(lines[at - 1] ?? '');
    const text = lines.slice(at + 1, end).map((line) => line.slice(indent.length)).join('\n') + '\n';
    found.push({ file, line: at + 2, text, kind: directive?.[1].replace('=', ''), value: directive?.[2] });
    at = end;
  }
  return found;
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const all = sources.flatMap(blocks);
const problems = [];
const skipped = [];
const compiled = new Map(); // generated file -> { file, line, offset }
const fixtureFiles = new Set();
let excerpts = 0;

all.forEach((block, index) => {
  const name = `${block.file.replace(/[/.]/g, '_')}_${block.line}`;
  if (block.kind === 'skip') return skipped.push(`${block.file}:${block.line} (${block.value})`);
  if (block.kind === 'in') {
    const target = block.value;
    const fixture = /^test\/fixtures\/[^/]+/.exec(target)?.[0];
    if (!fixture || !existsSync(join(root, target))) return problems.push(`${block.file}:${block.line}: in=${target} names no consumer fixture's file`);
    if (!readFileSync(join(root, target), 'utf8').includes(block.text)) return problems.push(`${block.file}:${block.line}: the block is not in ${target} as it stands; copy it from there`);
    const copy = join(out, fixture);
    if (!existsSync(copy)) for (const part of ['src', 'test']) if (existsSync(join(root, fixture, part))) cpSync(join(root, fixture, part), join(copy, part), { recursive: true });
    // The whole file is compiled, beside the rest of its app: the block is an excerpt of it.
    excerpts++;
    return fixtureFiles.add(join(out, target));
  }
  const prelude = block.kind === 'prelude' ? block.value.split(',').map((name) => readFileSync(join(root, 'docs/check/preludes', `${name.trim()}.ts`), 'utf8')).join('') : '';
  const generated = join(out, `${name}.ts`);
  writeFileSync(generated, prelude + block.text);
  compiled.set(generated, { ...block, offset: prelude.split('\n').length - 1 });
});

// Bundler resolution takes the package's exports map (its own name included)
// and the fixtures' extensionless imports alike; the rest is the repository's tsconfig.
writeFileSync(
  join(out, 'tsconfig.json'),
  JSON.stringify({
    compilerOptions: {
      module: 'esnext',
      moduleResolution: 'bundler',
      moduleDetection: 'force',
      target: 'es2023',
      lib: ['es2023'],
      types: ['node', 'vitest/globals'],
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      strict: true,
      strictPropertyInitialization: false,
      skipLibCheck: true,
      noEmit: true,
    },
    include: ['*.ts'],
    files: [...fixtureFiles].map((file) => relative(out, file)),
  }),
);

if (!existsSync(join(root, 'dist/lib/esm/src/idempotency/index.d.ts'))) throw new Error('no built package: run `npm run build:lib` first');
const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(out, 'tsconfig.json'), '--pretty', 'false'], { cwd: root, encoding: 'utf8' });
for (const line of tsc.stdout.split('\n').filter(Boolean)) {
  const match = /^(.+?)\((\d+),(\d+)\): (.*)$/.exec(line);
  const source = match && compiled.get(join(root, match[1]));
  if (!source) {
    problems.push(line);
    continue;
  }
  const at = Number(match[2]) - source.offset;
  problems.push(at > 0 ? `${source.file}:${source.line + at - 1}:${match[3]}: ${match[4]}` : `${source.file}:${source.line} (its prelude ${source.value}, line ${match[2]}): ${match[4]}`);
}
if (tsc.status !== 0 && problems.length === 0) problems.push(`tsc exited ${tsc.status}: ${tsc.stderr}`);

for (const skip of skipped) console.log(`snippet not compiled: ${skip}`);
if (problems.length > 0) {
  console.error(`docs snippets: ${problems.length} problems in ${compiled.size} blocks:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`docs snippets: ${compiled.size + excerpts} TypeScript blocks of README.md and docs/ compile against the built package, ${excerpts} of them as excerpts of ${fixtureFiles.size} consumer-fixture files (${skipped.length} not compiled)`);

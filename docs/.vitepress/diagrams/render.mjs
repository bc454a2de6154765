// The Mermaid diagrams of docs/*.md as SVG files the site shows, so the site
// ships no Mermaid (some 3 MB of scripts) and builds without bundling it.
// GitHub renders the same ```mermaid blocks itself; the blocks stay the source.
//
//   npm run docs:diagrams      (after changing a diagram; commit the SVGs)
//
// Each SVG is named by the hash of its block (diagrams/names.mjs), so the site
// build fails on a block whose SVG was not rendered, and never shows an old
// one. Rendered by the mermaid package in headless Chromium (Debian's, or the
// one CHROMIUM_PATH names), driven by playwright-core, as docs/check/site.mjs is.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { diagramFile } from './names.mjs';

const docs = fileURLToPath(new URL('../..', import.meta.url));
const out = join(docs, 'public/diagrams');
const mermaidScript = createRequire(import.meta.url).resolve('mermaid/dist/mermaid.min.js');

/** The ```mermaid blocks of a page, as markdown-it hands them to the fence renderer (list indentation taken off). */
function diagramsOf(file) {
  const lines = readFileSync(join(docs, file), 'utf8').split('\n');
  const found = [];
  for (let at = 0; at < lines.length; at++) {
    const open = /^( *)```mermaid\s*$/.exec(lines[at]);
    if (!open) continue;
    const end = lines.findIndex((line, index) => index > at && line === `${open[1]}\`\`\``);
    found.push(lines.slice(at + 1, end).map((line) => line.slice(open[1].length)).join('\n') + '\n');
    at = end;
  }
  return found;
}

const sources = readdirSync(docs).filter((name) => name.endsWith('.md')).flatMap(diagramsOf);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  const page = await browser.newPage();
  await page.setContent('<!doctype html><html><body></body></html>');
  await page.addScriptTag({ path: mermaidScript });
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  for (const source of sources) {
    const name = diagramFile(source);
    const svg = await page.evaluate(async ([id, text]) => {
      // Neutral colours on a white ground: the site shows the file as an image, in light and dark mode alike.
      window.mermaid.initialize({ startOnLoad: false, theme: 'neutral', securityLevel: 'strict', themeVariables: { background: '#ffffff' } });
      return (await window.mermaid.render(id, text)).svg;
    }, [`diagram-${name.replace('.svg', '')}`, source]);
    writeFileSync(join(out, name), `${svg}\n`);
    console.log(`docs/public/diagrams/${name}`);
  }
} finally {
  await browser.close();
}

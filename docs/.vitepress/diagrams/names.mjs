import { createHash } from 'node:crypto';

/** The file a Mermaid block's SVG is rendered to: named by its source, so an edited block needs a new render. */
export function diagramFile(source) {
  return `${createHash('sha256').update(source).digest('hex').slice(0, 16)}.svg`;
}

/** The block's accessible title (`accTitle: ...`), for the image's alt text. */
export function diagramTitle(source) {
  return /^\s*accTitle:\s*(.+)$/m.exec(source)?.[1].trim() ?? 'Diagram';
}

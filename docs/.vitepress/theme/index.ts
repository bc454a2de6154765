import { useRoute } from 'vitepress';
import DefaultTheme from 'vitepress/theme';
import { nextTick, onMounted, watch } from 'vue';

/** Renders the page's Mermaid diagrams, loading Mermaid only on pages that have one. */
async function renderDiagrams(): Promise<void> {
  const nodes = [...document.querySelectorAll<HTMLElement>('pre.mermaid:not([data-processed])')];
  if (nodes.length === 0) return;
  const { default: mermaid } = await import('mermaid');
  mermaid.initialize({ startOnLoad: false, theme: document.documentElement.classList.contains('dark') ? 'dark' : 'default' });
  await mermaid.run({ nodes });
}

export default {
  extends: DefaultTheme,
  setup() {
    const route = useRoute();
    onMounted(renderDiagrams);
    watch(() => route.path, () => nextTick(renderDiagrams));
  },
};

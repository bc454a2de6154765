/**
 * A heading's anchor as GitHub makes it (lower case, punctuation dropped,
 * each space a hyphen), so `page.md#anchor` works on GitHub and on the site.
 */
export function githubSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

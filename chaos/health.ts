/** Whether the instance at `url` answers `/health` with 200 within 2 s: up, and its database reachable. */
export async function isHealthy(url: string): Promise<boolean> {
  return fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) }).then(
    async (response) => (await response.arrayBuffer(), response.ok),
    () => false,
  );
}

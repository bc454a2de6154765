import pg from 'pg';

/**
 * Runs `work` on a connection of its own, closed afterwards. Kept out of the
 * kit's entry point, so that its declarations do not import `pg`, whose types
 * apps rarely install; the demo and the benches use it too.
 */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

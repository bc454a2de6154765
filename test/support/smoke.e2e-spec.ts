import pg from 'pg';
test('db', async () => { const c = new pg.Client(process.env.DATABASE_URL); await c.connect(); const r = await c.query('select version()'); console.log(r.rows[0]); await c.end(); });

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type FakePaymentProvider, startFakePaymentProvider } from '../src/demo/payment-provider/fake-payment-provider.js';
import { setFault } from './support/demo.js';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Debian's Chromium, or the one CHROMIUM_PATH names; playwright-core drives it and never downloads a browser. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAS_CHROMIUM = existsSync(CHROMIUM);
if (!HAS_CHROMIUM) console.log(`admin-page.e2e-spec: skipped, no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);

/** Where to keep the admin guide's screenshots (docs/admin.md), when set: `ADMIN_SCREENSHOTS=docs/admin npx vitest run test/admin-page.e2e-spec.ts`. */
const SCREENSHOTS = process.env.ADMIN_SCREENSHOTS;

/**
 * The part of playwright-core this suite drives. It is loaded when the suite
 * runs, so that compiling the project never needs it (the build compiles
 * the tests too).
 */
interface Locator {
  click(): Promise<void>;
  check(): Promise<void>;
  fill(value: string): Promise<void>;
  waitFor(): Promise<void>;
  textContent(): Promise<string | null>;
  isDisabled(): Promise<boolean>;
}
interface Page {
  goto(url: string): Promise<unknown>;
  on(event: 'dialog', listener: (dialog: { message(): string; accept(): Promise<void> }) => void): void;
  route(url: string, handler: (route: { abort(): Promise<void> }) => void): Promise<void>;
  getByLabel(text: string | RegExp, options?: { exact?: boolean }): Locator;
  getByRole(role: 'button' | 'link', options: { name: string }): Locator;
  getByText(text: string | RegExp): Locator;
  locator(selector: string): Locator;
  screenshot(options: { path: string }): Promise<unknown>;
  close(): Promise<void>;
}
interface BrowserContext {
  newPage(): Promise<Page>;
  close(): Promise<void>;
}
interface Playwright {
  chromium: { launchPersistentContext(userDataDir: string, options: Record<string, unknown>): Promise<BrowserContext> };
}
const PLAYWRIGHT = 'playwright-core';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const ADMIN = '/admin/idempotency';
const PAYMENTS = 'POST /orders/:id/payments';

/** The demo's admin page in a real browser: an operator signs in, finds a key, opens it, requeues a dead letter, releases the key. */
describe.skipIf(!HAS_CHROMIUM)('the admin page in Chromium, against the demo', () => {
  let db: TestDatabase;
  let provider: FakePaymentProvider;
  let demo: DemoProcess;
  let profile: string;
  let browser: BrowserContext;

  const api = (path: string, init: RequestInit = {}, key = 'demo-key-acme') =>
    fetch(`${demo.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } });
  const shoot = async (page: Page, name: string) => {
    if (SCREENSHOTS) await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    provider = await startFakePaymentProvider();
    // A provider that does not answer is given up on after 1 s: the payment answers 503, its charge made.
    demo = await startDemoProcess({ DATABASE_URL: db.url, REAPER_INTERVAL_MS: '0', PAYMENT_PROVIDER_URL: provider.url, PAYMENT_PROVIDER_TIMEOUT_MS: '1000' });
    const { chromium } = (await import(PLAYWRIGHT)) as Playwright;
    profile = mkdtempSync(join(tmpdir(), 'admin-page-chromium-'));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      args: ARGS,
      viewport: { width: 1200, height: 760 },
      // HTTP Basic, as a browser signs in to the demo's admin: the user name is who the audit log names.
      httpCredentials: { username: 'browser-test', password: 'demo-admin-key' },
    });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await demo?.stop();
    await provider?.close();
    await db?.drop();
  });

  it('finds a key, opens it, lists an unfinished payment, requeues a dead letter, releases the key, and shows each change; it reads without JavaScript', async () => {
    const key = `browser-${Date.now()}`;
    const order = await api('/orders', { method: 'POST', headers: { 'idempotency-key': key }, body: JSON.stringify({ sku: 'atlas', quantity: 2 }) });
    expect(order.status).toBe(201);
    const { id: orderId } = (await order.json()) as { id: string };
    // A dead letter, as the relay leaves one after its last attempt (the demo runs without NATS here).
    const [event] = await db.query<{ id: string }>(
      `UPDATE idempotency_outbox SET status = 'dead', attempts = 10, last_error = 'maximum payload size exceeded', settled_at = now() WHERE ordering_key = $1 RETURNING id`,
      [orderId],
    );
    const page = await browser.newPage();
    const asked: string[] = [];
    page.on('dialog', (dialog) => void (asked.push(dialog.message()), dialog.accept())); // the confirmation of each action

    await page.goto(`${demo.url}${ADMIN}`);
    await page.getByLabel('Key', { exact: true }).fill(key);
    await page.getByRole('button', { name: 'Find' }).click();
    await page.getByRole('link', { name: key }).waitFor();
    await shoot(page, 'records');
    await page.getByRole('link', { name: key }).click();
    await page.getByText('Request fingerprint').waitFor();
    expect(await page.locator('pre.body').textContent()).toContain(orderId);
    await shoot(page, 'record');

    // A payment whose charge failed at the provider: its phased operation is unfinished, its lease released.
    await setFault(provider.url, 4200, 'fail');
    const payment = await api(`/orders/${orderId}/payments`, { method: 'POST', headers: { 'idempotency-key': `${key}-pay` }, body: JSON.stringify({ amountCents: 4200, currency: 'EUR' }) });
    expect(payment.status).toBe(503);
    await page.getByRole('link', { name: 'Unfinished operations' }).click();
    await page.getByRole('link', { name: `${key}-pay` }).waitFor();
    expect(await page.locator('tbody').textContent()).toContain('record-pending');
    await shoot(page, 'unfinished');

    await page.getByRole('link', { name: 'Dead letters' }).click();
    await page.getByText(event.id).waitFor();
    await page.getByLabel(`select ${event.id}`).check();
    await page.getByLabel(/^Reason/).fill('payload limit raised on the stream');
    await shoot(page, 'dead-letters');
    await page.getByRole('button', { name: 'Requeue selected' }).click();
    await page.getByText('No dead letter.').waitFor();
    await page.getByRole('link', { name: 'Pending events' }).click();
    await page.getByText(event.id).waitFor();

    // Its order.created event waits for the relay: the release leaves it to go out, so it needs force.
    await page.goto(`${demo.url}${ADMIN}/record?scope=tenant:acme&operation=${encodeURIComponent('POST /orders')}&key=${key}`);
    expect(await page.locator('p.warning').textContent()).toMatch(/1 waiting to be sent; a release withdraws none of them\. Its writes stay/);
    await page.getByLabel(/^Reason/).fill('customer retries with another quantity');
    await page.getByLabel(/Force the release/).check();
    await page.getByRole('button', { name: 'Release key' }).click();
    await page.getByText(`Released key ${key} of tenant:acme (POST /orders)`).waitFor();
    expect(asked.at(-1)).toMatch(/^Force the release of key .*writes them a second time/s);
    const retried = await api('/orders', { method: 'POST', headers: { 'idempotency-key': key }, body: JSON.stringify({ sku: 'atlas', quantity: 3 }) });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(demo.output()).toMatch(/admin: "browser-test \(admin key #[0-9a-f]{8}\)" force-released "POST \/orders" key#[0-9a-f]{16}, reason "customer retries with another quantity"/);
    await page.close();

    // Without its script (the page has no other), it still reads; only the actions wait for it.
    const plain = await browser.newPage();
    await plain.route('**/assets/admin.js', (route) => route.abort());
    await plain.goto(`${demo.url}${ADMIN}?key=${key}`);
    await plain.getByRole('link', { name: key }).click();
    await plain.getByText('Request fingerprint').waitFor();
    expect(await plain.getByRole('button', { name: 'Release key' }).isDisabled()).toBe(true);
    await plain.close();
  }, 120_000);

  /** A payment whose charge went through and whose answer never came, marked failed: "Why 1" of issue 34. */
  const failedPayment = async (key: string, amountCents: number) => {
    const order = await api('/orders', { method: 'POST', headers: { 'idempotency-key': `${key}-order` }, body: JSON.stringify({ sku: 'atlas', quantity: 1 }) });
    const { id: orderId } = (await order.json()) as { id: string };
    await setFault(provider.url, amountCents, 'charge-then-hang');
    const payment = await api(`/orders/${orderId}/payments`, { method: 'POST', headers: { 'idempotency-key': key }, body: JSON.stringify({ amountCents, currency: 'EUR' }) });
    expect(payment.status).toBe(503);
    const failed = await api(`${ADMIN}/api/fail`, { method: 'POST', body: JSON.stringify({ scope: 'tenant:acme', operation: PAYMENTS, key, reason: 'provider timed out' }) }, 'demo-admin-key');
    expect(failed.status).toBe(200);
    const charges = (await (await fetch(`${provider.url}/charges`)).json()) as Array<{ amountCents: number }>;
    expect(charges.filter((charge) => charge.amountCents === amountCents)).toHaveLength(1);
    return `${demo.url}${ADMIN}/record?scope=tenant:acme&operation=${encodeURIComponent(PAYMENTS)}&key=${key}`;
  };

  it('refuses to release a failed payment whose charge went through unless forced, saying which phases ran and that a retry charges again', async () => {
    const key = `browser-pay-${Date.now()}`;
    const record = await failedPayment(key, 2300);
    const page = await browser.newPage();
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(record);
    const warning = await page.locator('p.warning').textContent();
    expect(warning).toContain('capture-payment started: finished phases record-pending');
    expect(warning).toMatch(/may have had its effect without recording it.*each effect happens a second time/s);
    await page.getByLabel(/^Reason/).fill('customer asks to pay again');
    await page.getByRole('button', { name: 'Release key' }).click();
    await page.getByText(/with force and a reason/).waitFor();
    expect(await page.locator('[data-result]').textContent()).not.toMatch(/fail[^.]*then release/i);
    await page.goto(record);
    await page.getByText('Request fingerprint').waitFor();
    expect(await page.locator('dl').textContent()).toContain('failed');
    await page.close();
  }, 60_000);

  it('force-releases a failed payment once the operator checks force and confirms a warning that a retry charges again', async () => {
    const key = `browser-force-${Date.now()}`;
    const record = await failedPayment(key, 2400);
    const page = await browser.newPage();
    const asked: string[] = [];
    page.on('dialog', (dialog) => void (asked.push(dialog.message()), dialog.accept()));
    await page.goto(record);
    await page.getByLabel(/^Reason/).fill('first charge refunded at the provider');
    await page.getByLabel(/Force the release/).check();
    await shoot(page, 'release-forced');
    await page.getByRole('button', { name: 'Release key' }).click();
    await page.getByText('No record matches.').waitFor();
    expect(asked).toEqual([expect.stringMatching(/^Force the release of key browser-force-.*finished phases record-pending.*each effect happens a second time.*Reason: first charge refunded at the provider$/s)]);
    expect(demo.output()).toMatch(/admin: "browser-test \(admin key #[0-9a-f]{8}\)" force-released "POST \/orders\/:id\/payments" key#[0-9a-f]{16}, reason "first charge refunded at the provider"/);
    await page.close();
  }, 60_000);
});

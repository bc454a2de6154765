import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../src/demo/database/embedded-postgres.js';
import { natsServerBinary } from '../../src/demo/messaging/nats-server-binary.js';

/** The NATS server the suites use: NATS_URL, default the machine's. */
export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
/** NATS_SERVER_BINARY, else `nats-server` on PATH. */
export const NATS_SERVER_BINARY = natsServerBinary();

/** Whether something accepts connections at a nats:// URL. */
export function natsAnswers(url = NATS_URL): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = createConnection({ host: hostname, port: Number(port || 4222) });
    const done = (answered: boolean) => {
      socket.destroy();
      resolve(answered);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Names unique to one test run, so suites never share streams or subjects on a shared server. */
export function uniqueNames(label: string) {
  const suffix = `${label}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  return { stream: `T_${suffix}`.toUpperCase(), subjectPrefix: `t_${suffix}`, durable: `d_${suffix}` };
}

/** Stream helpers over a connection of the test's own, to one server or any of a cluster's. */
export async function natsAdmin(servers: string | string[] = NATS_URL) {
  const connection: NatsConnection = await connect({ servers });
  const manager = await jetstreamManager(connection);
  return {
    /** Messages stored in the stream. */
    messages: async (stream: string) => (await manager.streams.info(stream)).state.messages,
    /** Its configuration (`num_replicas`) and, on a cluster, its leader and replicas. */
    stream: (stream: string) => manager.streams.info(stream),
    consumer: (stream: string, name: string) => manager.consumers.info(stream, name),
    deleteStream: (stream: string) => manager.streams.delete(stream).catch(() => false),
    close: () => connection.close(),
  };
}

/** A nats-server of the test's own, with JetStream on a data folder that survives its restarts. */
export interface PrivateNats {
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  dispose(): Promise<void>;
}

export async function startPrivateNats(): Promise<PrivateNats | undefined> {
  const nats = await reservePrivateNats();
  await nats?.start();
  return nats;
}

/** A private nats-server's port and data folder, not started yet: for apps that start before their broker. */
export async function reservePrivateNats(): Promise<PrivateNats | undefined> {
  if (!NATS_SERVER_BINARY || !existsSync(NATS_SERVER_BINARY)) return undefined;
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nats-js-'));
  const url = `nats://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(NATS_SERVER_BINARY, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
    for (let i = 0; i < 200 && !(await natsAnswers(url)); i++) await sleep(25);
  };
  const stop = async () => {
    if (!child || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  };
  return { url, start, stop, dispose: async () => (await stop(), rmSync(dir, { recursive: true, force: true })) };
}

import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../src/demo/database/embedded-postgres.js';
import { NATS_SERVER_BINARY, natsAnswers } from './nats.js';

/** One server of a private cluster, with its name (`server_name`, as JetStream names a stream's leader) and its own data folder. */
export interface ClusterNode {
  name: string;
  url: string;
  /** Starts it again on the same ports and data. */
  start(): Promise<void>;
  /** SIGKILL: no shutdown, JetStream flushes nothing. */
  kill(): Promise<void>;
}

/** nats-servers of the test's own, routed into one JetStream cluster on loopback. */
export interface PrivateNatsCluster {
  nodes: ClusterNode[];
  /** Every node's client URL. */
  urls: string[];
  node(name: string): ClusterNode;
  dispose(): Promise<void>;
}

/** Starts `size` routed nodes and waits for JetStream's meta leader; undefined without a nats-server binary. */
export async function startPrivateNatsCluster(size = 3): Promise<PrivateNatsCluster | undefined> {
  const binary = NATS_SERVER_BINARY;
  if (!binary || !existsSync(binary)) return undefined;
  const clusterName = `c${Date.now().toString(36)}`;
  const ports = [];
  for (let i = 0; i < size; i++) ports.push({ client: await freePort(), route: await freePort() });
  const routes = ports.map((port) => `nats://127.0.0.1:${port.route}`).join(',');
  const dirs: string[] = [];
  const nodes = ports.map((port, i): ClusterNode => {
    const name = `${clusterName}-n${i + 1}`;
    const dir = mkdtempSync(join(tmpdir(), 'nats-cluster-'));
    dirs.push(dir);
    const url = `nats://127.0.0.1:${port.client}`;
    const args = ['-a', '127.0.0.1', '-p', String(port.client), '-n', name, '-js', '-sd', dir, '--cluster_name', clusterName, '--cluster', `nats://127.0.0.1:${port.route}`, '--routes', routes];
    let child: ChildProcess | undefined;
    return {
      name,
      url,
      start: async () => {
        child = spawn(binary, args, { stdio: 'ignore' });
        for (let i = 0; i < 200 && !(await natsAnswers(url)); i++) await sleep(25);
      },
      kill: async () => {
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      },
    };
  });
  await Promise.all(nodes.map((node) => node.start()));
  const cluster: PrivateNatsCluster = {
    nodes,
    urls: nodes.map((node) => node.url),
    node: (name) => nodes.find((node) => node.name === name)!,
    dispose: async () => {
      await Promise.all(nodes.map((node) => node.kill()));
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    },
  };
  await untilMetaLeader(cluster.urls);
  return cluster;
}

/** JetStream answers its API once the nodes have elected a meta leader. */
async function untilMetaLeader(servers: string[]): Promise<void> {
  const connection = await connect({ servers });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await (await jetstreamManager(connection, { timeout: 1000 })).getAccountInfo();
        return;
      } catch (error) {
        if (attempt >= 40) throw new Error(`the NATS cluster elected no JetStream leader: ${(error as Error).message}`);
        await sleep(250);
      }
    }
  } finally {
    await connection.close();
  }
}

import { Session } from 'node:inspector/promises';
import v8 from 'node:v8';

/**
 * Allocation sites of a sampled stretch, flattened from V8's sampling heap
 * profile: the bytes sampled where each function allocated (its self size,
 * an estimate V8 scales from the samples), by script, function and line.
 */
export interface AllocationSite {
  url: string;
  functionName: string;
  /** From 1, as editors count; 0 where V8 gives none. */
  line: number;
  bytes: number;
}

/** What one stretch of the app allocated on V8's heap. */
export interface AllocationRecording {
  /**
   * Bytes allocated, from the heap's used size at the two ends and what each
   * garbage collection in between freed (`v8.GCProfiler`): exact for V8's
   * heap, to the collector's accounting; Buffers' memory outside it is not counted.
   */
  allocatedBytes: number;
  collections: number;
  /** The sampled sites; their sum estimates `allocatedBytes`, within a few % over thousands of samples. */
  sites: AllocationSite[];
}

/** V8's sampling heap profile node, as the inspector protocol gives it. */
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/**
 * Records the allocations of the process it runs in, one stretch at a time:
 * V8's sampling heap profiler with the objects that garbage collections
 * freed kept in the profile (without them it shows what is still alive at
 * the end, not what was allocated), and a GC profile for the total.
 */
export class AllocationRecorder {
  private session?: Session;
  private gc?: v8.GCProfiler;
  private usedAtStart = 0;

  async start(samplingInterval: number): Promise<void> {
    if (this.session) throw new Error('allocations: already recording');
    const session = new Session();
    session.connect();
    await session.post('HeapProfiler.enable');
    // Whatever is pending now would be counted in the stretch: collect it first.
    await session.post('HeapProfiler.collectGarbage');
    await session.post('HeapProfiler.startSampling', { samplingInterval, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    this.session = session;
    this.gc = new v8.GCProfiler();
    this.usedAtStart = v8.getHeapStatistics().used_heap_size;
    this.gc.start();
  }

  async stop(): Promise<AllocationRecording> {
    const { session, gc } = this;
    if (!session || !gc) throw new Error('allocations: not recording');
    const usedAtEnd = v8.getHeapStatistics().used_heap_size;
    const collections = gc.stop()?.statistics ?? [];
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as { profile: { head: ProfileNode } };
    await session.post('HeapProfiler.disable');
    session.disconnect();
    this.session = undefined;
    this.gc = undefined;
    const freed = collections.reduce((total, collection) => total + collection.beforeGC.heapStatistics.usedHeapSize - collection.afterGC.heapStatistics.usedHeapSize, 0);
    return { allocatedBytes: usedAtEnd - this.usedAtStart + freed, collections: collections.length, sites: flatten(profile.head) };
  }
}

/** The profile's tree as sites, each function and line once (a function reached by several stacks adds up). */
export function flatten(head: ProfileNode): AllocationSite[] {
  const sites = new Map<string, AllocationSite>();
  const pending = [head];
  for (let node = pending.pop(); node; node = pending.pop()) {
    pending.push(...node.children);
    if (node.selfSize <= 0) continue;
    const { url, functionName, lineNumber } = node.callFrame;
    const key = `${url}\u0000${functionName}\u0000${lineNumber}`;
    const site = sites.get(key) ?? { url, functionName, line: lineNumber + 1, bytes: 0 };
    site.bytes += node.selfSize;
    sites.set(key, site);
  }
  return [...sites.values()];
}

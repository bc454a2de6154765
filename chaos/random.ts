/**
 * A small seeded pseudo-random generator (mulberry32): the same seed gives
 * the same sequence, so a run's traffic mix and fault schedule can be
 * replayed with `--seed`. Not for anything secret.
 */
export class SeededRandom {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1), like `Math.random`. */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max], both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  /** One of the choices, drawn in proportion to its weight. */
  weighted<T>(choices: ReadonlyArray<readonly [T, number]>): T {
    const total = choices.reduce((sum, [, weight]) => sum + weight, 0);
    let draw = this.next() * total;
    for (const [value, weight] of choices) {
      draw -= weight;
      if (draw < 0) return value;
    }
    return choices[choices.length - 1][0];
  }

  /** A child generator with its own sequence, so one consumer's draws never shift another's. */
  fork(): SeededRandom {
    return new SeededRandom(Math.floor(this.next() * 2 ** 32));
  }
}

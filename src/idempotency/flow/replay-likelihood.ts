/**
 * Per operation, how often a claim has lately found its key already held: an
 * exponentially weighted average over roughly the last twenty claims. While
 * replays are that common (clients retrying through other instances, whose
 * caches are cold), a plain read first replays them without a transaction;
 * otherwise the claim goes first, and a first execution pays nothing for a
 * look-up.
 */
export class ReplayLikelihood {
  private readonly rates = new Map<string, number>();

  constructor(
    private readonly threshold = 0.1,
    private readonly weight = 0.05,
  ) {}

  likely(operation: string): boolean {
    return (this.rates.get(operation) ?? 0) > this.threshold;
  }

  /** Records whether a claim, or a look-up, found the key held. */
  observe(operation: string, held: boolean): void {
    const rate = this.rates.get(operation) ?? 0;
    this.rates.set(operation, rate + this.weight * ((held ? 1 : 0) - rate));
  }
}

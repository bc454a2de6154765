import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';

/**
 * How many of the app's pool connections the admin holds at once: a
 * statement beyond them waits its turn here, in the admin's own queue, not in
 * the pool's queue ahead of the app's requests, and for no longer than a
 * statement may run; then it is refused with 503 `admin-busy`.
 */
export class ConnectionBudget {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    readonly connections: number,
    private readonly waitMs: number,
  ) {}

  /** Runs `work` once a connection of the budget is free, and frees it when `work` settles. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.take();
    try {
      return await work();
    } finally {
      this.give();
    }
  }

  private take(): Promise<void> {
    if (this.held < this.connections) {
      this.held += 1;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(turn), 1);
        reject(
          new AdminRefusedException(
            AdminProblemType.Busy,
            `The admin runs ${this.connections} statement(s) at a time on the app's pool (its \`connections\`), and this one waited ${this.waitMs} ms for its turn. Retry in a moment.`,
          ),
        );
      }, this.waitMs);
      this.waiting.push(turn);
    });
  }

  /** Hands the connection to the next in line, who then holds it, or frees it. */
  private give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held -= 1;
  }
}

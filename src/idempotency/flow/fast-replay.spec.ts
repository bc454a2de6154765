import { ReplayLikelihood } from './fast-replay.js';

describe('ReplayLikelihood', () => {
  it('starts with claims first, per operation', () => {
    expect(new ReplayLikelihood().likely('POST /orders')).toBe(false);
  });

  it('turns to reading first once claims keep finding held keys, and back once they stop', () => {
    const replays = new ReplayLikelihood();
    for (let i = 0; i < 3; i++) replays.observe('POST /orders', true);
    expect(replays.likely('POST /orders')).toBe(true);
    expect(replays.likely('POST /refunds')).toBe(false);
    for (let i = 0; i < 30; i++) replays.observe('POST /orders', false);
    expect(replays.likely('POST /orders')).toBe(false);
  });

  it('ignores a rare replay among first executions', () => {
    const replays = new ReplayLikelihood();
    for (let i = 0; i < 100; i++) replays.observe('POST /orders', i % 25 === 0);
    expect(replays.likely('POST /orders')).toBe(false);
  });
});

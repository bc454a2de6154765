import { checkStreamOptions } from './jetstream-stream.js';

describe('checkStreamOptions', () => {
  const stream = (replicas?: number) => ({ name: 'EVENTS', subjects: ['events.>'], replicas });

  it.each([undefined, 1, 3, 5])('takes %s replicas', (replicas) => {
    expect(() => checkStreamOptions(stream(replicas))).not.toThrow();
  });

  it.each([0, 6, 2.5, Number.NaN])('refuses %s replicas at startup, saying what it takes', (replicas) => {
    expect(() => checkStreamOptions(stream(replicas))).toThrow(/stream EVENTS: replicas must be a whole number from 1 to 5/);
  });
});

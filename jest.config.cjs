/** Jest runs the ESM build of Nest 12 natively: see the `test` script's --experimental-vm-modules. */
module.exports = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  testRegex: '(src|test)/.*\\.(spec|e2e-spec)\\.ts$',
  // The consumer apps are tested against the packed tarball by `npm run test:consumers`.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/fixtures/'],
  modulePathIgnorePatterns: ['<rootDir>/test/fixtures/'],
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
  testTimeout: 30000,
};

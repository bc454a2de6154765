import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { HttpException, Injectable, Module, type Type } from '@nestjs/common';
import { Args, Field, GraphQLModule, Int, Mutation, ObjectType, Query, registerEnumType, ResolveField, Resolver } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import {
  type AttemptEvent,
  Idempotent,
  IdempotencyConfigurationError,
  type IdempotencyEvent,
  SkipIdempotency,
  IdempotencyTransactionHost,
} from '../src/idempotency/index.js';
import { idempotencyApolloPlugin, IdempotencyGraphqlModule } from '../src/idempotency/graphql/index.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

enum Stage {
  Drafted = 'drafted',
  Posted = 'posted',
}
registerEnumType(Stage, { name: 'Stage' });

@ObjectType()
class Posting {
  @Field(() => Int)
  entry: number;

  @Field()
  label: string;

  @Field(() => Stage)
  stage: Stage;

  /** A DateTime: GraphQL serializes a Date, and answers null for a string. */
  @Field()
  postedAt: Date;
}

@Injectable()
class Postings {
  calls = 0;
  failNext: Error | undefined;

  constructor(private readonly tx: IdempotencyTransactionHost) {}

  async post(label: string): Promise<Posting> {
    this.calls++;
    const [{ id }] = await this.tx.manager.query(`INSERT INTO ledger_entries (label) VALUES ($1) RETURNING id`, [label]);
    const failure = this.failNext;
    this.failNext = undefined;
    if (failure) throw failure;
    return Object.assign(new Posting(), { entry: Number(id), label, stage: Stage.Posted, postedAt: new Date(Date.UTC(2026, 10, 30, 12, Number(id) % 60)) });
  }
}

@Resolver(() => Posting)
class PostingsResolver {
  constructor(private readonly postings: Postings) {}

  @Mutation(() => Posting)
  @Idempotent({ storeErrors: [402] })
  post(@Args('label') label: string, @Args('idempotencyKey', { type: () => String, nullable: true }) _key?: string) {
    return this.postings.post(label);
  }

  @Mutation(() => Posting)
  @Idempotent({ required: false, operation: 'post-draft' })
  postDraft(@Args('label') label: string, @Args('idempotencyKey', { type: () => String, nullable: true }) _key?: string) {
    return this.postings.post(label);
  }

  @Query(() => Int)
  calls() {
    return this.postings.calls;
  }
}

/** `@Idempotent()` on the class: its mutations are covered, its queries are not. */
@Idempotent({ version: '2' })
@Resolver()
class CoveredResolver {
  constructor(private readonly postings: Postings) {}

  @Mutation(() => Posting)
  postCovered(@Args('label') label: string, @Args('idempotencyKey', { type: () => String, nullable: true }) _key?: string) {
    return this.postings.post(label);
  }

  /** Bound twice (class and method): the outer binding runs the flow. */
  @Mutation(() => Posting)
  @Idempotent({ storeErrors: [402] })
  postAlsoOwn(@Args('label') label: string, @Args('idempotencyKey', { type: () => String, nullable: true }) _key?: string) {
    return this.postings.post(label);
  }

  @Mutation(() => Posting)
  @SkipIdempotency()
  postSkipped(@Args('label') label: string) {
    return this.postings.post(label);
  }

  @Query(() => Int)
  coveredCalls() {
    return this.postings.calls;
  }
}

@Module({ providers: [Postings, PostingsResolver, CoveredResolver] })
class PostingsModule {}

/**
 * `@Idempotent()` on resolvers in a small Apollo app, in process: recorded
 * errors, values of custom scalars and enums, options, events, and the
 * refusals at startup. (The contract suite in graphql.e2e-spec.ts runs both
 * drivers through the demo.)
 */
describe('@Idempotent() on GraphQL resolvers (Apollo, in process)', () => {
  let db: TestDatabase;
  let running: RunningApp;
  let postings: Postings;
  const events: AttemptEvent[] = [];
  let keySeq = 0;
  const newKey = () => `resolver-${++keySeq}-${Date.now()}`;

  /** `headers` over the defaults; a header given as null is not sent. */
  const graphql = async (query: string, variables: object = {}, headers: Record<string, string | null> = {}) => {
    const sent = Object.entries({ 'content-type': 'application/json', 'x-tenant': 'acme', ...headers }).filter((header): header is [string, string] => header[1] !== null);
    const response = await fetch(`${running.url}/graphql`, {
      method: 'POST',
      headers: Object.fromEntries(sent),
      body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as { data: Record<string, any> | null; errors?: Array<{ message: string; extensions: Record<string, unknown> }>; extensions?: any };
  };
  const post = (label: string, key?: string) => graphql(`mutation ($label: String!, $key: String) { post(label: $label, idempotencyKey: $key) { entry label stage postedAt } }`, { label, key });
  const entriesLabelled = async (label: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ledger_entries WHERE label = $1`, [label]))[0].n);

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    const onEvent = (event: IdempotencyEvent) => event.kind === 'attempt' && events.push(event);
    running = await startApp({
      imports: [
        ...ledgerAppModules(db.url, { onEvent }),
        GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true, plugins: [idempotencyApolloPlugin()], includeStacktraceInErrorResponses: false }),
        IdempotencyGraphqlModule,
        PostingsModule,
      ],
    });
    postings = running.app.get(Postings);
  });
  afterAll(async () => {
    await running?.close();
    await db?.drop();
  });

  it('replays a value of custom scalars and enums as the first execution answered it', async () => {
    const key = newKey();
    const first = await post('dated', key);
    expect(first.errors).toBeUndefined();
    expect(first.data!.post).toEqual({ entry: expect.any(Number), label: 'dated', stage: 'Posted', postedAt: expect.stringMatching(/^2026-11-30T12:\d\d:00\.000Z$/) });
    const replay = await post('dated', key);
    expect(JSON.stringify(replay.data)).toBe(JSON.stringify(first.data));
    expect(replay.extensions.idempotency).toEqual({ replayed: true, fields: { post: { replayed: true } } });
    expect(await entriesLabelled('dated')).toBe(1);
  });

  it('records a storeErrors failure as a GraphQL error with its problem, undoes the writes and replays it', async () => {
    const key = newKey();
    postings.failNext = new HttpException({ code: 'card_declined', message: 'Card declined' }, 402);
    const first = await post('declined', key);
    const expected = { message: 'Card declined', extensions: { code: 'card_declined', status: 402, type: 'about:blank', title: 'Payment Required' } };
    expect(first.errors).toEqual([expect.objectContaining(expected)]);
    expect(first.extensions.idempotency).toEqual({ replayed: false, fields: { post: { replayed: false } } });
    expect(await entriesLabelled('declined')).toBe(0);

    const calls = postings.calls;
    const replay = await post('declined', key);
    expect(replay.errors).toEqual([expect.objectContaining(expected)]);
    expect(replay.extensions.idempotency).toEqual({ replayed: true, fields: { post: { replayed: true } } });
    expect(postings.calls).toBe(calls);
  });

  it('rolls back and frees the key when the resolver fails otherwise', async () => {
    const key = newKey();
    postings.failNext = new Error('hiccup');
    expect((await post('hiccup', key)).errors).toHaveLength(1);
    expect(await entriesLabelled('hiccup')).toBe(0);
    expect((await post('hiccup', key)).errors).toBeUndefined();
    expect(await entriesLabelled('hiccup')).toBe(1);
  });

  it('runs a mutation with required: false unprotected without a key, and under its own operation name with one', async () => {
    const draft = (key?: string) => graphql(`mutation ($key: String) { postDraft(label: "draft", idempotencyKey: $key) { entry } }`, { key });
    await draft();
    await draft();
    expect(await entriesLabelled('draft')).toBe(2);
    const key = newKey();
    await draft(key);
    expect((await draft(key)).extensions.idempotency.replayed).toBe(true);
    expect(await entriesLabelled('draft')).toBe(3);
    expect(await db.query(`SELECT operation FROM idempotency_records WHERE key = $1`, [key])).toEqual([{ operation: 'post-draft' }]);
  });

  it('ends every protected field in one attempt event', async () => {
    events.length = 0;
    const key = newKey();
    await post('evented', key);
    await post('evented', key);
    await post('evented-other', key);
    await post('evented');
    expect(events.map(({ operation, outcome, status }) => ({ operation, outcome, status }))).toEqual([
      { operation: 'graphql Mutation.post', outcome: 'executed', status: 200 },
      { operation: 'graphql Mutation.post', outcome: 'replayed', status: 200 },
      { operation: 'graphql Mutation.post', outcome: 'key_reused', status: 422 },
      { operation: 'graphql Mutation.post', outcome: 'key_missing', status: 400 },
    ]);
  });

  it('answers a mutation the tenant resolver finds no tenant for with a 401 tenant-unresolved error, claiming and running nothing', async () => {
    events.length = 0;
    const key = newKey();
    const calls = postings.calls;
    for (const tenant of [null, '']) {
      const answer = await graphql(`mutation ($key: String) { post(label: "no-tenant", idempotencyKey: $key) { entry } }`, { key }, { 'x-tenant': tenant });
      expect(answer.data?.post ?? null).toBeNull();
      expect(answer.errors).toEqual([
        expect.objectContaining({
          message: 'graphql Mutation.post: the `tenant` resolver found no tenant for this request, so its key has no scope. Send the request with the credentials that name its tenant.',
          extensions: expect.objectContaining({ code: 'IDEMPOTENCY_TENANT_UNRESOLVED', status: 401, type: 'urn:nest-idempotency:problem:tenant-unresolved' }),
        }),
      ]);
    }
    expect(postings.calls).toBe(calls);
    expect(await db.query(`SELECT scope FROM idempotency_records WHERE key = $1`, [key])).toEqual([]);
    expect(await entriesLabelled('no-tenant')).toBe(0);
    expect(events.map(({ outcome, status }) => ({ outcome, status }))).toEqual([
      { outcome: 'tenant_unresolved', status: 401 },
      { outcome: 'tenant_unresolved', status: 401 },
    ]);
  });

  it('covers the mutations of a resolver class with @Idempotent(), not its queries, and leaves out @SkipIdempotency()', async () => {
    const covered = (field: string, key?: string) => graphql(`mutation ($key: String) { ${field}(label: "${field}", idempotencyKey: $key) { entry } }`, { key });
    expect((await covered('postCovered')).errors![0].extensions).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING', status: 400 });
    const key = newKey();
    const first = await covered('postCovered', key);
    expect((await covered('postCovered', key)).data).toEqual(first.data);
    expect(await db.query(`SELECT scope, operation FROM idempotency_records WHERE key = $1`, [key])).toEqual([{ scope: 'tenant:acme version:2', operation: 'graphql Mutation.postCovered' }]);

    const own = newKey();
    const ran = await covered('postAlsoOwn', own);
    const replayed = await covered('postAlsoOwn', own);
    expect(replayed.extensions.idempotency.replayed).toBe(true);
    expect(replayed.data).toEqual(ran.data);

    await graphql(`mutation { postSkipped(label: "skipped") { entry } }`);
    await graphql(`mutation { postSkipped(label: "skipped") { entry } }`);
    expect(await entriesLabelled('skipped')).toBe(2);
    expect((await graphql(`{ coveredCalls }`)).errors).toBeUndefined();
    expect(await entriesLabelled('postCovered')).toBe(1);
    expect(await entriesLabelled('postAlsoOwn')).toBe(1);
  });

  describe('refuses at startup', () => {
    const boot = async (resolver: Type, served = true) => {
      const [typeorm, idempotency] = ledgerAppModules(db.url);
      const moduleRef = await Test.createTestingModule({ imports: [typeorm, idempotency, ...(served ? [IdempotencyGraphqlModule] : [])], providers: [Postings, resolver] }).compile();
      const app = moduleRef.createNestApplication({ logger: false });
      try {
        await app.init();
      } finally {
        await app.close();
      }
    };

    it('@Idempotent() on a query', async () => {
      @Resolver()
      class ReadsResolver {
        @Query(() => Int, { name: 'refusedCount' })
        @Idempotent()
        count() {
          return 1;
        }
      }
      await expect(boot(ReadsResolver)).rejects.toThrow(new IdempotencyConfigurationError(
        '@Idempotent() on ReadsResolver.count: it is a query, and only mutations are protected: a read has nothing to run once. Remove @Idempotent(), or make it a @Mutation().',
      ));
    });

    it('@Idempotent() on a field resolver', async () => {
      @Resolver(() => Posting)
      class FieldsResolver {
        @ResolveField(() => String, { name: 'refusedExtra' })
        @Idempotent()
        extra() {
          return 'x';
        }
      }
      await expect(boot(FieldsResolver)).rejects.toThrow(/FieldsResolver\.extra: it is a field resolver, and only mutations are protected/);
    });

    it('a phased mutation', async () => {
      @Resolver()
      class PhasedResolver {
        @Mutation(() => Int, { name: 'refusedPhased' })
        @Idempotent({ phases: true })
        run() {
          return 1;
        }
      }
      await expect(boot(PhasedResolver)).rejects.toThrow(/PhasedResolver\.run: phased operations run on HTTP routes only/);
    });

    it('@Idempotent() on a mutation without IdempotencyGraphqlModule, which serves them, naming it', async () => {
      @Resolver()
      class UnservedResolver {
        @Mutation(() => Int, { name: 'refusedUnserved' })
        @Idempotent()
        post() {
          return 1;
        }
      }
      await expect(boot(UnservedResolver, false)).rejects.toThrow(new IdempotencyConfigurationError(
        "@Idempotent() on UnservedResolver.post, a GraphQL resolver: import IdempotencyGraphqlModule from 'nest-idempotency/graphql' beside IdempotencyModule, which serves @Idempotent() on @Mutation() resolvers.",
      ));
      await expect(boot(UnservedResolver)).resolves.toBeUndefined();
    });
  });
});

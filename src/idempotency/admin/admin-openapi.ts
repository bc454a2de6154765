import type { Type } from '@nestjs/common';
import { adminProblemStatus, AdminProblemType } from './admin.exceptions.js';
import { loadSwagger } from '../openapi/swagger.js';


const PROBLEM = { type: 'object', required: ['type', 'title', 'status', 'detail'], properties: { type: { type: 'string', format: 'uri' }, title: { type: 'string' }, status: { type: 'integer' }, detail: { type: 'string' } } };
const PAGE = (item: object) => ({
  type: 'object',
  required: ['items'],
  properties: {
    items: { type: 'array', items: item },
    next: { type: 'string', description: 'The next page\'s `cursor`; absent on the last page' },
    partial: { type: 'boolean', description: 'The search stopped early, after its window, with fewer matches than a page: `next` searches on' },
  },
});
const RECORD = {
  type: 'object',
  properties: {
    scope: { type: 'string' }, operation: { type: 'string' }, key: { type: 'string' }, keyHash: { type: 'string' },
    status: { type: 'string', enum: ['in_progress', 'completed', 'failed'] }, responseStatus: { type: 'integer', nullable: true },
    createdAt: { type: 'string', format: 'date-time' }, completedAt: { type: 'string', format: 'date-time', nullable: true },
    expiresAt: { type: 'string', format: 'date-time' }, expired: { type: 'boolean' }, attempts: { type: 'integer' },
  },
};
const RECORD_DETAIL = {
  ...RECORD,
  properties: {
    ...RECORD.properties,
    fingerprint: { type: 'string' },
    answer: { type: 'object', nullable: true, properties: { status: { type: 'integer' }, headers: { type: 'object', additionalProperties: { type: 'string' } }, body: { type: 'string', nullable: true }, sealed: { type: 'boolean' } } },
    undecryptable: { type: 'string' }, ownerToken: { type: 'string', nullable: true }, leaseExpiresAt: { type: 'string', format: 'date-time', nullable: true },
    leaseLive: { type: 'boolean' }, recoveryPoint: { type: 'string', nullable: true }, phaseResults: { type: 'object' }, resume: { type: 'object', nullable: true },
    failureReason: { type: 'string', nullable: true }, databaseNow: { type: 'string', format: 'date-time' },
    effects: {
      type: 'object',
      description: 'What its run did beyond the record, which a release leaves in place; `external`: a release needs `force`',
      properties: {
        operation: { type: 'string', nullable: true }, phases: { type: 'array', items: { type: 'string' } }, recoveryPoint: { type: 'string', nullable: true },
        events: { type: 'object', properties: { sent: { type: 'integer' }, pending: { type: 'integer' }, dead: { type: 'integer' } } }, external: { type: 'boolean' },
      },
    },
  },
};
const UNFINISHED = {
  type: 'object',
  properties: {
    scope: { type: 'string' }, operation: { type: 'string' }, key: { type: 'string' }, keyHash: { type: 'string' },
    state: { type: 'string', enum: ['running', 'abandoned', 'unstarted'] }, resumes: { type: 'string', nullable: true }, registeredHere: { type: 'boolean' },
    recoveryPoint: { type: 'string', nullable: true }, phases: { type: 'array', items: { type: 'string' } }, attempts: { type: 'integer' },
    ownerToken: { type: 'string', nullable: true }, leaseExpiresAt: { type: 'string', format: 'date-time' }, leaseLive: { type: 'boolean' }, createdAt: { type: 'string', format: 'date-time' },
  },
};
const EVENT = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' }, seq: { type: 'string' }, type: { type: 'string' }, orderingKey: { type: 'string', nullable: true },
    status: { type: 'string', enum: ['pending', 'sent', 'dead'] }, attempts: { type: 'integer' }, lastError: { type: 'string', nullable: true },
    payload: {}, headers: { type: 'object' }, createdAt: { type: 'string', format: 'date-time' }, settledAt: { type: 'string', format: 'date-time', nullable: true }, nextAttemptAt: { type: 'string', format: 'date-time' },
  },
};
const RESULT = {
  type: 'object',
  properties: {
    action: { type: 'string', enum: ['release', 'fail', 'requeue'] }, actor: { type: 'string' }, reason: { type: 'string' }, record: { type: 'object' }, eventIds: { type: 'array', items: { type: 'string' } },
    effects: { type: 'object', description: 'release: what the released run left in place' }, forced: { type: 'boolean', description: 'release: done only because `force` was given' },
  },
};
const RECORD_ACTION = { type: 'object', required: ['scope', 'operation', 'key', 'reason'], properties: { scope: { type: 'string', example: 'tenant:acme' }, operation: { type: 'string', example: 'POST /orders' }, key: { type: 'string' }, reason: { type: 'string' } } };
const RELEASE = {
  ...RECORD_ACTION,
  properties: { ...RECORD_ACTION.properties, force: { type: 'boolean', description: 'Release a record whose run may have had external effects (a retry does them again); default false' } },
};
const REQUEUE = { type: 'object', required: ['reason'], properties: { ids: { type: 'array', items: { type: 'string', format: 'uuid' } }, all: { type: 'boolean' }, reason: { type: 'string' } } };

/** What any route may answer: the app's guard's no, a statement past `statementTimeout`, no connection of the admin's free in time. */
const EVERY_ROUTE = [AdminProblemType.Forbidden, AdminProblemType.Timeout, AdminProblemType.Busy];
/** What the admin's gate refuses of an action. */
const EVERY_ACTION = [AdminProblemType.CrossSite, AdminProblemType.NotJson];

type Query = [name: string, description: string, schema?: object];
const PAGING: Query[] = [['cursor', 'A list\'s `next`, for the page after it'], ['limit', 'Items per page, 1 to 200 (default 50)', { type: 'integer' }]];
const RECORD_ID: Query[] = [['scope', 'The tenant scope, e.g. tenant:acme'], ['operation', 'e.g. POST /orders'], ['key', 'The idempotency key']];

/** Each route: summary, query parameters or body, success schema, and the refusals it may answer. */
const ROUTES: Record<string, { summary: string; query?: Query[]; body?: object; ok: object; refusals: string[] }> = {
  records: {
    summary: 'Find records by tenant scope, operation, key, status and time range, newest claim first',
    query: [...RECORD_ID, ['status', 'in_progress, completed or failed', { type: 'string', enum: ['in_progress', 'completed', 'failed'] }], ['since', 'Claimed at or after (ISO 8601)'], ['until', 'Claimed before (ISO 8601)'], ...PAGING],
    ok: PAGE(RECORD),
    refusals: [AdminProblemType.BadRequest, AdminProblemType.ScopeForbidden],
  },
  record: { summary: 'One record, its answer decoded', query: RECORD_ID, ok: RECORD_DETAIL, refusals: [AdminProblemType.BadRequest, AdminProblemType.ScopeForbidden, AdminProblemType.NotFound] },
  unfinished: { summary: 'Unfinished phased operations, longest lapsed lease first', query: [RECORD_ID[0], RECORD_ID[1], ...PAGING], ok: PAGE(UNFINISHED), refusals: [AdminProblemType.BadRequest, AdminProblemType.ScopeForbidden] },
  outbox: { summary: 'Outbox events pending or dead, oldest first', query: [['state', 'pending or dead (default dead)', { type: 'string', enum: ['pending', 'dead'] }], ...PAGING], ok: PAGE(EVENT), refusals: [AdminProblemType.BadRequest, AdminProblemType.ScopeForbidden] },
  release: {
    summary: 'Release a key: delete its record; one whose run may have had external effects only with force',
    body: RELEASE,
    ok: RESULT,
    refusals: [AdminProblemType.BadRequest, AdminProblemType.ScopeForbidden, AdminProblemType.NotFound, AdminProblemType.KeyInUse, AdminProblemType.LeaseLive, AdminProblemType.OperationStarted],
  },
  fail: {
    summary: 'Mark an unfinished operation whose lease lapsed as failed',
    body: RECORD_ACTION,
    ok: RESULT,
    refusals: [AdminProblemType.BadRequest, AdminProblemType.ScopeForbidden, AdminProblemType.NotFound, AdminProblemType.KeyInUse, AdminProblemType.LeaseLive, AdminProblemType.NotUnfinished],
  },
  requeue: {
    summary: 'Requeue dead letters, by id or all, keeping each ordering key\'s order',
    body: REQUEUE,
    ok: RESULT,
    refusals: [AdminProblemType.BadRequest, AdminProblemType.ScopeForbidden, AdminProblemType.NotFound, AdminProblemType.KeyInUse, AdminProblemType.NotDead, AdminProblemType.OutOfOrder],
  },
};

/**
 * Documents the admin's JSON API through @nestjs/swagger, when the app has
 * it (the page's routes are left out): each route's parameters or body, its
 * answer and the problem types it refuses with. It runs while the app is
 * created, before `SwaggerModule.createDocument()` reads the metadata.
 */
export async function documentAdminApi([api, page]: readonly Type[]): Promise<void> {
  const swagger = await loadSwagger();
  if (!swagger) return;
  swagger.ApiTags('idempotency admin')(api);
  if (page) swagger.ApiExcludeController()(page);
  for (const [name, route] of Object.entries(ROUTES)) {
    const descriptor = Object.getOwnPropertyDescriptor(api.prototype, name)!;
    const decorate = (decorator: MethodDecorator) => decorator(api.prototype, name, descriptor);
    decorate(swagger.ApiOperation({ summary: route.summary }));
    for (const [query, description, schema] of route.query ?? []) decorate(swagger.ApiQuery({ name: query, description, required: name === 'record', schema: schema ?? { type: 'string' } }));
    if (route.body) decorate(swagger.ApiBody({ schema: route.body }));
    decorate(swagger.ApiResponse({ status: 200, description: 'OK', schema: route.ok }));
    const byStatus = new Map<number, string[]>();
    for (const type of [...route.refusals, ...EVERY_ROUTE, ...(route.body ? EVERY_ACTION : [])]) byStatus.set(adminProblemStatus(type), [...(byStatus.get(adminProblemStatus(type)) ?? []), type]);
    for (const [status, types] of byStatus) {
      decorate(swagger.ApiResponse({ status, description: `Refused: ${types.join(', ')}`, content: { 'application/problem+json': { schema: PROBLEM } } }));
    }
  }
}

import { BadRequestException, type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { requestOf } from './request-of.js';

/** How deep a JSON body may nest: objects and arrays within one another. */
const MAX_JSON_DEPTH = 32;

/** NUL, which PostgreSQL's text and jsonb cannot hold, and unpaired surrogates, which UTF-8 cannot encode. */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why a parsed JSON body is refused, or undefined when it is fine: nested
 * deeper than `MAX_JSON_DEPTH` (validation walks bodies recursively, and a
 * few thousand levels overflow its stack), or a string or property name
 * PostgreSQL cannot store. Walks the body without recursion, so any depth is
 * safe to check.
 */
function unacceptableJson(body: unknown): string | undefined {
  const pending: Array<{ value: unknown; depth: number }> = [{ value: body, depth: 1 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, depth } = next;
    if (typeof value === 'string') {
      if (UNSTORABLE.test(value)) return 'The request’s data holds a NUL character or an unpaired surrogate, which cannot be stored.';
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) return `The request’s data nests deeper than ${MAX_JSON_DEPTH} levels.`;
    for (const [name, member] of Object.entries(value)) {
      if (UNSTORABLE.test(name)) return 'The request’s data holds a NUL character or an unpaired surrogate, which cannot be stored.';
      pending.push({ value: member, depth: depth + 1 });
    }
  }
  return undefined;
}

/**
 * Refuses, with 400, a JSON body `unacceptableJson` finds fault with. A
 * guard, so that it runs once the body is parsed (on either adapter) and
 * before any interceptor claims a key or pipe validates: nothing is stored.
 * For a GraphQL resolver it checks the field's arguments too: a string
 * literal in the query (`sku: "a\u0000b"`) reaches them unescaped, where
 * the JSON body holds only its escape.
 */
@Injectable()
export class JsonBodyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const reason = unacceptableJson(requestOf<{ body?: unknown }>(context).body) ?? (context.getType<string>() === 'graphql' ? unacceptableJson(context.getArgByIndex(1)) : undefined);
    if (reason !== undefined) throw new BadRequestException(reason);
    return true;
  }
}

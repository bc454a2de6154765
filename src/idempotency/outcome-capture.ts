import { HttpException, StreamableFile } from '@nestjs/common';
import type { AbstractHttpAdapter } from '@nestjs/core';
import { UnstorableResponseException } from './idempotency.exceptions.js';
import type { IdempotentRoute } from './idempotent-route.js';
import type { RecordedOutcome } from './recorded-outcome.js';

const JSON_CONTENT = 'application/json; charset=utf-8';

/**
 * Turns what a handler returned into the outcome to record. The module sends
 * exactly this text, so the first response and every replay are the same bytes.
 */
export function captureSuccess(result: unknown, route: IdempotentRoute, adapter: AbstractHttpAdapter, response: unknown): RecordedOutcome {
  if (adapter.isHeadersSent(response)) throw new UnstorableResponseException('a response it wrote itself');
  return successOutcome(route.successStatus, result, (name) => adapter.getHeader(response, name), route.replayHeaders);
}

/**
 * The outcome of a success with `status`: the body as the exact text to
 * send (JSON for objects, a string as is), and the allowlisted headers that
 * `headerOf` (by lower-case name) gives, plus a default content type.
 */
export function successOutcome(status: number, result: unknown, headerOf: (name: string) => unknown, replayHeaders: readonly string[]): RecordedOutcome {
  const unstorable = describeUnstorable(result);
  if (unstorable) throw new UnstorableResponseException(unstorable);
  const body = result === undefined || result === null ? null : typeof result === 'string' ? result : JSON.stringify(result);
  const headers: Record<string, string> = {};
  for (const name of replayHeaders) {
    const value = headerOf(name);
    if (value !== undefined) headers[name] = String(value);
  }
  if (body !== null && replayHeaders.includes('content-type')) {
    headers['content-type'] ??= typeof result === 'string' ? 'text/plain; charset=utf-8' : JSON_CONTENT;
  }
  return { status, headers, body };
}

/** A recorded error renders as Nest's default exception body would. */
export function captureError(error: HttpException): RecordedOutcome {
  const status = error.getStatus();
  const response = error.getResponse();
  const body = typeof response === 'string' ? { statusCode: status, message: response } : response;
  return { status, headers: { 'content-type': JSON_CONTENT }, body: JSON.stringify(body) };
}

function describeUnstorable(result: unknown): string | undefined {
  if (result instanceof StreamableFile) return 'a StreamableFile';
  if (result instanceof Uint8Array) return 'a binary buffer';
  if (typeof (result as { pipe?: unknown } | null)?.pipe === 'function') return 'a stream';
  return undefined;
}

import { HttpException, StreamableFile } from '@nestjs/common';
import type { AbstractHttpAdapter } from '@nestjs/core';
import { STATUS_CODES } from 'node:http';
import { type ProblemDetails, UnstorableResponseException } from '../errors/idempotency.exceptions.js';
import type { RecordedOutcome } from './recorded-outcome.js';
import { ResponseGuard } from './response-guard.js';

const JSON_CONTENT = 'application/json; charset=utf-8';
/** How to answer what cannot be recorded, said in the problem's detail. */
const WRITE_NOTHING = "Return the body instead, and set the status and headers on the response (@Res({ passthrough: true }): res.status(303), res.setHeader('Location', url)).";
/** The same, for a value that is binary or a stream. */
export const TEXT_ONLY = 'Return text or JSON (a file\'s id or URL, say), or leave the route without @Idempotent().';
const PROBLEM_CONTENT = 'application/problem+json';
/** What Nest's exceptions put in their response besides the message: the problem document says it otherwise. */
const NEST_ERROR_FIELDS = new Set(['statusCode', 'error', 'message']);

/**
 * Turns what a handler returned into the outcome to record, with the status
 * the response carries: the route's (`@HttpCode()`, else Nest's default for
 * the method), or what the handler set through `@Res({ passthrough: true })`.
 * The module sends exactly this text, so the first response and every replay
 * are the same bytes.
 */
export function captureSuccess(result: unknown, route: { successStatus: number; replayHeaders: readonly string[] }, adapter: AbstractHttpAdapter, response: unknown): RecordedOutcome {
  const written = ResponseGuard.of(response)?.written ?? (adapter.isHeadersSent(response) ? 'the response' : undefined);
  if (written) throw new UnstorableResponseException(`a response it wrote itself (${written})`, WRITE_NOTHING);
  const status = (response as { statusCode?: unknown }).statusCode;
  const headerOf = (name: string) => adapter.getHeader(response, name);
  const json = expressJsonOf(response);
  // Fastify sends a null result as the JSON text null; Express, as an empty body.
  const nullIsJson = adapter.getType() === 'fastify';
  return successOutcome(typeof status === 'number' ? status : route.successStatus, result, headerOf, { replayHeaders: route.replayHeaders, json, nullIsJson });
}

/**
 * How Express's `res.json()` writes a value on this response: with the app's
 * `json replacer`, `json spaces` and `json escape` settings, which Nest's
 * reply would have applied to an object. Undefined where none is set, or the
 * response is not Express's (Fastify's reply writes `JSON.stringify`'s text).
 */
function expressJsonOf(response: unknown): ((value: unknown) => string) | undefined {
  const app = (response as { app?: { get?(setting: string): unknown } } | null)?.app;
  if (typeof app?.get !== 'function') return undefined;
  const replacer = app.get('json replacer') as ((key: string, value: unknown) => unknown) | undefined;
  const spaces = app.get('json spaces') as string | number | undefined;
  const escape = Boolean(app.get('json escape'));
  if (!replacer && !spaces && !escape) return undefined;
  return (value) => {
    const json = JSON.stringify(value, replacer, spaces);
    return escape ? json.replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : json;
  };
}

/**
 * The outcome of a success with `status`: the body as the exact text to
 * send (JSON for objects, written by `json`; a string as is; none for
 * undefined, nor for null unless `nullIsJson`), and the allowlisted headers that
 * `headerOf` (by lower-case name) gives, and the body's content type (the
 * one the handler set, else a default), allowlisted or not.
 */
export function successOutcome(status: number, result: unknown, headerOf: (name: string) => unknown, { replayHeaders, json = JSON.stringify, nullIsJson = false }: BodyWriting): RecordedOutcome {
  const unstorable = describeUnstorable(result);
  if (unstorable) throw new UnstorableResponseException(unstorable, TEXT_ONLY);
  const empty = result === undefined || (result === null && !nullIsJson);
  const body = empty ? null : typeof result === 'string' ? result : json(result);
  const headers: Record<string, string> = {};
  for (const name of replayHeaders) {
    const value = headerOf(name);
    if (value !== undefined) headers[name] = String(value);
  }
  // The body's type goes with it whatever the allowlist says: the module sends the body as text, which
  // Express would otherwise label text/html.
  if (body !== null) {
    const set = headerOf('content-type');
    headers['content-type'] ??= set !== undefined ? String(set) : typeof result === 'string' ? 'text/plain; charset=utf-8' : JSON_CONTENT;
  }
  return { status, headers, body };
}

/** How a success's body and headers are written: the headers replayed, JSON's writer, and whether null is JSON's `null`. */
interface BodyWriting {
  replayHeaders: readonly string[];
  json?: (value: unknown) => string;
  nullIsJson?: boolean;
}

/**
 * A recorded error is an RFC 9457 problem document, as every error answered
 * live should be: `type` (`about:blank` unless the exception's response names
 * one), `title` (the status text unless named), `status`, and `detail` (the
 * exception's message), then the response's other fields as extension
 * members. A replay sends the same bytes with the same content type.
 */
export function captureError(error: HttpException): RecordedOutcome {
  return { status: error.getStatus(), headers: { 'content-type': PROBLEM_CONTENT }, body: JSON.stringify(problemOf(error)) };
}

function problemOf(error: HttpException): ProblemDetails & Record<string, unknown> {
  const status = error.getStatus();
  const response = error.getResponse();
  const fields: Record<string, unknown> = typeof response === 'string' ? { message: response } : { ...(response as object) };
  const { type, title, detail, status: _status, ...rest } = fields;
  const extensions = Object.fromEntries(Object.entries(rest).filter(([name]) => !NEST_ERROR_FIELDS.has(name)));
  return {
    type: typeof type === 'string' ? type : 'about:blank',
    title: typeof title === 'string' ? title : (STATUS_CODES[status] ?? 'Error'),
    status,
    detail: typeof detail === 'string' ? detail : messageOf(fields.message) ?? error.message,
    ...extensions,
  };
}

function messageOf(message: unknown): string | undefined {
  if (typeof message === 'string') return message;
  return Array.isArray(message) ? message.join('; ') : undefined;
}

function describeUnstorable(result: unknown): string | undefined {
  if (result instanceof StreamableFile) return 'a StreamableFile';
  if (result instanceof Uint8Array) return 'a binary buffer';
  if (typeof (result as { pipe?: unknown } | null)?.pipe === 'function') return 'a stream';
  return undefined;
}

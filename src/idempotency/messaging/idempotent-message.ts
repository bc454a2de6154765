import { Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { IdempotentMessageOptions, IdempotentOptions, ResolvedModuleOptions } from '../options/idempotency.options.js';
import { IDEMPOTENT_ROUTE, RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { MESSAGE_HANDLER_TYPE_METADATA, MESSAGE_PATTERN_METADATA } from '../http/nest-internals.js';

/** The header an outbox event carries its operation identity in. */
export const OPERATION_ID_HEADER = 'Operation-Id';
/** NATS's message id header, which JetStream deduplicates publishes on. */
export const NATS_MESSAGE_ID_HEADER = 'Nats-Msg-Id';

/** Everything the message flow needs about one handler, worked out once. */
export interface IdempotentMessageHandler {
  operation: string;
  retention: number;
  wait: number;
  keyOf(data: unknown, context: unknown): string | undefined;
  scopeOf(data: unknown, context: unknown): string;
}

/** Reads `@Idempotent()` metadata of message handlers once per handler and keeps the result. */
@Injectable()
export class IdempotentMessageHandlers {
  private readonly handlers = new Map<Function, IdempotentMessageHandler | null>();

  constructor(
    private readonly reflector: Reflector,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  /** The handler's settings, or undefined where it is not `@Idempotent()`. */
  of(controller: Function, handler: Function): IdempotentMessageHandler | undefined {
    let settings = this.handlers.get(handler);
    if (settings === undefined) {
      const options = this.reflector.get<(IdempotentOptions & IdempotentMessageOptions) | undefined>(IDEMPOTENT_ROUTE, handler);
      settings = options ? this.build(options, controller, handler) : null;
      this.handlers.set(handler, settings);
    }
    return settings ?? undefined;
  }

  private build(options: IdempotentOptions & IdempotentMessageOptions, controller: Function, handler: Function): IdempotentMessageHandler {
    const where = `@Idempotent() on ${controller.name}.${handler.name}`;
    if (options.phases) throw new IdempotencyConfigurationError(`${where}: phased operations run on HTTP routes only; a message handler runs in one transaction.`);
    const retention = options.retention ?? this.options.retention;
    const wait = options.wait ?? this.options.wait;
    const tenantOf = options.messageTenant ?? (() => undefined);
    const version = options.version === undefined ? '' : ` version:${encodeURIComponent(options.version)}`;
    return {
      operation: options.operation ?? defaultOperation(handler),
      retention,
      wait,
      keyOf: options.messageKey ? (data, context) => options.messageKey!(data, context) ?? undefined : (_data, context) => headerOf(context, OPERATION_ID_HEADER) ?? headerOf(context, NATS_MESSAGE_ID_HEADER),
      // The same scopes as HTTP requests: "tenant:" and "anonymous" never collide.
      scopeOf: (data, context) => {
        const tenant = tenantOf(data, context);
        return (tenant === undefined || tenant === null ? 'anonymous' : `tenant:${encodeURIComponent(tenant)}`) + version;
      },
    };
  }
}

/** `event order.created` or `message get-order`, from the handler's pattern. */
function defaultOperation(handler: Function): string {
  const patterns: unknown[] = Reflect.getMetadata(MESSAGE_PATTERN_METADATA, handler) ?? [];
  const kind = Reflect.getMetadata(MESSAGE_HANDLER_TYPE_METADATA, handler) === 2 ? 'event' : 'message';
  const pattern = patterns[0];
  return `${kind} ${typeof pattern === 'string' ? pattern : JSON.stringify(pattern)}`;
}

/** A header through the transport context's `getHeaders()` (NATS headers have `get(name)`; plain objects are read by name). */
function headerOf(context: unknown, name: string): string | undefined {
  const headers = (context as { getHeaders?: () => unknown } | undefined)?.getHeaders?.();
  if (!headers) return undefined;
  const value = typeof (headers as { get?: unknown }).get === 'function' ? (headers as { get(name: string): string }).get(name) : (headers as Record<string, unknown>)[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

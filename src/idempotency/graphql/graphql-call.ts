import type { ExecutionContext } from '@nestjs/common';
import { headerValues, parseIdempotencyKey, type ParsedIdempotencyKey } from '../http/idempotency-key.js';
import type { GraphqlOutputType, GraphqlSchemaTypes } from './graphql-field-value.js';

/**
 * The metadata keys `@nestjs/graphql` sets on resolver methods, read by
 * value so that the module never loads `@nestjs/graphql` (an app without
 * GraphQL has no reason to install it). `graphql-call.spec.ts` checks them
 * against the package, and fails when it renames them.
 */
export const RESOLVER_TYPE_METADATA = 'graphql:resolver_type';
export const RESOLVER_NAME_METADATA = 'graphql:resolver_name';
export const RESOLVER_PROPERTY_METADATA = 'graphql:resolve_property';

/** The resolver type `@Mutation()` sets; `@Query()` sets `Query`, `@ResolveField()` none (it sets the property key). */
export const MUTATION = 'Mutation';

/** `graphql Mutation.createOrder` for a `@Mutation()` resolver method of the field `createOrder`; undefined for any other method. */
export function mutationOperationOf(handler: Function): string | undefined {
  if (Reflect.getMetadata(RESOLVER_TYPE_METADATA, handler) !== MUTATION) return undefined;
  return `graphql ${MUTATION}.${Reflect.getMetadata(RESOLVER_NAME_METADATA, handler) ?? handler.name}`;
}

/** The argument of a mutation field that carries its key. */
export const KEY_ARGUMENT = 'idempotencyKey';

/** A selection set as graphql-js's AST holds it: fields, fragment spreads and inline fragments. */
interface SelectionSet {
  selections: ReadonlyArray<{ kind: string; name?: { value: string }; selectionSet?: SelectionSet }>;
}

/** The parts of graphql-js's `GraphQLResolveInfo` the module reads. */
interface ResolveInfo {
  /** Where the field's value goes in `data`: its alias, else its name. */
  path: { key: string | number };
  operation: { selectionSet: SelectionSet };
  /** The operation's named fragments, by name. */
  fragments: Record<string, { selectionSet: SelectionSet } | undefined>;
  /** The field's type, by which its value is recorded and replayed. */
  returnType: GraphqlOutputType;
  schema: GraphqlSchemaTypes;
}

/** One resolution of a mutation field. */
export interface GraphqlCall {
  /** The field's arguments, as GraphQL coerced them. */
  args: Record<string, unknown>;
  /** The GraphQL context: one per operation, shared by all of its fields. */
  context: object | undefined;
  info: ResolveInfo;
  /** The HTTP request, the context's `req` (both Nest drivers put it there). */
  request: unknown;
  /** The HTTP response, where the context reaches it: Express's `req.res`, Mercurius's `reply`. */
  response: unknown;
}

/**
 * Reads a resolver's arguments, `[root, args, context, info]`, as
 * `GqlExecutionContext` does, without loading `@nestjs/graphql`.
 */
export function graphqlCallOf(context: ExecutionContext): GraphqlCall {
  const [, args, graphqlContext, info] = context.getArgs<[unknown, Record<string, unknown> | undefined, Record<string, any> | undefined, ResolveInfo]>();
  const request = graphqlContext?.req;
  return { args: args ?? {}, context: graphqlContext, info, request, response: graphqlContext?.res ?? request?.res ?? graphqlContext?.reply };
}

/** A call's key and what carried it, for messages: the argument wins over the header. */
export interface CallKey {
  key: ParsedIdempotencyKey;
  source: string;
}

/** The key of a call: its `idempotencyKey` argument, else its request's key header, parsed by the same rules. */
export function keyOf(call: GraphqlCall, headerName: string): CallKey {
  const argument = call.args[KEY_ARGUMENT];
  if (argument !== undefined && argument !== null) return { key: parseIdempotencyKey([String(argument)]), source: `${KEY_ARGUMENT} argument` };
  const values = call.request ? headerValues(call.request as Parameters<typeof headerValues>[0], headerName) : [];
  return { key: parseIdempotencyKey(values), source: `${headerName} header` };
}

/** The field's arguments without its key: what its fingerprint covers. */
export function argumentsOf(call: GraphqlCall): Record<string, unknown> {
  const { [KEY_ARGUMENT]: _key, ...args } = call.args;
  return args;
}

/**
 * Whether the operation selects this one field and nothing else, so that its
 * HTTP response is the field's: its fields counted once fragments, spread or
 * inline, are flattened (`... on Mutation { a: x b: x }` is two).
 */
export function isOnlyField(info: ResolveInfo): boolean {
  let fields = 0;
  const spread = new Set<string>();
  const pending = [info.operation.selectionSet];
  for (let set = pending.pop(); set; set = pending.pop()) {
    for (const selection of set.selections) {
      if (selection.kind === 'Field') fields += 1;
      else if (selection.kind === 'InlineFragment' && selection.selectionSet) pending.push(selection.selectionSet);
      else if (selection.kind === 'FragmentSpread' && selection.name && !spread.has(selection.name.value)) {
        spread.add(selection.name.value);
        const fragment = info.fragments[selection.name.value];
        if (fragment) pending.push(fragment.selectionSet);
      }
    }
    if (fields > 1) return false;
  }
  return fields === 1;
}

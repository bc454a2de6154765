import { StreamableFile } from '@nestjs/common';
import { UnstorableResponseException } from '../errors/idempotency.exceptions.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';
import { TEXT_ONLY } from '../outcome/outcome-capture.js';

/**
 * The parts of graphql-js's output types the module reads, told apart by
 * their `Symbol.toStringTag` (`GraphQLNonNull`, `GraphQLList`,
 * `GraphQLScalarType`, ...), so that it never loads `graphql` itself.
 */
export interface GraphqlOutputType {
  readonly [Symbol.toStringTag]: string;
  readonly ofType?: GraphqlOutputType;
  serialize?(value: unknown): unknown;
  parseValue?(value: unknown): unknown;
  getFields?(): Record<string, { type: GraphqlOutputType }>;
}

/** The schema, to find the concrete type of a value that names it (`__typename`) under an interface or a union. */
export interface GraphqlSchemaTypes {
  getType(name: string): unknown;
}

/** How a scalar or enum value is converted: serialized for the record, parsed back for the replay. */
type LeafConversion = (type: GraphqlOutputType, value: unknown) => unknown;

const serialized: LeafConversion = (type, value) => type.serialize!(value);
const parsed: LeafConversion = (type, value) => type.parseValue!(value);

/**
 * What a mutation field records: its resolver's value as JSON, with every
 * scalar and enum in it serialized by its GraphQL type, as the response's
 * `data` shows it (a `DateTime` as its ISO string). Object values keep
 * their other own properties too, as JSON, for field resolvers that read
 * them. With no type known, the value's plain JSON.
 */
export function recordFieldValue(value: unknown, type: GraphqlOutputType | undefined, schema?: GraphqlSchemaTypes): RecordedOutcome {
  if (value instanceof StreamableFile || value instanceof Uint8Array || typeof (value as { pipe?: unknown } | null)?.pipe === 'function') {
    throw new UnstorableResponseException('binary data or a stream', TEXT_ONLY);
  }
  const recorded = type ? convert(value, type, serialized, schema) : value;
  return { status: 200, headers: {}, body: JSON.stringify(recorded ?? null) };
}

/**
 * The field's value from its record: the JSON, with each scalar and enum
 * parsed back by its type (a `DateTime` becomes a `Date`), for GraphQL to
 * serialize again. The field resolves to it on the first execution as on
 * every replay, so its part of `data` is the same each time.
 */
export function fieldValueOf(outcome: RecordedOutcome, type: GraphqlOutputType | undefined, schema?: GraphqlSchemaTypes): unknown {
  const json: unknown = outcome.body === null ? null : JSON.parse(outcome.body);
  return type ? convert(json, type, parsed, schema) : json;
}

function convert(value: unknown, type: GraphqlOutputType, leaf: LeafConversion, schema: GraphqlSchemaTypes | undefined): unknown {
  if (value === null || value === undefined) return null;
  switch (type[Symbol.toStringTag]) {
    case 'GraphQLNonNull':
      return convert(value, type.ofType!, leaf, schema);
    case 'GraphQLList':
      return typeof value === 'object' && Symbol.iterator in value ? Array.from(value as Iterable<unknown>, (item) => convert(item, type.ofType!, leaf, schema)) : value;
    case 'GraphQLScalarType':
    case 'GraphQLEnumType':
      return leaf(type, value);
    case 'GraphQLObjectType':
      return typeof value === 'object' ? convertFields(value as Record<string, unknown>, type, leaf, schema) : value;
    default: {
      // An interface or a union: only a value that names its type can be followed.
      const concrete = typeof (value as { __typename?: unknown }).__typename === 'string' ? schema?.getType((value as { __typename: string }).__typename) : undefined;
      return concrete ? convert(value, concrete as GraphqlOutputType, leaf, schema) : value;
    }
  }
}

/** The object's own properties, and each field of its type it has (getters included), converted by the field's type. */
function convertFields(value: Record<string, unknown>, type: GraphqlOutputType, leaf: LeafConversion, schema: GraphqlSchemaTypes | undefined): Record<string, unknown> {
  const converted: Record<string, unknown> = { ...value };
  for (const [name, field] of Object.entries(type.getFields!())) {
    if (name in value) converted[name] = convert(value[name], field.type, leaf, schema);
  }
  return converted;
}

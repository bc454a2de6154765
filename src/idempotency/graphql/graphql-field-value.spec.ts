import { GraphQLISODateTime, GraphQLTimestamp } from '@nestjs/graphql';
import { GraphQLEnumType, GraphQLID, GraphQLInt, GraphQLList, GraphQLNonNull, GraphQLObjectType, GraphQLSchema, GraphQLString, GraphQLUnionType } from 'graphql';
import { UnstorableResponseException } from '../errors/idempotency.exceptions.js';
import { fieldValueOf, type GraphqlOutputType, recordFieldValue } from './graphql-field-value.js';

const Status = new GraphQLEnumType({ name: 'Status', values: { CREATED: { value: 'created' }, SHIPPED: { value: 'shipped' } } });
const Line = new GraphQLObjectType({ name: 'Line', fields: { sku: { type: GraphQLString }, at: { type: GraphQLTimestamp } } });
const Order = new GraphQLObjectType({
  name: 'Order',
  fields: {
    id: { type: new GraphQLNonNull(GraphQLID) },
    status: { type: Status },
    createdAt: { type: new GraphQLNonNull(GraphQLISODateTime) },
    lines: { type: new GraphQLList(new GraphQLNonNull(Line)) },
    label: { type: GraphQLString },
  },
});
const Refund = new GraphQLObjectType({ name: 'Refund', fields: { at: { type: GraphQLISODateTime } } });
const Outcome = new GraphQLUnionType({ name: 'Outcome', types: [Order, Refund] });
const schema = new GraphQLSchema({ query: new GraphQLObjectType({ name: 'Query', fields: { order: { type: Order }, outcome: { type: Outcome } } }) });

const at = new Date('2026-11-30T10:00:00.000Z');
const asType = (type: unknown) => type as GraphqlOutputType;

describe('a mutation field value, recorded and replayed by its type', () => {
  it('records scalars and enums as GraphQL serializes them, and parses them back for the replay', () => {
    class OrderValue {
      id = 7;
      status = 'shipped';
      createdAt = at;
      lines = new Set([{ sku: 'book-42', at }]);
      internalRef = 'kept for field resolvers';
      get label() {
        return `order ${this.id}`;
      }
    }
    const outcome = recordFieldValue(new OrderValue(), asType(new GraphQLNonNull(Order)), schema);
    expect(JSON.parse(outcome.body!)).toEqual({
      id: '7',
      status: 'SHIPPED',
      createdAt: '2026-11-30T10:00:00.000Z',
      lines: [{ sku: 'book-42', at: at.getTime() }],
      internalRef: 'kept for field resolvers',
      label: 'order 7',
    });
    const replayed = fieldValueOf(outcome, asType(new GraphQLNonNull(Order)), schema) as Record<string, unknown>;
    expect(replayed).toEqual({ id: '7', status: 'shipped', createdAt: at, lines: [{ sku: 'book-42', at }], internalRef: 'kept for field resolvers', label: 'order 7' });
    // What GraphQL then serializes is what the first execution's value serialized to.
    expect(GraphQLISODateTime.serialize(replayed.createdAt)).toBe('2026-11-30T10:00:00.000Z');
  });

  it('follows a union or an interface only where the value names its type', () => {
    const named = recordFieldValue({ __typename: 'Refund', at }, asType(Outcome), schema);
    expect(fieldValueOf(named, asType(Outcome), schema)).toEqual({ __typename: 'Refund', at });
    const unnamed = recordFieldValue({ at }, asType(Outcome), schema);
    expect(fieldValueOf(unnamed, asType(Outcome), schema)).toEqual({ at: '2026-11-30T10:00:00.000Z' });
  });

  it('records null for no value, plain JSON without a type, and refuses streams and buffers', () => {
    expect(recordFieldValue(undefined, asType(GraphQLInt)).body).toBe('null');
    expect(fieldValueOf(recordFieldValue(undefined, asType(GraphQLInt)), asType(GraphQLInt))).toBeNull();
    expect(recordFieldValue({ at }, undefined).body).toBe('{"at":"2026-11-30T10:00:00.000Z"}');
    expect(() => recordFieldValue(Buffer.from('x'), asType(GraphQLString))).toThrow(UnstorableResponseException);
  });
});

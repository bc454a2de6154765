import { Field, ID, InputType, Int, ObjectType } from '@nestjs/graphql';
import { IsInt, IsOptional, IsString, Length, Max, MaxLength, Min } from 'class-validator';

/** An order, as GraphQL serves it: the same fields as the JSON of `/orders`. */
@ObjectType('Order')
export class OrderModel {
  @Field(() => ID)
  id: string;

  @Field()
  tenant: string;

  @Field()
  sku: string;

  @Field(() => Int)
  quantity: number;

  @Field(() => String, { nullable: true })
  note: string | null;

  @Field()
  status: string;

  @Field({ description: 'ISO 8601, UTC' })
  createdAt: string;
}

/** What `createOrder` takes: the body of `POST /orders`, validated by the same rules. */
@InputType()
export class CreateOrderInput {
  @Field()
  @IsString()
  @Length(1, 64)
  sku: string;

  @Field(() => Int)
  @IsInt()
  @Min(1)
  @Max(1000)
  quantity: number;

  @Field(() => String, { nullable: true })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  note?: string;
}

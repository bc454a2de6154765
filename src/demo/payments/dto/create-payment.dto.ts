import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsInt, Max, Min } from 'class-validator';

export const CURRENCIES = ['EUR', 'USD', 'GBP', 'CHF', 'JPY'] as const;

export class CreatePaymentDto {
  @ApiProperty({ minimum: 1, maximum: 100_000_000, example: 1999 })
  @IsInt()
  @Min(1)
  @Max(100_000_000)
  amountCents: number;

  @ApiProperty({ enum: CURRENCIES })
  @IsIn(CURRENCIES)
  currency: (typeof CURRENCIES)[number];
}

import type { JsMsg } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/transport-node';
import { BaseRpcContext } from '@nestjs/microservices';

/** What a JetStream message handler can take with `@Ctx()`. */
export class JetStreamContext extends BaseRpcContext<[JsMsg]> {
  /** The JetStream message itself. */
  getMessage(): JsMsg {
    return this.args[0];
  }

  /** The subject the message was published to. */
  getSubject(): string {
    return this.args[0].subject;
  }

  /** The message's headers (`Operation-Id`, `Nats-Msg-Id`, ...), which the default idempotency key is read from. */
  getHeaders(): MsgHdrs | undefined {
    return this.args[0].headers;
  }

  /** 1 on the first delivery. */
  getDeliveryCount(): number {
    return this.args[0].info.deliveryCount;
  }

  /** Tells JetStream the handler is still working, so it does not redeliver after `ackWait`. */
  working(): void {
    this.args[0].working();
  }
}

// Enqueue sqsjobs jobs from Node.js (18+) with only the AWS SDK: npm install @aws-sdk/client-sqs
// Run: SQSJOBS_QUEUE_URL=https://sqs.<region>.amazonaws.com/<account>/<queue> node enqueue.mjs
import { SQSClient, SendMessageCommand } from "@aws-sdk/client-sqs";

const sqs = new SQSClient({});
const queueUrl = process.env.SQSJOBS_QUEUE_URL;

/**
 * Send one job message; resolves to the SQS message id.
 * args: IDs and scalars only (string, number, boolean, null, or flat arrays of them).
 * delaySeconds: 0..900 (standard queues only). traceId: shows up as trace_id in the job's log lines.
 */
export async function enqueue(job, args, { delaySeconds = 0, traceId, jobVersion = 1 } = {}) {
  // No "key": the worker derives it from the job's key template, exactly as a Python producer's would be.
  const body = { v: 1, job, job_version: jobVersion, args, enqueued_at: Date.now() / 1000 };
  const attributes = { "sqsjobs.job": { DataType: "String", StringValue: job } };
  if (traceId) {
    attributes["sqsjobs.trace_id"] = { DataType: "String", StringValue: traceId };
  }
  const { MessageId } = await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: JSON.stringify(body),
      MessageAttributes: attributes,
      // FIFO queues refuse a per-message delay: send DelaySeconds only when there is one.
      ...(delaySeconds > 0 ? { DelaySeconds: delaySeconds } : {}),
    }),
  );
  return MessageId;
}

const messageId = await enqueue("invoice-email", { invoice_id: 43 }, { traceId: "req-node-1" });
console.log(messageId);

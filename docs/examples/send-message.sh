#!/bin/sh
# Enqueue invoice-email(invoice_id=42) with the AWS CLI. SQSJOBS_QUEUE_URL is the jobs queue's URL
# (the stack output JobsQueueUrl); the usual AWS credentials and region apply.
aws sqs send-message \
  --queue-url "$SQSJOBS_QUEUE_URL" \
  --message-body '{"v":1,"job":"invoice-email","job_version":1,"args":{"invoice_id":42}}' \
  --message-attributes '{"sqsjobs.job":{"DataType":"String","StringValue":"invoice-email"},"sqsjobs.trace_id":{"DataType":"String","StringValue":"req-7f3a"}}' \
  ${AWS_ENDPOINT_URL:+--endpoint-url "$AWS_ENDPOINT_URL"}  # AWS CLI v1 ignores AWS_ENDPOINT_URL by itself

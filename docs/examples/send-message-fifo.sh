#!/bin/sh
# The same job on a FIFO queue: no --delay-seconds; a group (here the invoice's account) and a
# deduplication id, which sqsjobs derives from the idempotency key (SHA-256, hex) so a resend is dropped.
KEY="invoice-email:42"
aws sqs send-message \
  --queue-url "$SQSJOBS_QUEUE_URL" \
  --message-body "{\"v\":1,\"job\":\"invoice-email\",\"job_version\":1,\"key\":\"$KEY\",\"args\":{\"invoice_id\":42}}" \
  --message-attributes '{"sqsjobs.job":{"DataType":"String","StringValue":"invoice-email"}}' \
  --message-group-id "account-7" \
  --message-deduplication-id "$(printf '%s' "$KEY" | sha256sum | cut -c1-64)" \
  ${AWS_ENDPOINT_URL:+--endpoint-url "$AWS_ENDPOINT_URL"}  # AWS CLI v1 ignores AWS_ENDPOINT_URL by itself

"""The producer's side: envelopes, messages, sizes, routing, delays and the SQS sends."""

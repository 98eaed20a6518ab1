"""The lease primitive and its stores: the rules of each operation, DynamoDB and in-memory."""

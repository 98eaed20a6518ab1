"""The batch flow: an SQS batch in; each record claimed, run, recorded, then acknowledged, returned or dead-lettered."""

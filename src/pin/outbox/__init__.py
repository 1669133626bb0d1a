"""The transactional outbox shared by every context, and its relay to Kafka."""

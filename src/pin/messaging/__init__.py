"""Integration-event plumbing shared by producers and consumers: contracts, topics, Kafka clients."""

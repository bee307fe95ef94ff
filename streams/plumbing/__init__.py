"""The worker's plumbing, shared by the HTTP face and the stages: configuration, metrics,
health, the failure policy, messages, the producer, dead letters, topics, staged agents.
Imports neither the HTTP face nor the stages."""

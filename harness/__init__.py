"""Start and stop a real local stack (Kafka broker, Postgres, worker) for tests and benchmarks."""

"""What arrives and what is refused: raw bytes parsed into typed events, the error taxonomy
(each failure retriable or not), dead letters as kept and shown, and deterministic ids."""

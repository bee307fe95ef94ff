"""The HTTP face: views that parse a request, call the read core or publish an event, and
render a declared answer (memstream_client/answers/). Shared helpers here (auth, params, pages,
publishing); the views in rooms: memory/ (writes and records), recall/ (search, context,
summary, fix patterns, graph, gaps), operations/ (runs, planning, consolidation, dead
letters, keys); public routes: status, openapi, browser (`ui/`). Never a stage: a write is
published to Kafka, not applied here; a view imports no other view."""

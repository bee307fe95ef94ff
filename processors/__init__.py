"""The pure domain: no I/O, nothing imported from `streams/` or `stores/`. One package per
domain (events, text, memory, recall, consolidation, knowledge, runs, planning, documents, the
HTTP API's rules); `llm_prompts` holds what the optional LLM hook is asked, for all of them."""

"""The pure domain: no I/O, nothing imported from `streams/` or `stores/`."""

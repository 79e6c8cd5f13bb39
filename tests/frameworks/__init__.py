"""Real agent frameworks, instrumented as their users instrument them, run against a scripted
model server and a running `mast-otel serve`."""

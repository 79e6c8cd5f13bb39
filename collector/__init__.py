"""The mast-otel service: OTLP receivers, the pipeline that wires the stages, exporters,
configuration, health and self-metrics, and the command line."""

__version__ = "0.1.0"

"""A scripted SRE agent triaging a Kubernetes incident, instrumented with the OpenTelemetry
SDK: the demo's example runs and the end-to-end tests' traffic."""

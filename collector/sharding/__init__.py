"""Runs spread over worker processes by trace id: `route` splits an export request into one
request per worker without decoding its records; `workers` runs the worker processes."""

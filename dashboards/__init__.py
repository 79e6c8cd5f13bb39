"""Grafana dashboards and alert rules for the engineer on call, as code.

`generate` writes the dashboards' JSON, the Grafana provisioning files and the Prometheus rules
from the modules here; `push` installs them into a running Grafana through its HTTP API. Each
dashboard module keeps every SQL it runs in one `SQL` mapping at its top, over the table
expressions of `sources`, so pointing a panel at a rollup is one edit.
"""
